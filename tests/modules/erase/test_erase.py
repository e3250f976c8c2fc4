"""``curate erase`` (modules/erase.py) against independent oracles.

The contract: after erasure a file is byte for byte what its stage writes when the erased documents
are absent from its input partition (dataset parts, rejects, token pairs and their sidecars), and
packed rows and shards are what ``pack`` and ``shards`` write from the erased token set. The oracle
is that fresh run, on input files written without the erased documents' lines (explicit ids, one
partition per file, so nothing else moves). Every other file must be unchanged byte for byte.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curate.stages import erase
from curate.stages.errors import DataError, SettingsError
from curate.stages.output import LockedError, Output, OwnershipError
from tests.conftest import copy_output, run_stage, side, write_jsonl

TOK = "tiktoken:cl100k_base"
WORDS = "river valley stone bread oven flour library shelf loan quiet garden rain seed harvest".split()


def text(k: int, n: int = 40) -> str:
    rng = np.random.default_rng(k)
    return " ".join(rng.choice(WORDS, n)) + f" number {k}."


#: two input files, two partitions; d1 and e1 have the same text (an exact duplicate pair across
#: partitions), e2 is on a subdomain of example.org
DOCS = [
    [{"id": "d0", "text": text(0), "url": "https://a.example.com/0"},
     {"id": "d1", "text": text(1), "url": "https://a.example.com/1"},
     {"id": "d2", "text": text(2, 300), "url": "https://b.example.com/2"},
     {"id": "d3", "text": text(3), "url": "https://a.example.com/3"}],
    [{"id": "e0", "text": text(4), "url": "https://c.example.com/0"},
     {"id": "e1", "text": text(1), "url": "https://c.example.com/1"},
     {"id": "e2", "text": text(5, 200), "url": "https://x.example.org/2"},
     {"id": "e3", "text": text(6), "url": "https://c.example.com/3"}],
]


def write_input(folder: Path, without=()) -> str:
    for k, docs in enumerate(DOCS):
        write_jsonl(folder / f"f{k}.jsonl", [d for d in docs if d["id"] not in without])
    return str(folder / "*.jsonl")


def request(tmp_path: Path, by: str, entries, name: str = "request.txt") -> erase.Request:
    path = tmp_path / name
    path.write_text("\n".join(entries) + "\n", encoding="utf-8")
    return erase.read_request(str(path), by)


def snapshot(*folders) -> dict[str, str]:
    out = {}
    for folder in folders:
        for root, _dirs, files in os.walk(folder):
            for f in files:
                p = os.path.join(root, f)
                out[p] = hashlib.sha256(Path(p).read_bytes()).hexdigest()
    return out


def data_files(folder: Path) -> dict[str, bytes]:
    """Every file that is not a manifest, sentinel, lock or journal, by relative path (the side folder's
    by their paths in the manifest)."""
    found = {}
    for p in sorted([*folder.rglob("*"), *side(folder).rglob("*")]):
        rel = p.relative_to(side(folder) if p.is_relative_to(side(folder)) else folder).as_posix()
        if p.is_file() and not rel.startswith(("_state", "manifest", "_manifest", "_SUCCESS", "_LOCK")):
            found[rel] = p.read_bytes()
    return found


# --------------------------------------------------------------------------- the request file


def test_request_file_errors_name_the_file_and_line(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n")
    with pytest.raises(SettingsError, match=r"--ids .*empty.txt: empty"):
        erase.read_request(str(empty), "ids")
    latin = tmp_path / "latin.txt"
    latin.write_bytes(b"ok\nd\xe9j\xe0\n")
    with pytest.raises(SettingsError, match=r"--ids .*latin.txt line 2: not UTF-8"):
        erase.read_request(str(latin), "ids")
    bad = tmp_path / "domains.txt"
    bad.write_text("example.com\nhttps://example.org/x\n")
    with pytest.raises(SettingsError, match=r"--domains .*domains.txt line 2: .* not a domain"):
        erase.read_request(str(bad), "domains")
    with pytest.raises(SettingsError, match="cannot read"):
        erase.read_request(str(tmp_path / "missing.txt"), "urls")
    r = request(tmp_path, "domains", ["Example.ORG.", "example.org"])
    assert r.entries == ("example.org",)
    assert r.sha256 == hashlib.sha256((tmp_path / "request.txt").read_bytes()).hexdigest()


def test_matcher_rules(tmp_path):
    table = pa.table({"id": ["a", "a#0", "a#1#2", "ab", "b", "c"],
                      "document_id": [None, None, None, None, None, "a"],
                      "url": ["https://example.org/", "https://sub.example.org/x", None, "https://notexample.org/",
                              "https://EXAMPLE.org:8080/p", "http://other.net/"]})
    ids = erase.Matcher(request(tmp_path, "ids", ["a"]), ["a"])
    assert ids.mask(table).tolist() == [True, True, True, False, False, True]
    assert ids.found(table) == {"a"}
    domains = erase.Matcher(request(tmp_path, "domains", ["example.org", "nowhere.net"]), [])
    assert domains.mask(table).tolist() == [True, True, False, False, True, False]
    assert domains.found(table) == {"example.org"}
    urls = erase.Matcher(request(tmp_path, "urls", ["http://other.net/"]), [])
    assert urls.mask(table).tolist() == [False] * 5 + [True]


# --------------------------------------------------------------------------- dataset parts


@pytest.fixture
def dedup(tmp_path):
    """exact_dedup over two partitions: parts, _rejects/ (e1 duplicates d1), _duplicates/, _work/."""
    src = write_input(tmp_path / "in")
    out = tmp_path / "dedup"
    run_stage("exact_dedup", {}, [src], out, format="parquet")
    return src, out


def test_dataset_parts_equal_a_fresh_run_without_the_documents(dedup, tmp_path):
    src, out = dedup
    before = snapshot(out, side(out))
    # d0: a kept document; e1: the removed duplicate of d1 (only in _rejects/ and _duplicates/)
    outcome = erase.erase([out], request(tmp_path, "ids", ["d0", "e1"]))
    assert not outcome.refused and [u[2] for u in outcome.units] == [2]
    fresh = tmp_path / "fresh"
    run_stage("exact_dedup", {}, [write_input(tmp_path / "in2", without={"d0", "e1"})], fresh, format="parquet")
    got, want = data_files(out), data_files(fresh)
    for rel in ("part-00000.parquet", "part-00001.parquet"):
        assert got[rel] == want[rel], rel
    # e1 was the only reject: a fresh run writes no _rejects/ file, and erase removed it
    assert not any(r.startswith("_rejects/") for r in got) and not any(r.startswith("_rejects/") for r in want)
    for rel in got:
        if rel.startswith(("_duplicates/", "_work/")):
            table = pq.read_table(side(out) / rel)
            if "id" in table.column_names:
                assert not {"d0", "e1"} & set(table["id"].to_pylist()), rel
    m = json.loads((out / "_manifest.json").read_text())
    assert m["counts"] == {"in": 6, "out": 6, "dropped": {}}
    assert m["erasures"][0]["documents"] == 2 and m["erasures"][0]["by"] == "ids"
    assert '"d0"' not in json.dumps(m) and m["status"] == "complete"
    assert (out / "_SUCCESS").exists() and not any(p.name.startswith("erase-") for p in (side(out, "_state")).iterdir())
    _verify_ok(out)
    # a second run finds nothing and changes nothing
    after = snapshot(out, side(out))
    again = erase.erase([out], request(tmp_path, "ids", ["d0", "e1"]))
    assert again.units == [] and again.already and snapshot(out, side(out)) == after
    assert after != before


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_references_to_an_erased_kept_document_are_replaced(tmp_path, fmt):
    """d1 was kept, e1 removed as its duplicate: e1 stays (it was not asked for), but no row names d1."""
    out = tmp_path / "dedup"
    run_stage("exact_dedup", {}, [write_input(tmp_path / "in")], out, format=fmt)
    erase.erase([out], request(tmp_path, "ids", ["d1"]))
    rejects = read_rows(side(out, "_rejects", f"part-00001.{fmt}"))
    assert rejects[["id", "_reason", "_detail"]].values.tolist() == [
        ["e1", "exact_duplicate", "duplicate of an erased document"]]
    duplicates = pd.concat([pd.read_parquet(p) for p in sorted((side(out, "_duplicates")).glob("*.parquet"))])
    assert duplicates["id"].tolist() == ["e1"] and duplicates["kept_id"].isna().all()
    assert not any("d1" in json.dumps(read_rows(p).astype(str).values.tolist()) for p in out.rglob("*.*")
                   if p.suffix in (".parquet", ".jsonl") and not p.name.startswith("."))
    _verify_ok(out)


def test_fuzzy_shingle_sets_of_an_erased_document_are_zeroed(tmp_path):
    """Fuzzy dedup keeps each document's shingle set in _work/shingles/*.u64 (raw, located by the
    signatures part): erase zeroes the erased document's values there and leaves every other set."""
    src = write_input(tmp_path / "in")
    out = tmp_path / "fuzzy"
    run_stage("fuzzy_dedup", {}, [src], out, format="parquet")
    sig = pd.read_parquet(side(out, "_work") / "signatures" / "part-00000.parquet")
    before = np.fromfile(side(out, "_work") / "shingles" / "part-00000.u64", dtype="<u8")
    other = np.fromfile(side(out, "_work") / "shingles" / "part-00001.u64", dtype="<u8")
    erase.erase([out], request(tmp_path, "ids", ["d2"]))
    after = np.fromfile(side(out, "_work") / "shingles" / "part-00000.u64", dtype="<u8")
    d2 = sig.set_index("id").loc["d2"]
    gone = np.zeros(len(before), dtype=bool)
    gone[int(d2["start"]):int(d2["start"]) + int(d2["count"])] = True
    assert len(after) == len(before) and (after[gone] == 0).all() and (after[~gone] == before[~gone]).all()
    assert (np.fromfile(side(out, "_work") / "shingles" / "part-00001.u64", dtype="<u8") == other).all()
    assert "d2" not in set(pd.read_parquet(side(out, "_work") / "signatures" / "part-00000.parquet")["id"])
    _verify_ok(out)
    again = erase.erase([out], request(tmp_path, "ids", ["d2"]))
    assert again.units == []


