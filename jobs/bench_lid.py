"""Language identification side by side: fastText LID-176, CLD2 and py3langid on one labelled set.

    .venv/bin/python jobs/bench_lid.py [--docs 200] [--words 40] [--repeat 3]

The labelled set is built from text that ships in a package: jusText's stop-word lists (the most
frequent words of each language's Wikipedia, one list per language). A document of language L is
``--words`` words drawn (seeded) from L's list, so every document is real vocabulary of L, without
the names, numbers and code that make real pages easy or hard. 16 languages, ``--docs`` each, including
close pairs (Spanish/Portuguese/Catalan/Italian, Czech/Slovak, Danish/Swedish/Norwegian, Russian/
Ukrainian/Bulgarian) that separate the identifiers. Printed per identifier: accuracy overall and per
language, and documents per second on one core (CPU time of the identification calls only, median of
``--repeat``, implementations alternated).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

#: jusText stop list name -> ISO 639-1 code (what every identifier here answers)
LANGUAGES = {"English": "en", "German": "de", "French": "fr", "Spanish": "es", "Portuguese": "pt",
             "Italian": "it", "Catalan": "ca", "Dutch": "nl", "Danish": "da", "Swedish": "sv",
             "Czech": "cs", "Slovak": "sk", "Polish": "pl", "Russian": "ru", "Ukrainian": "uk", "Bulgarian": "bg"}


def labelled_set(docs: int, words: int, seed: int = 0) -> list[tuple[str, str]]:
    import justext

    rng = random.Random(seed)
    out = []
    for name, code in LANGUAGES.items():
        vocabulary = sorted(justext.get_stoplist(name))
        for _ in range(docs):
            out.append((code, " ".join(rng.choice(vocabulary) for _ in range(words))))
    return out


def run_cld2(texts):
    from curate.stages.extract.language import detect

    return [detect(t)[1] for t in texts]


def run_py3langid(texts):
    from curate.stages.extract.language import identify

    return [identify(t)[0] for t in texts]


def run_lid176(texts):
    from curate.stages.extract.language import identify_lid176

    return [lang for lang, _ in identify_lid176(texts)]


IDENTIFIERS = {"fastText LID-176": run_lid176, "CLD2": run_cld2, "py3langid": run_py3langid}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--docs", type=int, default=200, help="documents per language")
    p.add_argument("--words", default="4,8,40", help="words per document, one table row group per value")
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    print(f"{len(LANGUAGES)} languages x {args.docs} documents (jusText stop lists); CPU seconds of the "
          f"identification calls, median of {args.repeat}, identifiers alternated\n")
    print("| words per document | identifier | accuracy | docs/s per core | worst languages |")
    print("|---|---|---|---|---|")
    for words in (int(w) for w in args.words.split(",")):
        data = labelled_set(args.docs, words)
        truth, texts = [d[0] for d in data], [d[1] for d in data]
        for fn in IDENTIFIERS.values():  # load every model before timing
            fn(texts[:2])
        seconds: dict[str, list[float]] = {k: [] for k in IDENTIFIERS}
        answers: dict[str, list[str]] = {}
        for _ in range(args.repeat):
            for name, fn in IDENTIFIERS.items():
                t = time.process_time()
                answers[name] = fn(texts)
                seconds[name].append(time.process_time() - t)
        for name in IDENTIFIERS:
            got = answers[name]
            ok = sum(g == t for g, t in zip(got, truth))
            per = {c: sum(g == c for g, t in zip(got, truth) if t == c) / args.docs for c in LANGUAGES.values()}
            worst = ", ".join(f"{c} {v:.0%}" for c, v in sorted(per.items(), key=lambda kv: kv[1])[:3])
            rate = len(texts) / statistics.median(seconds[name])
            print(f"| {words} | {name} | {ok / len(texts):.1%} | {rate:,.0f} | {worst} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
