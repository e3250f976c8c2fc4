"""Documents per second per core for the clean stage and the heuristic filter chain.

    .venv/bin/python jobs/bench_filter.py [--repeat 20] [--chain jobs/filters/heuristic_en.yaml]

Input: the Rust book pages of jobs/data/sample.jsonl.gz (real documentation prose with code
blocks, about 10 kB each), repeated ``--repeat`` times, as one partition. Each step runs the
stage's pure pandas function in this process with Arrow limited to one thread, so the figure is
per core; a stage on N workers scales by partitions. Best of ``--runs`` timings. For scale, the
same pages through ftfy.fix_text one document at a time (what a naive clean does) and the cost of
each filter of the chain on its own are printed too.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def best(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeat", type=int, default=20, help="copies of the 130 pages (default 20)")
    p.add_argument("--runs", type=int, default=3, help="timings per step; the best is reported (default 3)")
    p.add_argument("--chain", default=os.path.join(ROOT, "jobs/filters/heuristic_en.yaml"))
    p.add_argument("--data", default=os.path.join(ROOT, "jobs/data/sample.jsonl.gz"))
    args = p.parse_args()

    import ftfy
    import pandas as pd
    import pyarrow as pa

    from curate.stages.clean import CleanSettings, clean
    from curate.stages.dataset import STRING
    from curate.stages.filters.base import ScoreFilter, Texts, build_chain, load_chain

    pa.set_cpu_count(1)
    with gzip.open(args.data, "rt", encoding="utf-8") as f:
        pages = [json.loads(line) for line in f]
    docs = [{**d, "id": f"{d['id']}-{i}"} for i in range(args.repeat) for d in pages]
    df = pd.DataFrame(docs).astype(STRING)
    n, mb = len(df), df["text"].str.len().sum() / 1e6
    print(f"{n} documents, {mb:.1f} M characters ({mb * 1e6 / n / 1e3:.1f} k per document), one core\n")

    settings = CleanSettings()
    t_clean = best(lambda: clean(df, settings), args.runs)
    cleaned = clean(df, settings)
    cleaned = cleaned[cleaned["_reason"].isna()].drop(columns=["_reason"])
    chain = build_chain(load_chain(args.chain))
    t_chain = best(lambda: ScoreFilter(chain).apply(cleaned), args.runs)
    config = settings.ftfy_config()
    sample = df["text"].tolist()[: max(1, n // 10)]
    t_ftfy = best(lambda: [ftfy.fix_text(t, config) for t in sample], 1) * n / len(sample)

    def nemo_style_ngrams(text):
        """NeMo Curator's per-document Python for the 9 n-gram filters (str.split, tuples, dicts)."""
        words = text.split()
        for n in (2, 3, 4):
            grams = list(zip(*[words[i:] for i in range(n)]))
            counts = {}
            for g in grams:
                counts[g] = counts.get(g, 0) + 1
            if counts:
                top = " ".join(max(counts, key=counts.get))
                len(text) - len(text.replace(top, ""))
        for n in range(5, 11):
            grams = list(zip(*[words[i:] for i in range(n)]))
            seen, dup, overlap = {}, 0, 0
            for g in grams:
                seen[g] = seen.get(g, 0) + 1
                if seen[g] > 1:
                    dup += sum(len(w) for w in g[overlap:]) + min(n - overlap, n - 1)
                    overlap = n
                overlap = max(overlap - 1, 0)

    ngram_filters = [f for f in chain if f.kind in ("top_ngrams", "duplicate_ngrams")]
    texts_all = cleaned["text"].tolist()
    t_ours_ngrams = best(lambda: [f.score_texts(t) for t in [Texts(cleaned["text"])] for f in ngram_filters],
                         args.runs)
    part = texts_all[: max(1, len(texts_all) // 10)]
    t_nemo_ngrams = best(lambda: [nemo_style_ngrams(t) for t in part], 1) * len(texts_all) / len(part)

    rows = [
        ("clean (ftfy on lines that need it, NFC, controls, whitespace)", t_clean, n),
        (f"filter chain {os.path.relpath(args.chain, ROOT)} ({len(chain)} filters)", t_chain, len(cleaned)),
        ("for scale: ftfy.fix_text per whole document (estimated from 10%)", t_ftfy, n),
        (f"the {len(ngram_filters)} n-gram filters, vectorised (words split included)", t_ours_ngrams, len(cleaned)),
        ("for scale: same, NeMo-style Python per document (estimated from 10%)", t_nemo_ngrams, len(cleaned)),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"{'step'.ljust(width)}  {'seconds':>8}  {'docs/s/core':>11}  {'MB/s/core':>9}")
    for name, secs, count in rows:
        print(f"{name.ljust(width)}  {secs:8.2f}  {count / secs:11,.0f}  {mb * count / n / secs:9.1f}")
    print(f"\nclean is {t_ftfy / t_clean:.1f}x faster than ftfy per whole document on this text;")
    print(f"the n-gram filters are {t_nemo_ngrams / t_ours_ngrams:.1f}x faster than per-document Python")

    texts = Texts(cleaned["text"])
    costs = []
    for flt in chain:  # each filter on a fresh batch: includes the features it needs
        texts = Texts(cleaned["text"])
        start = time.perf_counter()
        flt.score_texts(texts)
        costs.append((time.perf_counter() - start, flt.reason))
    total = sum(c for c, _ in costs)
    print(f"\ncostliest filters alone (sum {total:.2f} s; the chain shares words, lines and n-grams):")
    for secs, name in sorted(costs, reverse=True)[:6]:
        print(f"  {name:28s} {secs:6.2f} s  {len(cleaned) / secs:10,.0f} docs/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