def read_rows(path: Path) -> pd.DataFrame:
    if path.suffix == ".parquet":
        return pd.read_parquet(path)
    return pd.read_json(path, lines=True, dtype=False)


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_a_part_left_empty_is_what_the_stage_writes(tmp_path, fmt):
    src = write_input(tmp_path / "in")
    out = tmp_path / "clean"
    run_stage("clean", {}, [src], out, format=fmt)
    erase.erase([out], request(tmp_path, "urls", ["https://a.example.com/0", "https://a.example.com/1",
                                                  "https://b.example.com/2", "https://a.example.com/3"]))
    fresh = tmp_path / "fresh"
    run_stage("clean", {}, [write_input(tmp_path / "in2", without={"d0", "d1", "d2", "d3"})], fresh, format=fmt)
    assert data_files(out) == data_files(fresh)  # part-00000 holds no document, as a fresh run writes it
    _verify_ok(out)


def _verify_ok(path, tokens=False):
    from curate.app.commands.verify import output_problems

    assert output_problems(str(path), checksums=True, skip_pairs=tokens) == []


# --------------------------------------------------------------------------- token pairs, packed rows, shards


def tokenize(src: str, out: Path, **settings):
    return run_stage("tokenize", {"tokenizer": TOK, **settings}, [src], out, format="parquet")


