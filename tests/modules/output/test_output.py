"""The output abstraction: checksums while writing, the journal, ownership, claims and the lock."""

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import xxhash

from curate.stages.output import (
    Lock,
    LockedError,
    Output,
    OwnershipError,
    check_claim,
    check_not_input,
    refuse_link,
    unlisted,
    verify_unit,
)
from tests.conftest import side

STAGE = {"kind": "stage", "stage": "clean"}


def test_records_are_the_bytes_on_disk(tmp_path):
    """The oracle is xxhash over the final file: the checksum computed while writing must equal it."""
    out = Output.at(tmp_path / "o")
    df = pd.DataFrame({"id": ["a", "b"], "text": ["x", "ü" * 1000]})
    records = [out.write_bytes("a/b.bin", b"\x00\x01" * 70_000), out.write_json("j.json", {"k": [1, 2]}),
               out.write_frame("part-00000.parquet", df, "parquet"), out.write_frame("part-00001.jsonl", df, "jsonl")]
    for r in records:
        data = (tmp_path / "o" / r["path"]).read_bytes()
        assert r["bytes"] == len(data) and r["xxh3_128"] == xxhash.xxh3_128_hexdigest(data)
    assert records[2]["rows"] == 2
    # the file holds Dask's string dtype whatever the frame's (see unit._same_strings); the values are df's
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "o" / "part-00000.parquet"), df, check_dtype=False)
    assert pd.read_json(tmp_path / "o" / "part-00001.jsonl", lines=True).equals(df)
    assert not [p for p in os.listdir(tmp_path / "o") if p.startswith(".")]  # no temporaries left


def test_a_failed_or_abandoned_write_leaves_nothing(tmp_path):
    out = Output.at(tmp_path)
    with pytest.raises(RuntimeError):
        with out.open("x.bin") as f:
            f.write(b"half")
            raise RuntimeError("boom")
    with out.open("y.bin") as f:
        f.write(b"nothing worth keeping")
        f.abandon()
    assert f.record is None and os.listdir(tmp_path) == []


def test_journal_resume_and_ownership(tmp_path):
    out = Output.at(tmp_path)
    out.begin(STAGE)
    out.intend("part-00000", ["part-00000.parquet"])
    rec = out.write_bytes("part-00000.parquet", b"abc")
    out.record_done("part-00000", "run1", [rec], stats={"in": 1})
    out.intend("part-00001", ["part-00001.parquet"])  # killed before writing it
    assert out.finished("part-00000", "run1")["stats"] == {"in": 1}
    assert out.finished("part-00000", "run2") is None  # another run's record is stale
    assert {"part-00000.parquet", "part-00001.parquet"} <= out.owned()
    (tmp_path / "part-00000.parquet").write_bytes(b"abcd")  # changed size: not finished any more
    assert out.finished("part-00000", "run1") is None
    (tmp_path / "user.txt").write_text("mine")
    with pytest.raises(RuntimeError, match="not written by this output"):
        out.remove("user.txt")
    manifest = out.finish({"fingerprint": "run1"}, [])
    # finish deleted what the unit owned and did not list, never the user's file
    assert sorted(os.listdir(tmp_path)) == ["_SUCCESS", "_manifest.json", "user.txt"]
    assert os.listdir(side(tmp_path, "_state")) == ["part-00000.json"]  # this run's record stays for resuming
    assert manifest["status"] == "complete" and manifest["outputs"] == []


