"""Heuristic, C4 and FineWeb filters: each keeps a good document and drops a bad one for its own
reason; edge cases (empty, whitespace only) never divide by zero; the vectorised n-gram scores
agree with a plain Python reading of their definition."""

import random
from collections import Counter

import numpy as np
import pandas as pd
import pytest

from curate.stages.dataset import STRING
from curate.stages.filters import FILTERS, get_filter
from curate.stages.filters.base import ScoreFilter, Texts

GOOD = (
    "The river runs through the old town and past the mill that was built in the last century.\n"
    "Every spring the water rises, and the people who live near the bank have learned to expect it.\n"
    "They move their boats higher, check the walls of their houses and wait with some patience.\n"
    "Children watch the flood from the bridge, while the older people talk about earlier years.\n"
    "When the water falls again, the fields are dark and rich, and the farmers are glad of it.\n"
    "Life in the valley has always followed this rhythm, and few of them would want to change that."
)

# kind, parameters, a document it keeps, a document it drops
CASES = [
    ("non_alpha_numeric", {}, GOOD, "a = {b: [c; d]; e: <f>}; " * 10),
    ("symbols_to_words", {}, GOOD, "### ### ### some words"),
    ("numbers", {}, GOOD, "Call 555 0199 2034 8812 7731 4420 now"),
    ("urls", {}, GOOD, "see https://example.com/a/very/long/path/to/some/page/index.html now"),
    ("whitespace", {}, GOOD, "a      b      c      d"),
    ("parentheses", {}, GOOD, "f(g(h(x))) [y] {z}"),
    ("longest_word", {}, GOOD, "a" * 1001),
    ("word_count", {}, GOOD, "Too short to be a document."),
    ("boilerplate_strings", {}, GOOD, "This site uses cookies.\n\nRead our privacy policy.\n\nHello there."),
    ("boilerplate_strings", {}, GOOD, GOOD + "\n\nLorem ipsum dolor sit amet."),
    ("mean_word_length", {}, GOOD, "a b c d e f g h"),
    ("mean_word_length", {}, GOOD, "incomprehensibilities " * 10),
    ("repeated_lines", {}, GOOD, "same line\nsame line\nsame line\nother line"),
    ("repeated_paragraphs", {}, GOOD, "para one\n\npara one\n\npara one\n\npara two"),
    ("repeated_lines_char", {}, GOOD, "a long line that repeats\n" * 3 + "x"),
    ("repeated_paragraphs_char", {}, GOOD, "a long paragraph that repeats\n\n" * 3 + "x"),
    ("top_ngrams", {"n": 2}, GOOD, "the cat the cat the cat the cat sat"),
    ("top_ngrams", {"n": 4}, GOOD, "one two three four " * 3 + "five"),
    ("duplicate_ngrams", {"n": 5}, GOOD, "one two three four five " * 3),
    ("duplicate_ngrams", {"n": 10}, GOOD, "alpha beta gamma delta epsilon zeta eta theta iota kappa " * 3),
    ("punctuation", {}, GOOD, "no end mark\nanother line\nthird one"),
    ("ellipsis", {}, GOOD, "wait...\nmore…\nthen it ended."),
    ("common_english_words", {}, GOOD, "Cats sleep. Dogs bark. Birds sing."),
    ("words_with_alphabets", {}, GOOD, "123 456 789 abc"),
    ("bullets", {}, GOOD, "• one\n• two\n  • three"),
    ("pornographic_urls", {}, GOOD, GOOD + " http://www.pornsite.example/x"),
    ("c4_lorem_ipsum", {}, GOOD, GOOD + "\nLorem ipsum dolor sit amet, consectetur adipiscing elit."),
    ("c4_curly_bracket", {}, "fn main() {\n}\n" + GOOD, GOOD + "\nUse the map {a: 1} in your code."),
    ("c4_sentences", {}, GOOD, "One sentence here.\nAnd a second one."),
    ("fineweb_line_punctuation", {}, GOOD, "a line\nanother line\nno marks here\nnor here\nnor there\nnor anywhere\nnor there\nnor here.\nfin"),
    ("fineweb_short_lines", {}, GOOD, "short\nlines\nhere\n" + GOOD.split("\n")[0]),
    ("fineweb_char_duplicates", {}, GOOD, GOOD + "\n" + GOOD.split("\n")[0]),
    ("fineweb_newline_ratio", {}, GOOD, "a\nb\nc\nd"),
]