@pytest.mark.parametrize("settings", [{}, {"keep_empty": True, "append_eod": False},
                                      {"split": {"validation": 0.3}}], ids=["default", "nemo", "split"])
def test_token_pairs_equal_a_fresh_tokenize_without_the_documents(tmp_path, settings):
    from curate.stages.tokenize.verify import verify

    src = write_input(tmp_path / "in")
    out = tmp_path / "tokens"
    tokenize(src, out, **settings)
    erase.erase([out], request(tmp_path, "ids", ["d1", "e0", "e2"]))
    fresh = tmp_path / "fresh"
    tokenize(write_input(tmp_path / "in2", without={"d1", "e0", "e2"}), fresh, **settings)
    assert data_files(out) == data_files(fresh)
    m, f = (json.loads((p / "_manifest.json").read_text()) for p in (out, fresh))
    for key in ("files", "sets", "totals", "counts", "outputs"):
        assert m[key] == f[key], key
    assert verify(str(out)).ok
    _verify_ok(out, tokens=True)


def test_a_pair_left_without_documents_is_removed(tmp_path):
    src = write_input(tmp_path / "in")
    out = tmp_path / "tokens"
    tokenize(src, out)
    erase.erase([out], request(tmp_path, "domains", ["c.example.com", "x.example.org"]))
    assert sorted(p.name for p in out.glob("part_*")) == ["part_00000.bin", "part_00000.docs.parquet",
                                                           "part_00000.idx"]
    fresh = tmp_path / "fresh"
    tokenize(write_input(tmp_path / "in2", without={"e0", "e1", "e2", "e3"}), fresh)
    assert data_files(out) == data_files(fresh)
    m, f = (json.loads((p / "_manifest.json").read_text()) for p in (out, fresh))
    for key in ("files", "sets", "totals", "counts", "outputs"):
        assert m[key] == f[key], key