def test_claims(tmp_path):
    check_claim(Output.at(tmp_path / "missing"), STAGE)  # missing: fine
    (tmp_path / "empty").mkdir()
    check_claim(Output.at(tmp_path / "empty"), STAGE)  # empty: fine
    (tmp_path / "user").mkdir()
    (tmp_path / "user" / "part-00000.parquet").write_bytes(b"the user's")
    with pytest.raises(OwnershipError, match="not a curate output: .*part-00000.parquet"):
        check_claim(Output.at(tmp_path / "user"), STAGE)
    (tmp_path / "user" / "_manifest.json").write_text('{"something": "else"}')  # a manifest, not curate's
    with pytest.raises(OwnershipError, match="not a curate output: .*_manifest.json \\(and 1 more\\)"):
        check_claim(Output.at(tmp_path / "user"), STAGE)
    ours = Output.at(tmp_path / "ours")
    ours.begin(STAGE)
    ours.finish({"stage": "clean"}, [ours.write_bytes("part-00000.parquet", b"x")])
    check_claim(ours, STAGE)
    with pytest.raises(OwnershipError, match="written by stage 'clean', not stage 'redact'"):
        check_claim(ours, {"kind": "stage", "stage": "redact"})
    (tmp_path / "ours" / "notes.txt").write_text("user's notes")
    with pytest.raises(OwnershipError, match="holds files curate did not write: .*notes.txt"):
        check_claim(ours, STAGE)
    # another tokenize prefix may share the folder; another stage may not
    tok = {"kind": "stage", "stage": "tokenize"}
    web = Output.at(tmp_path / "tok", "web")
    web.begin(tok)
    web.finish({"stage": "tokenize"}, [web.write_bytes("web_00000.bin", b"1")])
    check_claim(Output.at(tmp_path / "tok", "code"), tok)
    with pytest.raises(OwnershipError, match="holds the output of stage 'tokenize'"):
        check_claim(Output.at(tmp_path / "tok"), STAGE)


