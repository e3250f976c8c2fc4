"""curate never touches what is not its own, and verify/merge trust only manifests (real files, real processes)."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

from tests.conftest import ROOT, copy_output, curate, curate_here, run_stage, side, write_jsonl

DOCS = [{"id": f"d{i}", "text": f"Document number {i} says hello  to everyone. " * (i % 4 + 1)} for i in range(12)]


def snapshot(folder):
    """path -> sha256 of every file below ``folder``: 'unchanged byte for byte' made checkable."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def cli(*args, cwd, check=False, here=False):
    """``curate ARGS`` in a real process from ``cwd``; ``here``: through cli.main in this process."""
    if here:
        return curate_here(*args, cwd=cwd)
    return subprocess.run([sys.executable, "-m", "curate", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})


def one_line_refusal(proc, *words):
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and all(w in lines[0] for w in words), proc.stderr


def test_output_equal_to_or_around_an_input_is_refused_untouched(tmp_path):
    for k in range(2):
        write_jsonl(tmp_path / f"part-{k:05d}.jsonl", DOCS[k::2])
    before = snapshot(tmp_path)
    # the example: clean the part files of the current directory into the current directory
    one_line_refusal(cli("clean", "--input", "part-*.jsonl", "--output", ".", cwd=tmp_path),
                     "contains the input")
    run_stage("clean", {}, [tmp_path / "part-00000.jsonl"], tmp_path / "s1")
    s1 = (snapshot(tmp_path / "s1"), snapshot(side(tmp_path / "s1")))
    one_line_refusal(cli("redact", "--input", "s1", "--output", "s1", cwd=tmp_path, here=True), "is the input directory")
    one_line_refusal(cli("redact", "--input", "s1", "--output", "s1/sub", cwd=tmp_path, here=True),
                     "inside the input directory")
    one_line_refusal(cli("redact", "--input", "s1", "--output", ".", cwd=tmp_path, here=True),
                     "contains the input directory")
    assert (snapshot(tmp_path / "s1"), snapshot(side(tmp_path / "s1"))) == s1
    assert {k: v for k, v in snapshot(tmp_path).items() if not k.startswith(("s1/", "s1.side/"))} == before


@pytest.mark.parametrize("force", [False, True])
def test_user_files_in_the_output_folder_are_left_alone(tmp_path, force):
    src = write_jsonl(tmp_path / "in.jsonl", DOCS)
    out = tmp_path / "out"
    (out / "_rejects").mkdir(parents=True)
    (out / "_work").mkdir()
    (out / "part-00000.parquet").write_bytes(b"the user's own part file")
    (out / "_rejects" / "mine.txt").write_text("user notes")
    (out / "_work" / "model.bin").write_bytes(b"\x00" * 10)
    (out / "manifest.json").write_text('{"my": "own manifest"}')
    before = snapshot(out)
    proc = cli("clean", "--input", src, "--output", out, *(["--force"] if force else []), cwd=tmp_path)
    one_line_refusal(proc, str(out), "not a curate output", "_rejects/mine.txt")
    assert snapshot(out) == before