@pytest.fixture
def token_chain(tmp_path):
    """A token set of two pairs, its packed rows (several rows per pair, a dropped long document)
    and its shards (several, the first held out)."""
    src = write_input(tmp_path / "in")
    tokens, packed, shards = tmp_path / "tokens", tmp_path / "pack", tmp_path / "shards"
    tokenize(src, tokens)
    run_stage("pack", PACK, [tokens], packed)
    run_stage("shards", SHARDS, [tokens], shards)
    return tokens, packed, shards


PACK = {"seq_length": 128, "long_docs": "drop"}
SHARDS = {"shard_tokens": 200, "holdout_shards": 1}


@pytest.mark.parametrize("entries", [["d1"], ["d0", "d1", "d2", "d3"], ["e3"]], ids=["one", "first-pair", "last"])
def test_packed_rows_and_shards_equal_a_rebuild_from_the_erased_tokens(token_chain, tmp_path, entries):
    tokens, packed, shards = token_chain
    untouched = {p: b for p, b in data_files(shards).items()}
    erase.erase([tokens, packed, shards], request(tmp_path, "ids", entries))
    fresh_pack, fresh_shards = tmp_path / "fresh-pack", tmp_path / "fresh-shards"
    run_stage("pack", PACK, [tokens], fresh_pack)
    run_stage("shards", SHARDS, [tokens], fresh_shards)
    assert data_files(packed) == data_files(fresh_pack)
    assert data_files(shards) == data_files(fresh_shards)
    for a, b in ((packed, fresh_pack), (shards, fresh_shards)):
        m, f = (json.loads((p / "_manifest.json").read_text()) for p in (a, b))
        for key in ("files", "shards", "totals", "counts", "sets", "splits", "outputs"):
            assert m.get(key) == f.get(key), (a, key)
        _verify_ok(a)
    # shards before the first that held an erased document are the same files
    first = min(k for k, s in enumerate(json.loads((fresh_shards / "_manifest.json").read_text())["shards"])
                if _holds_changed(untouched, data_files(fresh_shards), s["name"]))
    for k, s in enumerate(json.loads((shards / "_manifest.json").read_text())["shards"]):
        if k < first:
            assert untouched[s["name"]] == data_files(shards)[s["name"]]


def _holds_changed(before, after, name):
    return before.get(name) != after.get(name)


def test_consumers_need_their_token_set(token_chain, tmp_path):
    tokens, packed, shards = token_chain
    before = snapshot(tokens, packed, shards, side(tokens), side(packed), side(shards))
    with pytest.raises(SettingsError, match="does not include"):
        erase.erase([packed], request(tmp_path, "ids", ["d1"]))
    with pytest.raises(SettingsError, match="too few for one training shard"):
        erase.erase([tokens, shards], request(tmp_path, "ids", [d["id"] for g in DOCS for d in g][:-1]))
    assert snapshot(tokens, packed, shards, side(tokens), side(packed), side(shards)) == before


