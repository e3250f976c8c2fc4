"""The perplexity filter (issue 44, point 5): CCNet's formula over a KenLM model the test writes itself
(an ARPA unigram model whose perplexities are computed by hand), with and without a SentencePiece
tokenizer trained here, offline."""

import math

import pytest

from curate.stages.errors import SettingsError
from curate.stages.filters import get_filter

pytest.importorskip("kenlm")

# KenLM reads bigram models at least: one bigram the tests never score (two unknown words), and backoff
# weights 0, so every other probability is the unigram's
ARPA = """
\\data\\
ngram 1=5
ngram 2=1

\\1-grams:
-2.0\t<unk>\t0
-99\t<s>\t0
-0.60206\t</s>\t0
-0.30103\ta\t0
-0.60206\tb\t0

\\2-grams:
-1.0\t<unk> <unk>

\\end\\
"""


@pytest.fixture
def model(tmp_path):
    path = tmp_path / "tiny.arpa"
    path.write_text(ARPA.lstrip())
    return str(path)


def by_hand(lines):
    """10 ** (-sum log10 p / (words + one </s> per line)) with p(a) = 1/2, p(b) = p(</s>) = 1/4, p(unk) = 1/100."""
    logp = {"a": -0.30103, "b": -0.60206}
    total = n = 0
    for line in lines:
        words = line.split()
        total += sum(logp.get(w, -2.0) for w in words) - 0.60206
        n += len(words) + 1
    return 10 ** (-total / n)


@pytest.mark.parametrize("text,lines", [("a b", ["a b"]), ("a a a", ["a a a"]), ("a b\n\nb zz", ["a b", "b zz"]),
                                        ("A B", ["a b"])])  # normalised: lower-cased
def test_ccnet_formula_by_hand(model, text, lines):
    flt = get_filter("perplexity")(model=model, max=1000)
    assert flt.score(text) == pytest.approx(by_hand(lines), rel=1e-5)


def test_threshold_and_empty(model):
    flt = get_filter("perplexity")(model=model, max=4)
    assert flt.keep(flt.score("a a a")) and not flt.keep(flt.score("zz b zz"))
    assert math.isnan(flt.score("  \n "))  # nothing to score: NaN, rejected as nan
    assert get_filter("perplexity")(model=model, max=4, normalize=False).score("A") > flt.score("A")


def test_sentencepiece_pieces(model, tmp_path):
    spm = pytest.importorskip("sentencepiece")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a b a b\n" * 50 + "b a\n" * 50)
    spm.SentencePieceTrainer.train(input=str(corpus), model_prefix=str(tmp_path / "sp"), vocab_size=5,
                                   model_type="word", minloglevel=2)
    flt = get_filter("perplexity")(model=model, tokenizer=str(tmp_path / "sp.model"), max=1000)
    sp = spm.SentencePieceProcessor(model_file=str(tmp_path / "sp.model"))
    import kenlm

    pieces = sp.encode("a b", out_type=str)
    expected = 10 ** (-kenlm.Model(model).score(" ".join(pieces)) / (len(pieces) + 1))
    assert flt.score("a b") == pytest.approx(expected)


def test_refusals(model, tmp_path):
    with pytest.raises(SettingsError, match="model must name"):
        get_filter("perplexity")(max=10)
    with pytest.raises(SettingsError, match="no such file"):
        get_filter("perplexity")(model=str(tmp_path / "none.arpa"), max=10)
    with pytest.raises(SettingsError, match="threshold"):
        get_filter("perplexity")(model=model)
