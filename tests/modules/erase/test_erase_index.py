"""Saved dedup indexes under ``curate erase`` (issue 40, point 3).

An erased exact index used to pass ``verify`` and then be refused by every ``--against`` as tampered
(its entry's content digest still named the files before erasure). Erase now recomputes the entry as
the owner of the change; an ``--against`` run takes the index and no longer knows the erased text.
A fuzzy index, whose signatures and shingle sets erase cannot rewrite, is refused by name.
"""

from __future__ import annotations

from curate.app.cli import main
from curate.stages.dedup import index
from tests.conftest import read_output, run_stage, write_jsonl


def _snapshots(tmp_path):
    a = [{"id": f"a{k}", "text": f"snapshot a document {k} about rivers and valleys and bread"} for k in range(6)]
    write_jsonl(tmp_path / "A" / "1.jsonl", a[:3])
    write_jsonl(tmp_path / "A" / "2.jsonl", a[3:])  # two partitions
    # b0 copies a0 (kept in A), b1 copies a1 (erased from A and its index), b2 is new
    b = [{"id": "b0", "text": a[0]["text"]}, {"id": "b1", "text": a[1]["text"]}, {"id": "b2", "text": "something new"}]
    write_jsonl(tmp_path / "B" / "1.jsonl", b)
    (tmp_path / "erase.txt").write_text("a1\n")
    return tmp_path / "A" / "*.jsonl", tmp_path / "B" / "1.jsonl"


def test_an_erased_exact_index_is_taken_by_against_and_forgets_the_erased_text(tmp_path, capsys):
    a, b = _snapshots(tmp_path)
    idx = tmp_path / "idx"
    run_stage("exact_dedup", {"save_index": str(idx)}, str(a), tmp_path / "outA")
    assert main(["erase", str(tmp_path / "outA"), str(idx), "--ids", str(tmp_path / "erase.txt")]) == 0
    assert main(["verify", str(idx)]) == 0
    entry = index.open_index(str(idx), "exact", index.open_index(str(idx), "exact", {}, verify=False).info["settings"]).info
    assert entry["documents"] == 5
    capsys.readouterr()
    manifest = run_stage("exact_dedup", {"against": [str(idx)]}, str(b), tmp_path / "outB")
    assert sorted(read_output(tmp_path / "outB")["id"]) == ["b1", "b2"]  # b1's text left with a1
    assert manifest["dedup"]["against"]["removed_for_index"] == 1


def test_a_fuzzy_index_is_refused_by_name(tmp_path, capsys):
    a, _ = _snapshots(tmp_path)
    idx = tmp_path / "fidx"
    run_stage("fuzzy_dedup", {"save_index": str(idx)}, str(a), tmp_path / "outA")
    before = sorted(p.stat().st_mtime_ns for p in idx.rglob("*"))
    capsys.readouterr()
    assert main(["erase", str(tmp_path / "outA"), str(idx), "--ids", str(tmp_path / "erase.txt")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "a fuzzy dedup index (--save-index)" in err and "raw download" not in err
    assert sorted(p.stat().st_mtime_ns for p in idx.rglob("*")) == before
    assert sorted(read_output(tmp_path / "outA")["id"]) == [f"a{k}" for k in range(6)]  # nothing changed
