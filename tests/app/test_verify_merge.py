"""``curate verify`` and ``curate merge`` on the command line."""

import signal
import subprocess
import sys

import pytest

from curate.app.cli import main
from tests.conftest import ROOT, copy_output, curate, run_stage, write_jsonl


@pytest.fixture(scope="module")
def tokenized(tmp_path_factory):
    base = tmp_path_factory.mktemp("vm")
    for k in range(2):
        write_jsonl(base / "in" / f"f{k}.jsonl", [{"id": f"{k}-{j}", "text": f"Hello number {k}.{j}"} for j in range(30)])
    run_stage("tokenize", {"tokenizer": "tiktoken:cl100k_base"}, str(base / "in" / "*.jsonl"), base / "out")
    run_stage("tokenize", {"tokenizer": "tiktoken:cl100k_base", "split": "validation=0.1"},
              str(base / "in" / "*.jsonl"), base / "split")
    return base


def test_verify_ok(tokenized, capsys):
    assert main(["verify", str(tokenized / "out")]) == 0
    out = capsys.readouterr().out
    assert "OK (vocabulary size 100277 from _manifest.json)" in out
    assert "part: 2 files, 60 documents" in out and "int32" in out
    assert "document 0 of part_00000" in out
    assert "decoded: 'Hello number 0.0<|endoftext|>'" in out


def test_verify_split_sets(tokenized, capsys):
    assert main(["verify", str(tokenized / "split")]) == 0
    out = capsys.readouterr().out
    assert "  train: 2 files" in out and "  validation: " in out and "total: " in out
    assert main(["verify", str(tokenized / "split"), "--prefix", "validation"]) == 0
    assert "train" not in capsys.readouterr().out


def test_verify_failure_lines_and_exit_codes(tokenized, tmp_path, capsys):

    out = copy_output(tokenized / "out", tmp_path / "out")
    data = (out / "part_00001.idx").read_bytes()
    (out / "part_00001.idx").write_bytes(data[:-3])
    (out / "part_00000.bin").unlink()
    assert main(["verify", str(out), "--vocab-size", "100277"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert f"{out}/part_00000.bin: missing partner: part_00000.idx has no .bin" in err
    assert any(line.startswith(f"{out}/part_00001.idx: index size:") for line in err)
    assert err[-1] == f"curate verify: {out}: 2 problem(s)"
    assert main(["verify", str(tmp_path / "none")]) == 2


def test_merge_then_verify_the_merged_pair(tokenized, tmp_path, capsys):
    assert main(["merge", str(tokenized / "out"), "--output", str(tmp_path / "all")]) == 0
    assert "2 files ->" in capsys.readouterr().out
    assert main(["verify", str(tmp_path / "all"), "--tokenizer", "tiktoken:cl100k_base"]) == 0
    assert "all: 1 files, 60 documents" in capsys.readouterr().out
    assert main(["merge", str(tokenized / "split"), "--output", str(tmp_path / "x")]) == 2
    assert "--prefix" in capsys.readouterr().err
    assert main(["merge", str(tokenized / "split"), "--output", str(tmp_path / "train"), "--prefix", "train"]) == 0


def test_real_command_line(tokenized, tmp_path):
    proc = curate("verify", tokenized / "out")
    assert "OK" in proc.stdout
    proc = curate("merge", tokenized / "out", check=False)
    assert proc.returncode == 2 and "--output" in proc.stderr


#: ``curate merge`` that dies by SIGKILL halfway through writing the merged .bin
KILLED_MERGE = """
import os, signal, sys
from curate.stages.tokenize import merge as m

def killed(sources, out_prefix, chunk=None, out=None):
    with out.open(os.path.basename(out_prefix) + ".bin") as f:
        f.write(b"half a merged pair" * 1000)
        f.flush()
        os.kill(os.getpid(), signal.SIGKILL)

m.merge_sources = killed
from curate.app.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_rerun_removes_what_a_killed_merge_left(tokenized, tmp_path, capsys):
    out = tmp_path / "merged"
    proc = subprocess.run([sys.executable, "-c", KILLED_MERGE, "merge", tokenized / "out", "--output", out / "all"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert [p.name for p in out.iterdir() if ".curate-tmp-" in p.name]  # what a real kill leaves
    # the rerun and the checks through cli.main here: the real command line is test_real_command_line's
    assert main(["merge", str(tokenized / "out"), "--output", str(out / "all")]) == 0
    capsys.readouterr()  # the merge's own lines: what follows is verify's
    assert not [p for p in out.rglob("*") if ".curate-tmp-" in p.name]
    assert main(["verify", str(out / "all")]) == 0 and "OK" in capsys.readouterr().out
    assert main(["verify", str(out)]) == 0 and "OK" in capsys.readouterr().out


@pytest.mark.parametrize("stage", ["clean", "tokenize"])
def test_a_half_written_output_is_called_unfinished_once(tmp_path, capsys, stage):
    """Issue 31, point 6: verify said both "missing manifest" and "written by an older curate?" of a
    folder whose run was killed, though its _manifest.json (status running) was there."""
    import json

    from curate.app.cli import main
    from curate.stages.output import Output
    from tests.conftest import run_stage, write_jsonl

    write_jsonl(tmp_path / "in" / "a.jsonl", [{"id": f"a{k}", "text": f"alpha {k} " * 20} for k in range(4)])
    out = tmp_path / "out"
    settings = {"tokenizer": "tiktoken:cl100k_base"} if stage == "tokenize" else {}
    run_stage(stage, settings, [str(tmp_path / "in" / "a.jsonl")], out)
    Output.at(out).begin(json.loads((out / "_manifest.json").read_text())["owner"])  # a rerun killed right after
    capsys.readouterr()
    assert main(["verify", str(out)]) == 1
    err = capsys.readouterr().err
    assert "did not finish" in err
    assert "older curate" not in err and "missing manifest" not in err