def test_a_stage_output_is_not_reused_by_another_stage_or_with_user_files(tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", DOCS)
    run_stage("clean", {}, [src], tmp_path / "out")
    one_line_refusal(cli("redact", "--input", src, "--output", tmp_path / "out", cwd=tmp_path),
                     "written by stage 'clean', not stage 'redact'")
    (tmp_path / "out" / "notes.md").write_text("mine")
    before = snapshot(tmp_path / "out")
    one_line_refusal(cli("clean", "--input", src, "--output", tmp_path / "out", "--force", cwd=tmp_path, here=True),
                     "holds files curate did not write", "notes.md")
    assert snapshot(tmp_path / "out") == before


def test_two_prefixes_share_a_folder(tmp_path):
    write_jsonl(tmp_path / "web" / "a.jsonl", DOCS[:6])
    write_jsonl(tmp_path / "web" / "b.jsonl", DOCS[6:])
    code = write_jsonl(tmp_path / "code.jsonl", [{"id": "c1", "text": "def f(x):\n    return x\n"}])
    out = tmp_path / "tok"
    run_stage("tokenize", {"tokenizer": "tiktoken:cl100k_base", "prefix": "web"}, [str(tmp_path / "web" / "*.jsonl")], out)
    web_pairs = {p.name: p.read_bytes() for p in out.glob("web_*")}
    run_stage("tokenize", {"tokenizer": "tiktoken:cl100k_base", "prefix": "code"}, [code], out)
    assert {p.name: p.read_bytes() for p in out.glob("web_*")} == web_pairs  # the first corpus survived
    assert sorted(p.name for p in out.iterdir()) == [
        "_SUCCESS.code", "_SUCCESS.web", "_manifest.code.json", "_manifest.web.json", "code_00000.bin", "code_00000.docs.parquet", "code_00000.idx", "web_00000.bin", "web_00000.docs.parquet",
        "web_00000.idx", "web_00001.bin", "web_00001.docs.parquet", "web_00001.idx"]
    assert sorted(p.name for p in side(out).iterdir()) == ["_state.code", "_state.web"]  # each unit's journal
    for args in ([], ["--prefix", "web"], ["--prefix", "code"]):
        proc = (curate_here if args else curate)("verify", out, *args)
        assert "OK" in proc.stdout
    assert "code: 1 files, 1 documents" in curate_here("verify", out, "--prefix", "code").stdout
    assert curate_here("merge", out, "--prefix", "web", "--output", tmp_path / "merged" / "web").returncode == 0
    merged = curate_here("verify", tmp_path / "merged" / "web").stdout
    assert "OK" in merged and "web: 1 files, 12 documents" in merged
    # rerunning one prefix leaves the other alone; the output of another stage cannot join
    run_stage("tokenize", {"tokenizer": "tiktoken:cl100k_base", "prefix": "web", "append_eod": False},
              [str(tmp_path / "web" / "*.jsonl")], out)
    assert (out / "code_00000.bin").exists() and curate_here("verify", out).returncode == 0
    one_line_refusal(cli("clean", "--input", code, "--output", out, cwd=tmp_path, here=True),
                     "holds the output of stage 'tokenize'")


def slow_job(tmp_path):
    """A job that takes a few seconds on a real local cluster (enough to be caught running)."""
    for k in range(2):
        write_jsonl(tmp_path / "data" / f"f{k}.jsonl", [{"id": f"{k}-{i}", "text": f"doc  {k} {i} " * 30}
                                                        for i in range(2000)])
    job = tmp_path / "job.yaml"
    job.write_text(f"input: [{tmp_path / 'data'}/*.jsonl]\nstages:\n  - clean: {{}}\n  - shuffle: {{partitions: 2}}\n")
    return job


@pytest.mark.slow
def test_two_concurrent_runs_one_is_refused(tmp_path):
    job = slow_job(tmp_path)
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    first = subprocess.Popen([sys.executable, "-m", "curate", "run", job, "--output", out, "--workers", "1"],
                             cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.time() + 240
    while not (out / "_LOCK").exists() and time.time() < deadline:
        time.sleep(0.05)
    assert (out / "_LOCK").exists()
    holder = json.loads((out / "_LOCK").read_text())
    assert holder["pid"] == first.pid
    second = cli("run", job, "--output", out, cwd=ROOT)
    one_line_refusal(second, "locked by curate run", f"pid {first.pid}")
    stage = cli("shuffle", "--input", tmp_path / "data" / "*.jsonl", "--output", out / "02-shuffle", cwd=ROOT)
    one_line_refusal(stage, "held by curate run", f"pid {first.pid}")
    _, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    assert not (out / "_LOCK").exists()
    assert cli("verify", out, cwd=ROOT, here=True).returncode == 0
    # the survivor's output is what an undisturbed run writes (in this process: the same bytes as a cluster's)
    alone = tmp_path / "alone"
    done = cli("run", job, "--output", alone, "--cluster", "threads", cwd=ROOT, here=True)
    assert done.returncode == 0, done.stderr[-3000:]
    for part in ("02-shuffle/part-00000.parquet", "02-shuffle/part-00001.parquet"):
        assert (out / part).read_bytes() == (alone / part).read_bytes()


def hold_lock(path, what):
    """A real process holding the lock of ``path`` as ``what`` (a command running there) until killed."""
    code = ("import sys, time; from curate.stages.output import Lock, Output;"
            f"Lock(Output.at({str(path)!r}), {what!r}).acquire(); print('held', flush=True); time.sleep(120)")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


@pytest.mark.parametrize("begun", [False, True])
def test_a_job_names_the_stage_command_that_holds_its_stage_folder(tmp_path, begun):
    """``curate clean --output R/01-clean`` is running (starting its cluster, or writing); ``curate run``
    on R names it, as every lock refusal does, whatever the folder holds so far."""
    src = write_jsonl(tmp_path / "in.jsonl", DOCS)
    job = tmp_path / "job.yaml"
    job.write_text(f"input: {src}\nstages:\n  - clean: {{}}\n")
    if begun:
        run_stage("clean", {}, [src], tmp_path / "R" / "01-clean")
    holder = hold_lock(tmp_path / "R" / "01-clean", "curate clean")
    try:
        before = snapshot(tmp_path / "R")
        one_line_refusal(cli("run", job, "--output", tmp_path / "R", cwd=tmp_path),
                         f"{tmp_path / 'R' / '01-clean' / '_LOCK'} is held by curate clean", f"pid {holder.pid}")
        assert snapshot(tmp_path / "R") == before
    finally:
        holder.kill()
        holder.wait()


def test_stale_lock_of_a_dead_process_is_taken_over(tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", DOCS)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "_LOCK").write_text(json.dumps({"host": os.uname().nodename, "pid": int(dead.stdout),
                                                        "heartbeat": time.time(), "what": "curate clean"}))
    proc = cli("clean", "--input", src, "--output", tmp_path / "out", "--workers", "1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "taking over a stale lock" in proc.stderr and f"pid {int(dead.stdout)}" in proc.stderr
    assert not (tmp_path / "out" / "_LOCK").exists()


# --------------------------------------------------------------------------- verify catches


@pytest.fixture(scope="module")
def token_sets(tmp_path_factory):
    base = tmp_path_factory.mktemp("sets")
    for name, texts in (("a", ["alpha beta", "gamma delta epsilon", "zeta"]), ("b", ["one two", "three", "four five"])):
        for k in range(2):
            write_jsonl(base / name / "in" / f"f{k}.jsonl", [{"id": f"{k}{j}", "text": t} for j, t in enumerate(texts)])
        run_stage("tokenize", {"tokenizer": "tiktoken:cl100k_base"}, str(base / name / "in" / "*.jsonl"),
                  base / name / "out")
    return base


@pytest.fixture
def tok(token_sets, tmp_path):
    copy_output(token_sets / "b" / "out", tmp_path / "b")
    return copy_output(token_sets / "a" / "out", tmp_path / "a")


def problems(path, *args, here=False):
    proc = curate_here("verify", path, *args) if here else curate("verify", path, *args, check=False)
    assert (proc.returncode == 0) == (not proc.stderr.strip()), proc.stderr
    return proc.returncode, proc.stderr.strip().splitlines()[:-1]


def test_verify_passes_a_clean_set(tok):
    assert problems(tok) == (0, [])
    assert problems(tok, "--checksums", here=True) == (0, [])


def test_verify_catches_a_stray_copy_of_a_pair(tok):
    for ext in ("bin", "idx"):
        shutil.copy(tok / f"part_00000.{ext}", tok / f"part_00007.{ext}")
    code, lines = problems(tok)
    assert code == 1 and lines == [f"{tok}/part_00007.bin: stray pair: listed in no manifest here (a copy, another "
                                   "run's pair or a merge written inside the set)"]


def test_verify_catches_a_pair_copied_from_another_run(tok):
    for ext in ("bin", "idx"):
        shutil.copy(tok.parent / "b" / f"part_00001.{ext}", tok / f"part_00001.{ext}")
    code, lines = problems(tok)
    assert code == 1 and lines and all("part_00001" in line for line in lines), lines


def test_verify_catches_a_merge_written_inside_the_set(tok, tmp_path):
    proc = curate_here("merge", tok, "--output", tok / "merged")
    assert proc.returncode == 2 and "inside the input set" in proc.stderr
    assert curate_here("merge", tok, "--output", tmp_path / "m" / "merged").returncode == 0
    for ext in ("bin", "idx"):
        shutil.copy(tmp_path / "m" / f"merged.{ext}", tok / f"merged.{ext}")
    code, lines = problems(tok)
    assert code == 1 and lines == [f"{tok}/merged.bin: stray pair: listed in no manifest here (a copy, another "
                                   "run's pair or a merge written inside the set)"]
    for ext in ("bin", "idx"):  # a stray of the set itself is refused by merge too
        os.rename(tok / f"merged.{ext}", tok / f"part_00009.{ext}")
    proc = curate_here("merge", tok, "--output", tmp_path / "m2" / "x")
    assert proc.returncode == 1 and "part_00009.bin: stray pair" in proc.stderr


def test_verify_catches_a_bit_flip_and_a_zeroed_bin(tok):
    data = bytearray((tok / "part_00000.bin").read_bytes())
    data[5] ^= 0x01  # a token id changes by one, still a valid id
    (tok / "part_00000.bin").write_bytes(bytes(data))
    (tok / "part_00001.bin").write_bytes(b"\x00" * (tok / "part_00001.bin").stat().st_size)
    code, lines = problems(tok)
    assert code == 1 and [line.split(": ")[:2] for line in lines] == [
        [f"{tok}/part_00000.bin", "checksum"], [f"{tok}/part_00001.bin", "checksum"]]
    proc = curate_here("merge", tok, "--output", tok.parent / "m")
    assert proc.returncode == 1 and "checksum" in proc.stderr and not (tok.parent / "m.bin").exists()


def test_verify_catches_tokens_moved_between_documents(tok):
    """The lengths of two documents change but add up to the same: structure and counts still hold."""
    idx = bytearray((tok / "part_00000.idx").read_bytes())
    header = 34  # magic 9, version 8, dtype 1, sequences 8, documents 8 (modules/tokenize/megatron.py)
    first, second = np.frombuffer(bytes(idx[header:header + 8]), dtype="<i4")
    idx[header:header + 8] = np.array([first - 1, second + 1], dtype="<i4").tobytes()
    # the pointers follow the lengths, as a well-formed index would have them
    n = int(np.frombuffer(bytes(idx[18:26]), dtype="<i8")[0])
    ptr = header + 4 * n
    p1 = int(np.frombuffer(bytes(idx[ptr + 8:ptr + 16]), dtype="<i8")[0])
    idx[ptr + 8:ptr + 16] = np.array([p1 - 4], dtype="<i8").tobytes()
    (tok / "part_00000.idx").write_bytes(bytes(idx))
    code, lines = problems(tok)
    assert code == 1 and [line.split(": ")[:2] for line in lines] == [[f"{tok}/part_00000.idx", "checksum"]]


def test_reader_and_verify_catch_an_extra_and_a_missing_part(tmp_path):
    for k in range(2):
        write_jsonl(tmp_path / "in" / f"f{k}.jsonl", DOCS[k::2])
    run_stage("clean", {}, [str(tmp_path / "in" / "*.jsonl")], tmp_path / "s")
    assert problems(tmp_path / "s", "--checksums") == (0, [])
    shutil.copy(tmp_path / "s" / "part-00001.parquet", tmp_path / "s" / "part-00002.parquet")
    proc = cli("redact", "--input", tmp_path / "s", "--output", tmp_path / "r", cwd=tmp_path)
    assert proc.returncode == 1 and "part-00002.parquet is not listed in _manifest.json" in proc.stderr
    assert problems(tmp_path / "s", here=True)[1] == [f"{tmp_path / 's'}/part-00002.parquet: unlisted: no manifest here names "
                                           "this file (a stray or foreign file)"]
    os.remove(tmp_path / "s" / "part-00002.parquet")
    os.remove(tmp_path / "s" / "part-00000.parquet")
    proc = cli("redact", "--input", tmp_path / "s", "--output", tmp_path / "r", cwd=tmp_path, here=True)
    assert proc.returncode == 1 and "part-00000.parquet is listed in _manifest.json but missing" in proc.stderr
    assert problems(tmp_path / "s", here=True)[1] == [f"{tmp_path / 's'}/part-00000.parquet: missing: listed in _manifest.json"]
    assert not (tmp_path / "r").exists()