# --------------------------------------------------------------------------- resume, refusals


def test_a_killed_erase_resumes_to_the_same_files(token_chain, tmp_path, monkeypatch):
    tokens, packed, shards = token_chain
    copies = [tmp_path / f"copy-{p.name}" for p in (tokens, packed, shards)]
    for a, b in zip((tokens, packed, shards), copies):
        copy_output(a, b)
    for copy in copies[1:]:  # the copies' consumers name the copied token set
        p = copy / "_manifest.json"
        p.write_text(p.read_text().replace(str(tokens), str(copies[0])))
    erase.erase(copies, request(tmp_path, "domains", ["example.org", "b.example.com"]))

    from curate.stages.tokenize import docs

    real = docs.write_table
    calls = {"n": 0}

    def dies_on_the_first_sidecar(out, rel, table):
        calls["n"] += 1
        if calls["n"] == 1 and rel.endswith(".docs.parquet"):
            raise KeyboardInterrupt  # killed after the pair's .bin and .idx were written
        return real(out, rel, table)

    monkeypatch.setattr(docs, "write_table", dies_on_the_first_sidecar)
    req = request(tmp_path, "domains", ["example.org", "b.example.com"])
    with pytest.raises(KeyboardInterrupt):
        erase.erase([tokens, packed, shards], req)
    assert not (tokens / "_SUCCESS").exists()
    assert json.loads((tokens / "_manifest.json").read_text())["status"] == "erasing"
    with pytest.raises(SettingsError, match="another request"):
        erase.erase([tokens], request(tmp_path, "ids", ["d0"], "other.txt"))
    erase.erase([tokens, packed, shards], req)
    for a, b in zip((tokens, packed, shards), copies):
        assert data_files(a) == data_files(b), a
        m, f = (json.loads((p / "_manifest.json").read_text()) for p in (a, b))
        assert m["outputs"] == f["outputs"] and len(m["erasures"]) == 1


def test_killed_after_a_manifest_was_written_counts_once(dedup, tmp_path, monkeypatch):
    _src, out = dedup
    copy = tmp_path / "copy"
    copy_output(out, copy)
    req = request(tmp_path, "ids", ["d0", "e1"])
    erase.erase([copy], req)
    real = Output.forget

    def dies(self, key):
        raise KeyboardInterrupt  # the manifest and _SUCCESS are written, the plan is still in the journal

    monkeypatch.setattr(Output, "forget", dies)
    with pytest.raises(KeyboardInterrupt):
        erase.erase([out], req)
    monkeypatch.setattr(Output, "forget", real)
    erase.erase([out], req)
    assert json.loads((out / "_manifest.json").read_text())["counts"] == \
        json.loads((copy / "_manifest.json").read_text())["counts"]
    assert len(json.loads((out / "_manifest.json").read_text())["erasures"]) == 1
    assert data_files(out) == data_files(copy) and not list((side(out, "_state")).glob("erase-*"))


def test_refusals_change_nothing(dedup, tmp_path):
    _src, out = dedup
    before = snapshot(out, side(out))
    outcome = erase.erase([out], request(tmp_path, "ids", ["d0", "nobody", "nothing"]))
    assert outcome.refused and outcome.unknown == ["nobody", "nothing"] and snapshot(out, side(out)) == before
    with pytest.raises(OwnershipError, match="not a curate output"):
        erase.erase([tmp_path / "in"], request(tmp_path, "ids", ["d0"]))
    (out / "mine.parquet").write_bytes(b"x")
    with pytest.raises(OwnershipError, match="mine.parquet"):
        erase.erase([out], request(tmp_path, "ids", ["d0"]))
    (out / "mine.parquet").unlink()
    from curate.stages.output import Lock

    with Lock(Output.at(out), "curate filter (a test)"):
        with pytest.raises(LockedError, match=r"curate filter \(a test\)"):
            erase.erase([out], request(tmp_path, "ids", ["d0"]))
    (out / "_SUCCESS").unlink()
    with pytest.raises(SettingsError, match="did not finish"):
        erase.erase([out], request(tmp_path, "ids", ["d0"]))
    (out / "_SUCCESS").write_bytes(b"")
    assert snapshot(out, side(out)) == before


