"""Words of Chinese and Japanese (issue 44, point 4): the word-based filters' ``language`` setting, checked
on NeMo Curator's own cases (test_wordcount_zh); without it nothing changes."""

import pytest

from curate.stages.errors import SettingsError
from curate.stages.filters import get_filter
from curate.stages.filters.base import ScoreFilter


@pytest.mark.parametrize("text,words", [("你好。", 2), ("我喜欢学习中文。", 5)])
def test_nemo_wordcount_zh(text, words):  # NeMo Curator tests/.../test_filters.py::test_wordcount_zh
    assert get_filter("word_count")(language="zh", min=1).score(text) == words


def test_japanese_words_by_dictionary():
    flt = get_filter("word_count")(language="ja", min=1)
    assert flt.score("すもももももももものうち。") == 8  # すもも/も/もも/も/もも/の/うち/。
    assert get_filter("mean_word_length")(language="ja").score("東京都に住む") == pytest.approx(6 / 4)


def test_without_the_setting_nothing_changes():
    plain, zh = get_filter("word_count")(min=1), get_filter("word_count")(language="zh", min=1)
    assert plain.score("我喜欢学习中文。") == 1 and plain.score("two words") == 2
    assert zh.score("two words") == 2  # spaced words stay words


def test_every_word_filter_reads_the_segmented_words():
    import pandas as pd

    from curate.stages.dataset import STRING

    text = "我喜欢学习中文。" * 3
    filters = [get_filter("top_ngrams")(n=2, language="zh"), get_filter("duplicate_ngrams")(n=3, language="zh"),
               get_filter("longest_word")(language="zh"), get_filter("words_with_alphabets")(language="zh"),
               get_filter("symbols_to_words")(language="zh")]
    scores = {f.reason: f.score(text) for f in filters}
    assert scores["top_2grams"] > 0 and scores["duplicate_3grams"] > 0  # repeats are found among words
    assert scores["longest_word"] == 2  # 喜欢, 学习, 中文: not the whole sentence
    assert get_filter("top_ngrams")(n=2).score(text) == 1.0  # unsegmented: one word, nothing to measure
    frame = pd.DataFrame({"id": ["a"], "text": [text]}).astype(STRING)
    assert ScoreFilter(filters).apply(frame) is not None  # a chain mixing them shares one segmentation


def test_unknown_language_and_missing_segmenter_are_named(monkeypatch):
    with pytest.raises(SettingsError, match="language must be one of zh, ja"):
        get_filter("word_count")(language="fr")
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "jieba" else real(name, *a))
    with pytest.raises(SettingsError, match=r"pip install 'curate-llm\[cjk\]'"):
        get_filter("word_count")(language="zh")


def test_a_chain_without_the_new_settings_keeps_its_spelling():
    """language and the FineWeb variant, at their defaults, stay out of the spelled chain: an output made
    before they existed keeps its fingerprint (its filters behave as before)."""
    from curate.stages.filters.base import parse_chain

    specs = parse_chain({"filters": [{"filter": "word_count", "min": 3}, {"filter": "top_ngrams", "n": 2},
                                     {"filter": "fineweb_short_lines"}]}, "chain")
    assert all("language" not in s and "variant" not in s for s in specs), specs
    zh = parse_chain({"filters": [{"filter": "word_count", "min": 3, "language": "zh"}]}, "chain")
    assert zh[0]["language"] == "zh"
