"""The perplexity filter (issue 44, point 5): CCNet's formula over a KenLM model the test writes itself
(an ARPA unigram model whose perplexities are computed by hand), with and without a SentencePiece
tokenizer trained here, offline. Then the model checked before any work (issue 47, point 6): its
header, without KenLM, in the dry run and before the stages ahead of the filter run."""

import bz2
import gzip
import json
import math
import struct
import sys

import pytest

from curate.stages.errors import DataError, SettingsError
from curate.stages.filters import get_filter

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
    pytest.importorskip("kenlm")  # to score; the header checks below need none
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



# --------------------------------------------------------------------------- the model before any work


def write(tmp_path, name: str, data) -> str:
    path = tmp_path / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return str(path)


#: KenLM's binary header as lm/binary_format.cc writes it (format version 5, little-endian, 64-bit):
#: the magic padded to 8 bytes, test values, then order, probing multiplier, model type, vocabulary
#: flag, search version, and one 64-bit count per order
SANITY = b"mmap lm http://kheafield.com/code format version 5\n" + b"\0" * 5 + \
    struct.pack("<fffIIIQ", 0.0, 1.0, -0.5, 1, 2**32 - 1, 0, 1)


def binary(counts, body: int = 4096, sanity: bytes = SANITY, model_type: int = 2) -> bytes:
    head = sanity + struct.pack("<B3xfiB3xI", len(counts), 1.5, model_type, 1, 1) + \
        struct.pack(f"<{len(counts)}Q", *counts)
    return head.ljust(-(-len(head) // 8) * 8, b"\0") + b"\0" * body


ABSURD = ARPA.replace("ngram 1=5", "ngram 1=2000000000")
BROKEN = {
    "empty": ("", "empty file"),
    "random bytes": (b"\x9c" + bytes(range(256)) * 4,
                     "neither an ARPA model (its first line is not \\data\\) nor a KenLM binary"),
    "truncated": (ARPA.lstrip()[:120], "ARPA without its closing \\end\\ line (truncated?)"),
    "absurd header": (ABSURD, "its header claims 2,000,000,000 1-grams, 1 2-grams, at least 8,000,000,006 bytes"),
    "absurd gzip": (gzip.compress(ABSURD.encode()), "its header claims 2,000,000,000 1-grams"),
    "negative count": (ARPA.replace("ngram 1=5", "ngram 1=-5"), "ARPA header line 'ngram 1=-5' is not 'ngram 1=COUNT'"),
    "orders out of turn": (ARPA.replace("ngram 2=1", "ngram 3=1"), "ARPA header line 'ngram 3=1' is not 'ngram 2=COUNT'"),
    "no unigram section": (ARPA.replace("\\1-grams:", "\\one-grams:"), "not followed by the \\1-grams: section"),
    "binary absurd counts": (binary([2_000_000_000, 5]), "its header claims 2,000,000,000 1-grams, 5 2-grams"),
    "binary of another build": (binary([5, 1], sanity=SANITY.replace(b"version 5", b"version 4")),
                                "a KenLM binary of another version or machine"),
    "binary unfinished": (b"mmap lm http://kheafield.com/code incomplete\n" + b"\0" * 200, "did not finish building"),
    "binary cut short": (SANITY[:60], "a KenLM binary cut short"),
    "binary model type": (binary([5, 1], model_type=9), "header is broken (order 2, model type 9"),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_a_broken_model_is_refused_naming_it_without_kenlm(tmp_path, monkeypatch, case):
    monkeypatch.setitem(sys.modules, "kenlm", None)  # as if not installed: the header needs none
    data, says = BROKEN[case]
    path = write(tmp_path, "model.bin" if case.startswith("binary") else "model.arpa", data)
    with pytest.raises(SettingsError) as e:
        get_filter("perplexity")(model=path, max=1000)
    assert str(e.value).startswith(f"model {path}: ") and says in str(e.value), str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("name,data,kind", [
    ("comments.arpa", "# made by hand\n" + ARPA, "arpa"),
    ("tiny.arpa.gz", gzip.compress(ARPA.lstrip().encode()), "arpa"),
    ("tiny.arpa.bz2", bz2.compress(ARPA.lstrip().encode()), "arpa"),
    ("tiny.binary", binary([5, 1]), "binary"),
])
def test_sound_headers_pass(tmp_path, name, data, kind):
    from curate.stages.filters.lm_header import check_model_file

    assert check_model_file(write(tmp_path, name, data)) == kind


def perplexity_job(tmp_path, model: str) -> str:
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({"id": str(i), "text": f"a b document {i}"}) + "\n" for i in range(3)))
    (tmp_path / "filters.yaml").write_text(f"filters:\n  - {{filter: perplexity, model: {model}, max: 1000}}\n")
    job = tmp_path / "job.yaml"
    job.write_text(f"name: j\ninput: {data}\nstages:\n  - normalize: {{}}\n  - filter: {{config: {tmp_path / 'filters.yaml'}}}\n")
    return str(job)


@pytest.mark.parametrize("dry", [True, False])
@pytest.mark.parametrize("case", ["random bytes", "absurd header", "truncated"])
def test_the_dry_run_and_the_run_refuse_the_model_before_any_stage(tmp_path, capsys, monkeypatch, dry, case):
    from curate.app.cli import main

    monkeypatch.setitem(sys.modules, "kenlm", None)

    model = write(tmp_path, "model.arpa", BROKEN[case][0])
    out = tmp_path / "out"
    argv = ["run", perplexity_job(tmp_path, model), "--output", str(out)]
    assert main(argv + (["--dry-run"] if dry else ["--cluster", "threads"])) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    assert f"model {model}: {BROKEN[case][1][:30]}" in err, err
    assert not out.exists()  # stage 1 did not run


def test_what_kenlm_alone_finds_names_the_file(tmp_path):
    pytest.importorskip("kenlm")
    # a sound header over a body KenLM cannot read: its error (here UnicodeDecodeError) with the file named
    path = write(tmp_path, "body.arpa", ARPA.lstrip().encode().replace(b"-0.30103\ta", b"\xff\xfe\ta"))
    flt = get_filter("perplexity")(model=path, max=1000)
    with pytest.raises(DataError, match=rf"^model {path}: cannot be loaded \("):
        flt.score("a b")


def test_absurd_log_probabilities_score_infinite(tmp_path):
    pytest.importorskip("kenlm")
    path = write(tmp_path, "steep.arpa", ARPA.lstrip().replace("-2.0\t<unk>", "-900\t<unk>"))
    flt = get_filter("perplexity")(model=path, max=1000)
    assert flt.score("zz") == math.inf and not flt.keep(flt.score("zz"))  # was an OverflowError


def test_a_tokenizer_that_is_no_sentencepiece_model_is_refused_with_the_settings(model, tmp_path):
    pytest.importorskip("sentencepiece")
    path = write(tmp_path, "sp.model", b"\x9c" + bytes(range(256)))
    with pytest.raises(SettingsError, match=rf"^tokenizer {path}: cannot be loaded \(RuntimeError: "):
        get_filter("perplexity")(model=model, tokenizer=path, max=1000)