def test_a_sidecar_that_disagrees_with_its_idx_is_refused(tmp_path):
    from curate.stages.output import CHECKSUM
    from curate.stages.tokenize import docs

    out = tmp_path / "tokens"
    tokenize(write_input(tmp_path / "in"), out)
    o = Output.at(out)
    table = pq.read_table(out / "part_00000.docs.parquet")
    rec = docs.write_table(o, "part_00000.docs.parquet", table.slice(1))  # a row dropped, checksum kept in step
    m = json.loads((out / "_manifest.json").read_text())
    m["files"][0]["docs_xxh3_128"] = rec[CHECKSUM]
    for r in m["outputs"]:
        if r["path"] == rec["path"]:
            r.update(rec)
    (out / "_manifest.json").write_text(json.dumps(m))
    before = snapshot(out, side(out))
    with pytest.raises(DataError, match=r"part_00000.docs.parquet: rows: 3, but part_00000.idx has 4"):
        erase.erase([out], request(tmp_path, "ids", ["d1"]))
    assert snapshot(out, side(out)) == before


# --------------------------------------------------------------------------- killed at every file operation


class Killed(BaseException):
    """Stands for SIGKILL: nothing of curate's catches it."""


def _timeless(obj):
    if isinstance(obj, dict):
        return {k: _timeless(v) for k, v in obj.items() if k not in ("at", "seconds", "timings")}
    if isinstance(obj, list):
        return [_timeless(v) for v in obj]
    return obj


def _normalised(folder: Path) -> dict[str, bytes]:
    """Every file below ``folder`` (temporaries a kill left included: they must be gone), JSON
    without times (when the erasure ran, how long a rebuilt shard took): the only things a rerun may
    change."""
    found = {}
    for p in sorted(folder.rglob("*")):
        if not p.is_file():
            continue
        rel = p.relative_to(folder).as_posix()
        data = p.read_bytes()
        if p.suffix == ".json":  # manifests and journal records: times are not results
            data = json.dumps(_timeless(json.loads(data)), sort_keys=True).encode()
        found[rel] = data
    return found


@pytest.fixture
def job_chain(tmp_path):
    """A job root (exact_dedup, whose e1 duplicates d1, then tokenize), and packed rows and shards of
    its token set: every kind of unit erase rewrites."""
    from curate.app.cli import main

    src = write_input(tmp_path / "in")
    (tmp_path / "job.yaml").write_text(f"name: chain\ninput: '{src}'\nio: {{format: parquet}}\nstages:\n"
                                       f"  - exact_dedup: {{}}\n  - tokenize: {{tokenizer: '{TOK}'}}\n")
    root = tmp_path / "work" / "job"
    assert main(["run", str(tmp_path / "job.yaml"), "--output", str(root), "--cluster", "threads"]) == 0
    run_stage("pack", PACK, [root / "02-tokenize"], tmp_path / "work" / "pack")
    run_stage("shards", SHARDS, [root / "02-tokenize"], tmp_path / "work" / "shards")
    return tmp_path / "work"