@pytest.mark.parametrize("kind,params,good,bad", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_keeps_good_and_drops_bad_for_its_reason(kind, params, good, bad):
    flt = get_filter(kind)(**params)
    assert flt.keep(flt.score(good)), (kind, flt.score(good))
    assert not flt.keep(flt.score(bad)), (kind, flt.score(bad))
    frame = pd.DataFrame({"id": ["good", "bad"], "text": [good, bad]}).astype(STRING)
    out = ScoreFilter([flt]).apply(frame)
    assert out["_reason"].isna().tolist() == [True, False]
    assert out["_reason"].iloc[1] == flt.reason


#: filters without a usable default: the parameters the generic tests give them
#: filters that read files the user points at (lists, a model): their own tests write them
LIST_KINDS = ("url_blocklist", "bad_words", "hf_classifier", "perplexity")
REQUIRED = {
    "substring": {"substring": "the"},
    "regex": {"pattern": "lorem ipsum"},
    "histogram": {"chars": "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ ,.\n"},
    "token_count": {"tokenizer": "tiktoken:cl100k_base", "min": 1},
    "code_tokenizer_fertility": {"tokenizer": "tiktoken:cl100k_base"},
}


def test_the_good_document_passes_the_whole_default_chain():
    for kind in FILTERS:
        if kind.startswith(("code_", "language", "classifier")) or kind in LIST_KINDS:
            continue
        flt = get_filter(kind)(**REQUIRED.get(kind, {}))
        assert flt.keep(flt.score(GOOD)), (kind, flt.score(GOOD))


TEXT_KINDS = [k for k in FILTERS if not k.startswith(("code_extension", "classifier")) and k not in LIST_KINDS]


@pytest.mark.parametrize("kind", TEXT_KINDS)
@pytest.mark.parametrize("text", ["", "   ", "\n\n\t\n"], ids=["empty", "spaces", "blank-lines"])
def test_empty_and_whitespace_never_divide_by_zero(kind, text):
    flt = get_filter(kind)(**REQUIRED.get(kind, {}))
    with np.errstate(all="raise"):
        score = flt.score(text)
    assert np.isfinite(score)
    assert isinstance(flt.keep(score), bool)


def test_empty_text_is_rejected_by_the_ratio_filters():
    for kind in ("non_alpha_numeric", "word_count", "mean_word_length", "repeated_lines", "punctuation",
                 "top_ngrams", "duplicate_ngrams", "common_english_words", "fineweb_char_duplicates"):
        flt = get_filter(kind)()
        assert not flt.keep(flt.score("")), kind


def test_default_names_include_n():
    assert get_filter("top_ngrams")(n=3).reason == "top_3grams"
    assert get_filter("duplicate_ngrams")(n=7).reason == "duplicate_7grams"
    assert get_filter("word_count")(name="too_short").reason == "too_short"


def test_strict_bounds_follow_the_reference_rules():
    # FineWeb drops line punctuation <= 0.12 and short lines >= 0.67
    assert not get_filter("fineweb_line_punctuation")().keep(0.12)
    assert get_filter("fineweb_line_punctuation")().keep(0.1201)
    assert not get_filter("fineweb_short_lines")().keep(0.67)
    # NeMo keeps ratios equal to the threshold
    assert get_filter("whitespace")().keep(0.25)
    assert get_filter("word_count")().keep(50) and not get_filter("word_count")().keep(49)


def test_huge_document():
    flt = get_filter("duplicate_ngrams")(n=5)
    text = " ".join(f"w{i}" for i in range(300_000))
    assert flt.score(text) == 0.0
    assert get_filter("word_count")().score(text) == 300_000


# --------------------------------------------------------------------------- references


def _ref_top(text, n):
    words = text.split()
    grams = [" ".join(words[i:i + n]) for i in range(len(words) - n + 1)]
    if len(words) < n:
        return 1.0
    counts = Counter(grams)
    top = max(counts.values())
    if top < 2:
        return 0.0
    return top * max(len(g) for g, c in counts.items() if c == top) / len(text)


def _ref_dup(text, n):
    words = text.split()
    if len(words) < n:
        return 1.0
    seen, covered = set(), [False] * len(words)
    for i in range(len(words) - n + 1):
        gram = tuple(words[i:i + n])
        if gram in seen:
            for j in range(i, i + n):
                covered[j] = True
        seen.add(gram)
    chars = sum(len(w) for w, c in zip(words, covered) if c)
    chars += sum(1 for j in range(1, len(words)) if covered[j] and covered[j - 1])
    return chars / len(text)


def _random_docs(k=40, seed=0):
    rng = random.Random(seed)
    vocab = ["a", "bb", "ccc", "dddd", "the", "cat", "sat", "on", "mat"]
    docs = [" ".join(rng.choice(vocab) for _ in range(rng.randint(0, 60))) for _ in range(k)]
    return docs + ["", "single", "two words"]


@pytest.mark.parametrize("n", [2, 3, 4])
def test_top_ngrams_matches_reference(n):
    docs = _random_docs()
    got = get_filter("top_ngrams")(n=n).score_texts(Texts(pd.Series(docs, dtype=STRING)))
    np.testing.assert_allclose(got, [_ref_top(d, n) for d in docs])


@pytest.mark.parametrize("n", [5, 7, 10])
def test_duplicate_ngrams_matches_reference(n):
    docs = _random_docs(seed=n)
    got = get_filter("duplicate_ngrams")(n=n).score_texts(Texts(pd.Series(docs, dtype=STRING)))
    np.testing.assert_allclose(got, [_ref_dup(d, n) for d in docs])


def test_repetition_scores_match_reference():
    docs = ["x\ny\nx\n\nz", "p\n\np\n\nq", "", "   ", "one\none"]
    t = Texts(pd.Series(docs, dtype=STRING))

    def lines(d):
        return [x for x in d.split("\n") if x.strip()]

    def paras(d):
        return [x for x in d.split("\n\n") if x.strip()]

    exp_lines = [len(set(lines(d))) / len(lines(d)) if lines(d) else 0.0 for d in docs]
    exp_paras = [len(set(paras(d))) / len(paras(d)) if paras(d) else 0.0 for d in docs]
    np.testing.assert_allclose(get_filter("repeated_lines")().score_texts(t), exp_lines)
    np.testing.assert_allclose(get_filter("repeated_paragraphs")().score_texts(t), exp_paras)


# --------------------------------------------------------------------------- parity with NeMo Curator

# NeMo Curator's config/heuristic_filter_en.yaml, transcribed: (filter, threshold) in its order
NEMO_HEURISTIC_EN = [
    ("non_alpha_numeric", {"max": 0.25}), ("symbols_to_words", {"max": 0.1}), ("numbers", {"max": 0.15}),
    ("urls", {"max": 0.2}), ("whitespace", {"max": 0.25}), ("parentheses", {"max": 0.1}),
    ("boilerplate_strings", {"max": 0.4}), ("repeated_lines", {"min": 0.7}), ("repeated_paragraphs", {"min": 0.7}),
    ("repeated_lines_char", {"min": 0.8}), ("repeated_paragraphs_char", {"min": 0.8}),
    ("word_count", {"min": 50, "max": 100000}), ("punctuation", {"max": 0.85}),
    ("words_with_alphabets", {"min": 0.8}), ("common_english_words", {"min": 2}),
    ("mean_word_length", {"min": 3, "max": 10}), ("longest_word", {"max": 1000}), ("ellipsis", {"max": 0.3}),
    ("top_ngrams", {"n": 2, "max": 0.2}), ("top_ngrams", {"n": 3, "max": 0.18}), ("top_ngrams", {"n": 4, "max": 0.16}),
    *[("duplicate_ngrams", {"n": n, "max": m}) for n, m in zip(range(5, 11), (0.15, 0.14, 0.13, 0.12, 0.11, 0.10))],
    ("bullets", {"max": 0.9}),
]


def test_heuristic_en_is_exactly_nemos_28_filters():
    from curate.stages.filters.base import load_chain

    chain = load_chain("jobs/filters/heuristic_en.yaml")
    assert len(chain) == 28
    for spec, (kind, params) in zip(chain, NEMO_HEURISTIC_EN):
        assert spec["filter"] == kind
        assert {k: spec[k] for k in params} == params
        assert all(spec[k] is None for k in ("min", "max") if k not in params)  # no threshold NeMo lacks
    assert [s["filter"] for s in load_chain("jobs/filters/pornographic_urls.yaml")] == ["pornographic_urls"]


# scores NeMo 0.9's BoilerPlateStringFilter gave for these (run side by side)
BOILERPLATE_NEMO = [
    ("Hello there, a normal paragraph.\n\nNecessary cookies are absolutely essential for the website to function "
     "properly. This category only includes cookies that ensures basic functionalities and security features of "
     "the website. These cookies do not store any personal information.", 0.5),
    ("Text.\n\nIf you continue to browse this site without changing your cookie settings, you agree to this use. "
     "AcceptRead More", 0.5),
    ("We use cookies here.\n\nplain", 0.5),
    ("privacy overview\n\nx\n\ny", 1 / 3),
    ("a\n\n\n\nprivacy policy", 1 / 3),  # blank paragraphs count, as in NeMo
]


@pytest.mark.parametrize("text,nemo", BOILERPLATE_NEMO)
def test_boilerplate_strings_scores_as_nemo(text, nemo):
    assert get_filter("boilerplate_strings")().score(text) == pytest.approx(nemo)


def test_c4_policy_list_is_c4s():
    from curate.stages.clean import C4_BOILERPLATE
    from curate.stages.filters.heuristic import C4_POLICY_SUBSTRINGS

    # TensorFlow Datasets' c4_utils._POLICY_SUBSTRINGS
    assert C4_POLICY_SUBSTRINGS == ("terms of use", "privacy policy", "cookie policy", "uses cookies",
                                    "use of cookies", "use cookies")
    assert C4_BOILERPLATE == ("javascript", *C4_POLICY_SUBSTRINGS)
    lines = "We use cookies to run this site and it works.\nPrivacy overview is here and fine.\n" + GOOD
    c4 = get_filter("c4_sentences")()
    # "use cookies" removes the first line (C4 does), "privacy overview" is not C4's and stays
    assert c4.score(lines) == c4.score("Privacy overview is here and fine.\n" + GOOD)


def test_substring_positions():
    f = get_filter("substring")
    assert [f(substring="ab", position=p).score("abcab") for p in ("any", "prefix", "suffix")] == [1, 1, 1]
    assert [f(substring="ca", position=p).score("abcab") for p in ("any", "prefix", "suffix")] == [1, 0, 0]
    assert f(substring="x").keep(0) is False and f(substring="x", min=None, max=0).keep(0) is True


def test_histogram_from_a_user_sample(tmp_path):
    sample = tmp_path / "en.txt"
    sample.write_text(GOOD * 3, encoding="utf-8")
    flt = get_filter("histogram")(sample=str(sample), coverage=1.0)
    assert set(flt.chars) == set(GOOD * 3)
    assert flt.score("  " + GOOD + "  ") == pytest.approx(len(GOOD) / (len(GOOD) + 4))  # ends stripped, as NeMo
    cyr = "кириллица и ещё немного текста"
    assert flt.score(cyr) == pytest.approx(cyr.count(" ") / len(cyr)) and not flt.keep(flt.score(cyr))
    # the characters are in the chain's settings: workers never reread the sample
    from curate.stages.filters.base import build_chain, parse_chain

    chain = parse_chain({"filters": [{"filter": "histogram", "sample": str(sample)}]}, "t")
    sample.unlink()
    rebuilt = build_chain(chain)[0]  # the sample is gone: the characters came with the chain
    assert rebuilt.chars and set(rebuilt.chars) <= set(GOOD)


# Pages with code lines for C4's sentence count, each kept line with the sentences NLTK's punkt finds
# in it (counted by hand: plain sentences ending in . or !)
C4_CODE_LINES = {
    "To print a value, call print(x) in your code.": 1,
    "Use the map {a: 1} when you need a lookup.": 1,
    "Write if (x) { return; } to leave early.": 1,
    "A set looks like {1, 2, 3} in Python. It has no order.": 2,
    "Braces {} group statements in C. They open a block.": 2,
    "The first line has one sentence here.": 1,
    "Config files use {key: value} pairs. Keep them short.": 2,
    "Short line {x}.": 1,
    "Two more sentences sit here. They end well!": 2,
    "One sentence {x} here.": 1,
    "Two sentences here. Three here.": 2,
}
C4_CODE_PAGES = {
    "code": "\n".join([*list(C4_CODE_LINES)[:5], "fn main() {", "    let x = 1;", "}"]),
    "config": "\n".join([*list(C4_CODE_LINES)[5:7],
                         "Our privacy policy lives at {url} today.",  # a policy line: not counted
                         "Please enable javascript {here} to continue.",  # a javascript line: not counted
                         *list(C4_CODE_LINES)[7:9]]),
    "short": "\n".join([*list(C4_CODE_LINES)[9:], "A {b} c"]),  # 3 sentences; the last line has no end mark
}


def datatrove_c4_sentences(text: str) -> int:
    """Sentences as datatrove's C4QualityFilter(filter_curly_bracket=False) counts them, in plain
    Python: a line counts when, stripped, it has no word over 1000 characters, ends with . ? ! " ' (not
    ...) once citations are removed, has 3+ words and mentions neither javascript nor a policy phrase;
    its sentences are the hand counts above."""
    import re

    from curate.stages.filters.heuristic import C4_POLICY_SUBSTRINGS

    n = 0
    for line in text.splitlines():
        line = line.strip()
        if any(len(w) > 1000 for w in line.split()):
            continue
        line = re.sub(r"\[\d*]|\[edit]|\[citation needed]", "", line)
        if not line.endswith((".", "?", "!", '"', "'")) or line.endswith("..."):
            continue
        if len(line.split()) < 3:
            continue
        lower = line.lower()
        if "javascript" in lower or any(p in lower for p in C4_POLICY_SUBSTRINGS):
            continue
        n += C4_CODE_LINES[line]
    return n


def test_c4_sentences_counts_code_lines_when_the_curly_rule_is_not_in_the_chain(tmp_path):
    """Whether lines with ``{`` count is c4_curly_bracket's business: without it in the chain, pages of
    code and prose are kept with the sentence count of C4's own rule (issue 36)."""
    from tests.conftest import read_output, run_stage, write_jsonl

    oracle = {k: datatrove_c4_sentences(v) for k, v in C4_CODE_PAGES.items()}
    assert oracle == {"code": 7, "config": 6, "short": 3}  # by hand, line by line
    chain = tmp_path / "chain.yaml"
    chain.write_text("filters:\n  - {filter: c4_lorem_ipsum, max: 0}\n  - {filter: c4_sentences, min: 5}\n")
    docs = [{"id": k, "text": v} for k, v in C4_CODE_PAGES.items()]
    write_jsonl(tmp_path / "in" / "a.jsonl", docs[:1])
    write_jsonl(tmp_path / "in" / "b.jsonl", docs[1:])  # two partitions
    manifest = run_stage("filter", {"config": str(chain), "keep_scores": True}, str(tmp_path / "in" / "*.jsonl"),
                         tmp_path / "out")
    assert manifest["counts"] == {"in": 3, "out": 2, "dropped": {"c4_sentences": 1}}
    out = read_output(tmp_path / "out")
    assert dict(zip(out["id"], out["score_c4_sentences"])) == {"code": 7, "config": 6}
    flt = get_filter("c4_sentences")()
    assert {k: flt.score(v) for k, v in C4_CODE_PAGES.items()} == oracle
    # the curly rule, when it is in the chain, still drops the pages whose counted lines hold a {
    curly = get_filter("c4_curly_bracket")()
    assert {k: curly.score(v) for k, v in C4_CODE_PAGES.items()} == {"code": 1, "config": 1, "short": 1}
