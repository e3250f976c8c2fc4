"""``curate reproduce``: reruns from the manifests give the recorded bytes, and a change says where.

Edge cases: every stage of a small job identical (per-partition and whole-stage reruns), a library
whose behaviour changed (a patched transform: the stage, the file and the versions that changed are
named), a filter chain edited since the run, an input that is gone, OUT left untouched.
"""

from __future__ import annotations

import json

import pytest

from curate.app.cli import main
from tests.conftest import write_jsonl

WORDS = "the river bends near the old mill where children play every summer afternoon".split()


@pytest.fixture(scope="module")
def _built(tmp_path_factory):
    """The job run once for the module, in its own folder, and a pristine copy of that folder."""
    import shutil

    import dask

    home = tmp_path_factory.mktemp("reproduce") / "job"
    docs = [{"id": f"d{i}", "text": " ".join(WORDS[i % 7:] + WORDS[:i % 7]) + f" {i}"} for i in range(12)]
    docs += [{"id": "dup", "text": docs[0]["text"]}, {"id": "short", "text": "too short"}]
    write_jsonl(home / "in" / "a.jsonl", docs[:7])
    write_jsonl(home / "in" / "b.jsonl", docs[7:])
    (home / "chain.yaml").write_text("filters:\n  - {filter: word_count, min: 5}\n")
    (home / "job.yaml").write_text(
        f"name: rep\ninput: {home / 'in' / '*.jsonl'}\nstages:\n  - clean: {{}}\n"
        f"  - filter: {{config: {home / 'chain.yaml'}}}\n  - exact_dedup: {{}}\n"
        "  - tokenize: {tokenizer: 'tiktoken:cl100k_base'}\n")
    with dask.config.set(scheduler="synchronous"):  # as the tests' own in-process runs
        assert main(["run", str(home / "job.yaml"), "--output", str(home / "out"), "--cluster", "threads"]) == 0
    pristine = home.with_name("pristine")
    shutil.copytree(home, pristine, symlinks=True)
    return home, pristine


@pytest.fixture
def job(_built):
    """The job's folder as the run left it, for each test to change as it likes: the module's run
    copied back in place (the same absolute paths its manifests record: input, chain, output)."""
    import shutil

    home, pristine = _built
    shutil.rmtree(home)
    shutil.copytree(pristine, home, symlinks=True)
    return home