def test_an_erase_killed_after_any_file_operation_then_rerun_equals_a_clean_erase(job_chain, tmp_path, monkeypatch):
    """Issue 29, point 3: erasing e1 (the removed duplicate of d1: d1's dup_cluster_size goes 2 -> 1)
    and d2, killed after the 1st, 2nd, ... file operation (a file in place, a file removed), then run
    again, gives the files of a clean erase; so does a second kill during the rerun."""
    import contextlib

    pristine = tmp_path / "pristine"
    copy_output(job_chain, pristine)
    roots = [job_chain / "job", job_chain / "pack", job_chain / "shards"]
    req = request(tmp_path, "ids", ["e1", "d2"])

    def restore():
        shutil.rmtree(job_chain)
        copy_output(pristine, job_chain)

    erase.erase(roots, req)
    clean = _normalised(job_chain)
    sizes = pd.concat([pd.read_parquet(p) for p in sorted((job_chain / "job" / "01-exact_dedup").glob("part-*"))])
    assert dict(zip(sizes["id"], sizes["dup_cluster_size"]))["d1"] == 1

    real_open, real_remove = Output.open, Output.remove
    ops = {"n": 0, "kill_at": None}

    def tick():
        ops["n"] += 1
        if ops["n"] == ops["kill_at"]:
            raise Killed(ops["n"])

    @contextlib.contextmanager
    def counted_open(self, rel):
        with real_open(self, rel) as f:
            yield f
        tick()

    def counted_remove(self, rel, owned=None):
        real_remove(self, rel, owned)
        tick()

    monkeypatch.setattr(Output, "open", counted_open)
    monkeypatch.setattr(Output, "remove", counted_remove)
    restore()
    erase.erase(roots, req)
    total = ops["n"]
    assert total > 20  # journal records, manifests, sentinels, parts, pairs, rows, shards
    for kill_at in range(1, total + 1):
        restore()
        ops.update(n=0, kill_at=kill_at)
        with pytest.raises(Killed):
            erase.erase(roots, req)
        ops.update(n=0, kill_at=kill_at // 2 + 1 if kill_at % 3 == 0 else None)  # killed again, sometimes
        with contextlib.suppress(Killed):
            erase.erase(roots, req)
        ops.update(n=0, kill_at=None)
        erase.erase(roots, req)
        assert _normalised(job_chain) == clean, f"killed after file operation {kill_at} of {total}"


# --------------------------------------------------------------------------- what a request names (issue 29, point 7)


def test_ids_and_urls_are_taken_exactly_as_written(tmp_path):
    path = tmp_path / "ids.txt"
    path.write_bytes(b" spaced\r\nplain \n\n   \nlast")
    assert erase.read_request(str(path), "ids").entries == (" spaced", "plain ", "last")
    table = pa.table({"id": ["spaced", " spaced", "plain", "plain "]})
    m = erase.Matcher(erase.read_request(str(path), "ids"), [" spaced", "plain ", "last"])
    assert m.mask(table).tolist() == [False, True, False, True]


def test_domains_match_unicode_and_idna_hosts_alike(tmp_path):
    table = pa.table({"url": ["https://bücher.de/a", "https://xn--bcher-kva.de/b", "https://shop.BÜCHER.de/c",
                              "https://buecher.de/d", "https://bucher.de/e"]})
    for entry in ("bücher.de", "xn--bcher-kva.de", "BÜCHER.DE."):
        m = erase.Matcher(request(tmp_path, "domains", [entry]), [])
        assert m.mask(table).tolist() == [True, True, True, False, False], entry
        assert m.found(table) == {"xn--bcher-kva.de"}
    with pytest.raises(SettingsError, match="not a domain name"):
        request(tmp_path, "domains", ["bü cher.de"])


def test_an_ip_host_matches_only_whole(tmp_path):
    table = pa.table({"url": ["http://10.0.0.1/x", "http://0.1/y", "http://[::1]/z", "http://a.10.0.0.1.example/"]})
    assert erase.Matcher(request(tmp_path, "domains", ["0.1"]), []).mask(table).tolist() == [False, True, False, False]
    assert erase.Matcher(request(tmp_path, "domains", ["10.0.0.1"]), []).mask(table).tolist() == [True, False, False, False]
    assert erase.Matcher(request(tmp_path, "domains", ["0.0.1"]), []).mask(table).tolist() == [False] * 4


def test_a_token_set_whose_every_document_was_erased_verifies(tmp_path, capsys):
    """Issue 29, point 10: verify said "no pairs" of a token set erase had emptied, as tokenize leaves none."""
    from curate.app.cli import main

    out = tmp_path / "tokens"
    tokenize(write_input(tmp_path / "in"), out)
    erase.erase([out], request(tmp_path, "ids", [d["id"] for g in DOCS for d in g]))
    assert not list(out.glob("*.bin"))
    capsys.readouterr()
    assert main(["verify", str(out), "--checksums"]) == 0, capsys.readouterr().err