def test_output_must_not_overlap_inputs(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.jsonl").write_text("{}\n")
    cases = [
        (tmp_path / "d", [tmp_path / "d"], "is the input directory"),
        (tmp_path / "d" / "out", [tmp_path / "d"], "lies inside the input directory"),
        (tmp_path, [tmp_path / "d"], "contains the input directory"),
        (tmp_path / "d", [tmp_path / "d" / "a.jsonl"], "contains the input"),
        (tmp_path / "d", [str(tmp_path / "d" / "*.jsonl")], "contains the input"),
    ]
    for output, inputs, message in cases:
        with pytest.raises(OwnershipError, match=message):
            check_not_input(str(output), [str(i) for i in inputs])
    check_not_input(str(tmp_path / "out"), [str(tmp_path / "d" / "a.jsonl")])  # beside: fine
    check_not_input(str(tmp_path / "d2"), [str(tmp_path / "d" / "*.jsonl")])


def hold_lock(path):
    """A real second process that takes the lock of ``path`` and holds it until killed."""
    code = (f"import sys, time; sys.path.insert(0, {str(os.getcwd())!r});"
            "from curate.stages.output import Lock, Output;"
            f"Lock(Output.at({str(path)!r}), 'holder').acquire(); print('held', flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_lock_between_processes_and_takeover(tmp_path, caplog):
    out = Output.at(tmp_path / "o")
    holder = hold_lock(tmp_path / "o")
    try:
        with pytest.raises(LockedError, match=f"locked by holder \\(host {socket.gethostname()}, pid {holder.pid}"):
            Lock(out).acquire()
        # a job root above, or a stage folder below, is refused too
        with pytest.raises(LockedError, match="held by holder"):
            Lock(Output.at(tmp_path / "o" / "01-clean")).acquire()
        with pytest.raises(LockedError, match="held by holder"):
            Lock(Output.at(tmp_path)).acquire()
    finally:
        holder.kill()
        holder.wait()
    # the holder died (same host, pid gone): taken over with a warning
    with caplog.at_level("WARNING"), Lock(out):
        assert "stale lock" in caplog.text and f"pid {holder.pid}" in caplog.text
    assert not (tmp_path / "o" / "_LOCK").exists()  # released


def test_lock_of_another_host_by_heartbeat(tmp_path, monkeypatch):
    (tmp_path / "_LOCK").write_text(json.dumps({"host": "elsewhere", "pid": 1, "heartbeat": time.time()}))
    with pytest.raises(LockedError, match="host elsewhere"):
        Lock(Output.at(tmp_path)).acquire()
    monkeypatch.setenv("CURATE_LOCK_TIMEOUT", "5")
    (tmp_path / "_LOCK").write_text(json.dumps({"host": "elsewhere", "pid": 1, "heartbeat": time.time() - 60}))
    os.utime(tmp_path / "_LOCK", (time.time() - 60, time.time() - 60))  # its holder stopped writing a minute ago
    lock = Lock(Output.at(tmp_path)).acquire()
    assert json.loads((tmp_path / "_LOCK").read_text())["token"] == lock.token
    lock.release()


def test_verify_unit_and_unlisted(tmp_path):
    out = Output.at(tmp_path)
    out.begin(STAGE)
    df = pd.DataFrame({"id": ["a"], "text": ["x"]})
    recs = [out.write_frame("part-00000.parquet", df, "parquet"), out.write_frame("part-00001.parquet", df, "parquet")]
    out.finish({"stage": "clean", "schema": {}, "counts": {"in": 2, "out": 2, "dropped": {}}}, recs)
    assert verify_unit(out, checksums=True) == [] and unlisted(out) == []
    (tmp_path / "part-00002.parquet").write_bytes((tmp_path / "part-00001.parquet").read_bytes())  # an extra part
    assert unlisted(out) == ["part-00002.parquet"]
    data = bytearray((tmp_path / "part-00001.parquet").read_bytes())
    data[8] ^= 1  # inside the first data page, not the footer
    (tmp_path / "part-00001.parquet").write_bytes(bytes(data))  # same size, one bit flipped
    assert verify_unit(out) == []  # sizes alone cannot see it
    assert [p.split(": ")[1] for p in verify_unit(out, checksums=True)] == ["checksum"]
    (tmp_path / "part-00000.parquet").unlink()
    assert any("part-00000.parquet: missing" in p for p in verify_unit(out))


def decoy(tmp_path):
    """A folder of the user's, outside any output, and the bytes it holds."""
    folder = tmp_path / "decoy"
    folder.mkdir()
    (folder / "part-00000.parquet").write_bytes(b"the user's own")
    return folder, {p.name: p.read_bytes() for p in folder.iterdir()}


def test_no_write_or_delete_through_a_link(tmp_path):
    folder, before = decoy(tmp_path)
    out = Output.at(tmp_path / "o")
    out.begin(STAGE)
    out.finish({"stage": "clean"}, [out.write_bytes("_rejects/part-00000.parquet", b"curate's")])
    side(tmp_path / "o", "_rejects", "part-00000.parquet").unlink()
    side(tmp_path / "o", "_rejects").rmdir()
    side(tmp_path / "o", "_rejects").symlink_to(folder)
    link = side(tmp_path / "o", "_rejects")
    with pytest.raises(OwnershipError, match=f"^{link}: a symbolic link \\(to {folder}\\) inside the output"):
        check_claim(out, STAGE)
    with pytest.raises(OwnershipError, match=f"^{link}: a symbolic link"):
        out.write_bytes("_rejects/part-00000.parquet", b"overwritten")
    with pytest.raises(OwnershipError, match=f"^{link}: a symbolic link"):
        out.write_bytes("_rejects/sub/new.bin", b"a folder made through the link")
    with pytest.raises(OwnershipError, match=f"^{link}: a symbolic link"):
        out.remove("_rejects/part-00000.parquet")
    with pytest.raises(OwnershipError, match=f"^{link}: a symbolic link"):
        out.finish({"stage": "clean"}, [])  # would delete the listed file it no longer writes
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    # a link to a file, or deeper down, is refused as well; the claim names the first and counts the rest
    side(tmp_path / "o", "_work").mkdir()
    side(tmp_path / "o", "_work", "x.json").symlink_to(folder / "part-00000.parquet")
    with pytest.raises(OwnershipError, match="_rejects: a symbolic link .* inside the output .* \\(and 1 more\\)"):
        check_claim(out, STAGE)
    assert out.links() == ["_rejects", "_work/x.json"]
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


def test_a_link_alone_is_refused_and_the_output_itself_may_be_a_link(tmp_path):
    folder, before = decoy(tmp_path)
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "_state").symlink_to(folder)  # no file below the output: its listing is empty
    with pytest.raises(OwnershipError, match="_state: a symbolic link"):
        check_claim(Output.at(tmp_path / "o"), STAGE)
    # the output directory is the user's choice, link or not; and so is a path outside it
    (tmp_path / "real").mkdir()
    (tmp_path / "named").symlink_to(tmp_path / "real")
    out = Output.at(tmp_path / "named")
    check_claim(out, STAGE)
    out.begin(STAGE)
    out.finish({"stage": "clean"}, [out.write_bytes("part-00000.parquet", b"x")])
    assert (tmp_path / "real" / "part-00000.parquet").read_bytes() == b"x"
    refuse_link(str(tmp_path / "o"), str(folder / "part-00000.parquet"))
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


def test_begin_removes_only_the_temporaries_a_killed_run_of_the_unit_left(tmp_path):
    out = Output.at(tmp_path, "web")
    out.begin({"kind": "stage", "stage": "tokenize"})
    out.intend("part-00000", ["web_00000.bin"])
    mine = [".web_00000.bin.curate-tmp-1-aaaa", "._manifest.web.json.curate-tmp-1-bbbb", "_state.web/.k.json.curate-tmp-1"]
    others = [".code_00000.bin.curate-tmp-2-cccc", "._manifest.code.json.curate-tmp-2-dddd",  # another unit, live
              "_LOCK.web.curate-tmp-3", ".notes.txt.curate-tmp-4"]  # the lock's heartbeat; the user's
    for rel in mine + others:
        Path(out.path(rel)).write_bytes(b"half")
    out.begin({"kind": "stage", "stage": "tokenize"})  # the rerun
    assert sorted(rel for rel in mine + others if Path(out.path(rel)).exists()) == sorted(others)


def test_the_side_folder_is_the_outputs_own(tmp_path):
    """``o.side/`` holds the side outputs of ``o`` (rejects, dedup audits and intermediates, journal): a
    claim refuses it when it holds a file of someone else's or is a link, and refuses to write into it."""
    out = Output.at(tmp_path / "o")
    out.begin(STAGE)
    out.finish({"stage": "clean"}, [out.write_bytes("_rejects/part-00000.parquet", b"curate's"),
                                    out.write_bytes("part-00000.parquet", b"kept")])
    assert sorted(os.listdir(tmp_path / "o")) == ["_SUCCESS", "_manifest.json", "part-00000.parquet"]
    assert side(tmp_path / "o", "_rejects", "part-00000.parquet").read_bytes() == b"curate's"
    check_claim(out, STAGE)
    with pytest.raises(OwnershipError, match="the side folder of the curate output"):
        check_claim(Output.at(side(tmp_path / "o")), STAGE)
    with pytest.raises(OwnershipError, match="the input"):
        check_not_input(str(tmp_path / "o"), [str(side(tmp_path / "o", "_rejects"))])
    side(tmp_path / "o", "notes.txt").write_text("mine")
    with pytest.raises(OwnershipError, match="notes.txt: not a side file of curate's"):
        check_claim(out, STAGE)
    from curate.app.commands.verify import output_problems

    assert [p for p in output_problems(str(tmp_path / "o"), True) if "notes.txt: unlisted" in p]
    side(tmp_path / "o", "notes.txt").unlink()
    folder, before = decoy(tmp_path)
    os.rename(side(tmp_path / "o"), tmp_path / "moved")
    side(tmp_path / "o").symlink_to(folder)
    with pytest.raises(OwnershipError, match="a symbolic link .* where curate keeps the side files"):
        check_claim(out, STAGE)
    with pytest.raises(OwnershipError, match="a symbolic link .* where curate keeps the side files"):
        out.write_bytes("_rejects/part-00001.parquet", b"through the link")
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


def test_an_earlier_curates_side_folders_are_read_inside_and_moved_by_the_next_run(tmp_path):
    out = Output.at(tmp_path / "o")
    out.begin(STAGE)
    out.intend("part-00000", ["_rejects/part-00000.parquet"])
    rec = out.write_bytes("_rejects/part-00000.parquet", b"rejected")
    out.record_done("part-00000", "run1", [rec])
    out.finish({"fingerprint": "run1"}, [rec])
    for name in ("_rejects", "_state"):  # where curate wrote them before
        os.rename(side(tmp_path / "o", name), tmp_path / "o" / name)
    assert out.path("_rejects/part-00000.parquet") == str(tmp_path / "o" / "_rejects" / "part-00000.parquet")
    assert out.finished("part-00000", "run1") is not None and verify_unit(out, checksums=True) == []
    # a folder a killed run left inside with a temporary only: nothing there to read, the step writes beside
    (tmp_path / "o" / "_work" / "hashes").mkdir(parents=True)
    (tmp_path / "o" / "_work" / "hashes" / ".part-00000.parquet.curate-tmp-1-ab").write_bytes(b"half")
    assert out.path("_work/hashes") == str(side(tmp_path / "o", "_work", "hashes"))
    (tmp_path / "o" / "_work" / "hashes" / ".part-00000.parquet.curate-tmp-1-ab").unlink()
    out.begin(STAGE)
    assert sorted(os.listdir(tmp_path / "o")) == ["_manifest.json"]
    assert out.finished("part-00000", "run1") is not None
    assert side(tmp_path / "o", "_rejects", "part-00000.parquet").read_bytes() == b"rejected"
