"""The filter protocol: shared features, chain YAML validation, and the ScoreFilter."""

import numpy as np
import pandas as pd
import pytest

from curate.stages.dataset import STRING
from curate.stages.errors import SettingsError
from curate.stages.filters import get_filter
from curate.stages.filters.base import ScoreFilter, Texts, build_chain, load_chain, parse_chain, ratio

ROOT_CHAINS = ["jobs/filters/heuristic_en.yaml", "jobs/filters/c4_fineweb.yaml", "jobs/filters/code.yaml"]


def frame(texts, **cols):
    return pd.DataFrame({"id": [f"d{i}" for i in range(len(texts))], "text": texts, **cols}).astype(STRING)


# --------------------------------------------------------------------------- features


def test_texts_pieces_by_hand():
    t = Texts(pd.Series(["a bb\n\nccc a", "", None, "  x  "], dtype=STRING))
    assert t.nchar.tolist() == [11, 0, 0, 5]
    assert t.words.count.tolist() == [4, 0, 0, 1]  # like str.split(): no empty words
    assert t.words.length.tolist() == [1, 2, 3, 1, 1]
    assert t.lines.count.tolist() == [3, 1, 1, 1]  # an empty document has one empty line
    assert t.nonblank_lines.count.tolist() == [2, 0, 0, 1]
    assert t.words.first.tolist() == [True, True, True, False, True]
    assert t.count_ascii("a").tolist() == [2, 0, 0, 0]


def test_count_ascii_is_exact_with_multibyte_text():
    t = Texts(pd.Series(["héllo wörld 1", "日本語 2 3"], dtype=STRING))
    assert t.count_ascii("0123456789").tolist() == [1, 2]
    assert t.count_ascii(" ").tolist() == [2, 2]


def test_ratio_never_divides_by_zero():
    with np.errstate(all="raise"):
        assert ratio([1, 0], [2, 0], empty=7.0).tolist() == [0.5, 7.0]


# --------------------------------------------------------------------------- chain files


def test_shipped_chains_load(monkeypatch):
    monkeypatch.chdir(pytest.importorskip("pathlib").Path(__file__).resolve().parents[3])
    for path in ROOT_CHAINS:
        specs = load_chain(path)
        assert build_chain(specs)
    heur = {s["name"] or s["filter"]: s for s in load_chain(ROOT_CHAINS[0])}
    # NeMo Curator's defaults, as the issue lists them
    assert heur["word_count"]["min"] == 50 and heur["word_count"]["max"] == 100000
    maxes = [s["max"] for s in load_chain(ROOT_CHAINS[0]) if s["filter"] == "duplicate_ngrams"]
    assert maxes == [0.15, 0.14, 0.13, 0.12, 0.11, 0.10]


def write(tmp_path, text):
    p = tmp_path / "chain.yaml"
    p.write_text(text)
    return str(p)


@pytest.mark.parametrize("text,message", [
    ("filters:\n  - {filter: nosuch}\n", "filter 1: unknown filter 'nosuch'"),
    ("filters:\n  - {filter: word_count, minn: 3}\n", "filter 1 (word_count): unknown setting 'minn'"),
    ("filters:\n  - {filter: numbers}\n  - {filter: whitespace, max: lots}\n",
     "filter 2 (whitespace).max must be a number; got 'lots'"),
    ("filters:\n  - {filter: whitespace, max: 1.5}\n", "filter 1 (whitespace): max must be in 0..1; got 1.5"),
    ("filters:\n  - {filter: word_count, min: 10, max: 5}\n", "min (10.0) is above max (5.0)"),
    ("filters:\n  - {filter: top_ngrams, n: 0}\n", "n must be in 1..100"),
    ("filters:\n  - {filter: numbers}\n  - {filter: numbers}\n", "filter 2 (numbers) has the same name 'numbers'"),
    ("filters:\n  - {filter: numbers, name: 'bad name'}\n", "name must be letters"),
    ("filters: []\n", "'filters' must be a non-empty list"),
    ("filters:\n  - numbers\n", "filter 1 must be a mapping with a 'filter' key"),
    ("filter: [numbers]\n", "unknown key 'filter'"),
    ("filters: [\n", "not valid YAML"),
])
def test_bad_chains_name_the_filter(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(SettingsError) as e:
        load_chain(path)
    assert message in str(e.value)
    assert path in str(e.value)
    assert "\n" not in str(e.value)


def test_missing_chain_file(tmp_path):
    with pytest.raises(SettingsError, match="no such file"):
        load_chain(str(tmp_path / "nope.yaml"))


def test_parse_chain_spells_out_every_parameter():
    (spec,) = parse_chain({"filters": [{"filter": "duplicate_ngrams", "n": 6, "max": 0.14}]}, "x")
    assert spec == {"filter": "duplicate_ngrams", "name": None, "min": None, "max": 0.14, "n": 6}


# --------------------------------------------------------------------------- ScoreFilter


GOOD = " ".join(["The quick brown fox jumps over the lazy dog and that is the end."] * 6)


def test_first_failing_filter_names_the_reason():
    chain = [get_filter("word_count")(min=5), get_filter("numbers")(max=0.1)]
    df = frame(["1 2 3", "one two three four five six", "1 2 3 4 5 6 7 8 9 0", GOOD])
    out = ScoreFilter(chain).apply(df)
    assert out["_reason"].iloc[0] == "word_count"  # fails both: the first filter in chain order wins
    assert pd.isna(out["_reason"].iloc[1])
    assert out["_reason"].iloc[2] == "numbers"
    assert pd.isna(out["_reason"].iloc[3])
    assert list(out.columns) == ["id", "text", "_reason"]  # no score columns unless asked
    assert "_reason" not in df.columns  # the input is not mutated


def test_keep_scores_adds_a_column_per_filter_before_the_internal_columns():
    chain = [get_filter("word_count")(min=5), get_filter("top_ngrams")(n=2)]
    df = frame(["a b", GOOD]).assign(_reason=pd.Series([pd.NA, pd.NA], dtype=STRING))
    out = ScoreFilter(chain, keep_scores=True).apply(df)
    assert list(out.columns) == ["id", "text", "score_word_count", "score_top_2grams", "_reason"]
    assert out["score_word_count"].tolist() == [2.0, 84.0]
    assert out["score_word_count"].dtype == "float64"


def test_small_batches_give_the_same_result():
    texts = [GOOD, "short", "", "x " * 300, GOOD + " 1 2 3", "\n\n"] * 5
    chain = build_chain(load_chain_text())
    one = ScoreFilter(chain, keep_scores=True).apply(frame(texts))
    many = ScoreFilter(chain, keep_scores=True, batch_bytes=200).apply(frame(texts))
    assert len(ScoreFilter(chain, batch_bytes=200).batches(frame(texts))) > 5
    pd.testing.assert_frame_equal(one, many)


def load_chain_text():
    return parse_chain({"filters": [
        {"filter": "word_count", "min": 3}, {"filter": "top_ngrams", "n": 2},
        {"filter": "duplicate_ngrams", "n": 5}, {"filter": "repeated_lines"}, {"filter": "whitespace"},
    ]}, "test")


def test_empty_frame_keeps_the_schema():
    chain = [get_filter("word_count")()]
    out = ScoreFilter(chain, keep_scores=True).apply(frame([]))
    assert list(out.columns) == ["id", "text", "score_word_count", "_reason"]
    assert len(out) == 0


def test_keep_works_on_floats_and_arrays():
    f = get_filter("word_count")()
    assert f.keep(60.0) is True and f.keep(10) is False
    assert f.keep(np.array([10, 60, np.nan])).tolist() == [False, True, False]