def files_of(folder):
    return {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_job_reproduces_exactly(job, capsys):
    capsys.readouterr()
    before = files_of(job / "out")
    assert main(["reproduce", str(job / "out"), "--sample", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out[:4]] == ["01-clean", "02-filter", "03-exact_dedup", "04-tokenize"]
    assert all(line.endswith("identical") for line in out[:4])
    assert "01-clean  clean  partitions" in out[0] and "04-tokenize  tokenize  whole stage" in out[3]
    assert out[-1].endswith("every compared file is identical")
    assert files_of(job / "out") == before  # only read


def test_a_changed_library_is_named(job, capsys, monkeypatch):
    from curate.stages import clean

    manifest_path = job / "out" / "01-clean" / "_manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["versions"]["ftfy"] = "0.0.1"  # as if the run had used another ftfy
    manifest_path.write_text(json.dumps(manifest))
    real = clean.CleanStage.transform
    monkeypatch.setattr(clean.CleanStage, "transform",
                        lambda self, df, s: real(self, df, s).assign(text=lambda d: d["text"] + "!"))
    capsys.readouterr()
    assert main(["reproduce", str(job / "out" / "01-clean"), "--sample", "0"]) == 1
    out = capsys.readouterr().out
    assert "01-clean  clean  partitions 0, 1 of 2: 2 file(s) compared, DIFFERS" in out
    assert "part-00000.parquet: recorded " in out and "part-00001.parquet: recorded " in out
    assert "versions changed since the run: ftfy 0.0.1 -> " in out


def test_an_edited_chain_and_a_gone_input(job, capsys):
    (job / "chain.yaml").write_text("filters:\n  - {filter: word_count, min: 6}\n")
    capsys.readouterr()
    assert main(["reproduce", str(job / "out" / "02-filter")]) == 1
    assert "settings: chain differs from the run's" in capsys.readouterr().out
    for f in (job / "in").iterdir():
        f.unlink()
    assert main(["reproduce", str(job / "out" / "01-clean")]) == 1
    assert f"input gone: {job / 'in' / '*.jsonl'}" in capsys.readouterr().out


def test_the_scratch_is_removed_through_its_outputs_and_a_users_file_stays(job, tmp_path, capsys):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "mine.txt").write_text("the user's own\n")
    assert main(["reproduce", str(job / "out"), "--scratch", str(scratch)]) == 0
    assert sorted(p.name for p in scratch.iterdir()) == ["mine.txt"]  # every rerun's files gone, nothing else


# --------------------------------------------------------------------------- manifests are data (issue 29, point 2)

EVIL = "import pathlib\npathlib.Path({marker!r}).write_text('imported')\nclass Stage:\n    pass\n"
MINE = """
from curate import MapStage
from dataclasses import dataclass


@dataclass(frozen=True)
class Settings:
    suffix: str = "!"


class Shout(MapStage):
    name = "shout"
    Settings = Settings

    def transform(self, df, settings):
        return df.assign(text=df["text"] + settings.suffix)
"""


def _set_stage(folder, stage):
    path = folder / "_manifest.json"
    manifest = json.loads(path.read_text())
    manifest["stage"] = stage
    path.write_text(json.dumps(manifest))


@pytest.mark.parametrize("target", ["this:Anything", "evil:Stage", "evil"])
def test_reproduce_never_imports_code_a_manifest_names(job, tmp_path, target):
    import subprocess
    import sys

    marker = tmp_path / "imported.txt"
    (job / "out" / "evil.py").write_text(EVIL.format(marker=str(marker)))
    _set_stage(job / "out" / "01-clean", target)
    # python -m curate puts the working directory on sys.path: evil.py there would be importable
    proc = subprocess.run([sys.executable, "-m", "curate", "reproduce", "out", "--sample", "1"], cwd=job,
                          capture_output=True, text=True, env={**__import__("os").environ,
                                                               "PYTHONPATH": str(__import__("tests.conftest").conftest.ROOT)})
    assert proc.returncode == 2, proc.stderr
    assert f"stage {target!r} is not a registered stage" in proc.stderr
    assert "01-clean/_manifest.json" in proc.stderr
    assert "Beautiful is better than ugly" not in proc.stdout + proc.stderr  # the standard library's `this`
    assert not marker.exists()


def test_a_users_own_stage_reruns_when_the_user_names_it(tmp_path, capsys, monkeypatch):
    (tmp_path / "mine.py").write_text(MINE)
    monkeypatch.syspath_prepend(str(tmp_path))
    write_jsonl(tmp_path / "in" / "a.jsonl", [{"id": f"d{i}", "text": f"words {i}"} for i in range(4)])
    write_jsonl(tmp_path / "in" / "b.jsonl", [{"id": f"e{i}", "text": f"more {i}"} for i in range(4)])
    (tmp_path / "job.yaml").write_text(f"name: mine\ninput: {tmp_path / 'in' / '*.jsonl'}\nstages:\n"
                                       "  - 'mine:Shout': {}\n")
    assert main(["run", str(tmp_path / "job.yaml"), "--output", str(tmp_path / "out"), "--cluster", "threads"]) == 0
    capsys.readouterr()
    assert main(["reproduce", str(tmp_path / "out")]) == 2
    assert "--stage-class module:Class" in capsys.readouterr().err
    assert main(["reproduce", str(tmp_path / "out"), "--stage-class", "mine:Shout"]) == 0
    assert "identical" in capsys.readouterr().out


def test_an_erased_output_names_the_erasure(job, capsys):
    """Issue 29, point 10: reproduce said "differences found" without naming the recorded erasure."""
    (job / "ids.txt").write_text("d3\n")
    assert main(["erase", str(job / "out"), "--ids", str(job / "ids.txt")]) == 0
    capsys.readouterr()
    assert main(["reproduce", str(job / "out"), "--sample", "0"]) == 1
    out = capsys.readouterr().out
    assert "erased since the run: 1 document(s) by ids at" in out and "expected to differ" in out


@pytest.mark.slow
def test_a_fuzzy_job_run_on_a_local_cluster_reproduces_in_process(tmp_path):
    """Issue 43, point 5: fuzzy dedup's _work files of a cluster run differed from an in-process rerun
    in their pandas metadata only (``string`` on a worker, pandas' ``str`` here)."""
    import subprocess

    from tests.conftest import CURATE, ROOT

    base = " ".join(f"{w}{k}" for k in range(8) for w in WORDS)  # 104 words
    docs = [{"id": f"d{i}", "text": base + f" and then {i}" if i % 3 else f"page {i} " + " ".join(WORDS[i % 7:])}
            for i in range(30)]  # 20 near copies of one page, 10 others
    write_jsonl(tmp_path / "in" / "a.jsonl", docs[:15])
    write_jsonl(tmp_path / "in" / "b.jsonl", docs[15:])
    (tmp_path / "job.yaml").write_text(
        f"name: fz\ninput: {tmp_path / 'in' / '*.jsonl'}\nstages:\n  - clean: {{}}\n  - fuzzy_dedup: {{}}\n")
    run = subprocess.run([*CURATE, "run", str(tmp_path / "job.yaml"), "--output", str(tmp_path / "out"),
                          "--cluster", "local", "--workers", "2"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert main(["reproduce", str(tmp_path / "out"), "--sample", "0"]) == 0
