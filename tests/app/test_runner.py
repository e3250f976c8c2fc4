"""Jobs: stage folders, resume by fingerprint, kill and rerun."""

import os
import signal
import subprocess
import time

import pytest

from curate.app import runner
from tests.conftest import CURATE, ROOT, read_output, write_jsonl

JOB = """
input: {input}
io: {{on_error: skip}}
stages:
  - normalize: {{}}
  - normalize: {{drop_empty: false}}
"""


def make_job(tmp_path, n=50, files=2):
    for f in range(files):
        write_jsonl(tmp_path / "data" / f"f{f}.jsonl",
                    [{"id": f"{f}-{i}", "text": f"doc   {f} {i}\n\n\n\nend"} for i in range(n)])
    job = tmp_path / "job.yaml"
    job.write_text(JOB.format(input=tmp_path / "data" / "*.jsonl"))
    return job


def test_job_writes_one_folder_per_stage_and_resumes(tmp_path):
    job = runner.load_job(str(make_job(tmp_path)))
    out = str(tmp_path / "out")
    first = runner.run_job(job, out)
    assert [os.path.basename(o.output) for o in first] == ["01-normalize", "02-normalize"]
    assert not any(o.skipped for o in first)
    assert first[-1].manifest["counts"] == {"in": 100, "out": 100, "dropped": {}}
    assert first[-1].manifest["partitions"] == 2
    again = runner.run_job(job, out)
    assert all(o.skipped for o in again)
    table = runner.summary_table(again)
    assert "01-normalize" in table and "skipped" in table and "docs/s" in table


def test_changed_settings_rerun_that_stage_and_the_ones_after(tmp_path):
    path = make_job(tmp_path)
    out = str(tmp_path / "out")
    runner.run_job(runner.load_job(str(path)), out)
    path.write_text(path.read_text().replace("drop_empty: false", "drop_empty: true"))
    outcomes = runner.run_job(runner.load_job(str(path)), out)
    assert [o.skipped for o in outcomes] == [True, False]


def test_unfinished_stage_is_rerun(tmp_path):
    job = runner.load_job(str(make_job(tmp_path)))
    out = tmp_path / "out"
    runner.run_job(job, str(out))
    os.remove(out / "02-normalize" / "_SUCCESS")
    outcomes = runner.run_job(job, str(out))
    assert [o.skipped for o in outcomes] == [True, False]


@pytest.mark.slow
def test_kill_after_stage_one_then_rerun_equals_uninterrupted_run(tmp_path):
    job = make_job(tmp_path, n=5000, files=4)  # four partitions: stage 2 still runs when stage 1 is done
    killed, clean = tmp_path / "killed", tmp_path / "clean"
    cmd = [*CURATE, "run", str(job), "--workers", "2"]
    proc = subprocess.Popen([*cmd, "--output", str(killed)], cwd=ROOT, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not (killed / "01-normalize" / "_SUCCESS").exists():
        assert proc.poll() is None and time.time() < deadline, "stage 1 never finished"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    rerun = subprocess.run([*cmd, "--output", str(killed)], cwd=ROOT, capture_output=True, text=True, check=True)
    assert "01-normalize  skipped" in rerun.stdout
    # the uninterrupted run in this process (the same bytes as a cluster's): only the killed one needs a cluster
    from curate.app import cli

    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(ROOT)
        assert cli.main(["--log-level", "WARNING", "run", str(job), "--output", str(clean), "--cluster", "threads"]) == 0
    for stage in ("01-normalize", "02-normalize"):
        a, b = sorted((killed / stage).glob("part-*")), sorted((clean / stage).glob("part-*"))
        assert [p.name for p in a] == [p.name for p in b]
        assert all(x.read_bytes() == y.read_bytes() for x, y in zip(a, b))
    assert len(read_output(killed / "02-normalize")) == 20000
    assert not list(killed.rglob(".*.tmp-*"))


def test_a_stages_time_covers_all_its_work_everywhere(tmp_path, capsys):
    """Issue 31, point 2: fuzzy_dedup recorded 0.03 s (its final write) while its steps took 6 s."""
    import json

    from curate.app.cli import main
    from tests.conftest import write_jsonl

    words = "river valley stone bread oven flour library shelf loan quiet garden rain seed harvest".split()
    docs = [{"id": f"d{i}", "text": " ".join(words[(i + k) % len(words)] for k in range(60))} for i in range(40)]
    write_jsonl(tmp_path / "in" / "a.jsonl", docs[:20])
    write_jsonl(tmp_path / "in" / "b.jsonl", docs[20:])
    (tmp_path / "job.yaml").write_text(f"name: t\ninput: '{tmp_path / 'in' / '*.jsonl'}'\nstages:\n"
                                       "  - fuzzy_dedup: {}\n")
    assert main(["run", str(tmp_path / "job.yaml"), "--output", str(tmp_path / "out"), "--cluster", "threads"]) == 0
    m = json.loads((tmp_path / "out" / "01-fuzzy_dedup" / "_manifest.json").read_text())
    steps = sum(m["steps"].values()) if isinstance(next(iter(m["steps"].values())), (int, float)) else \
        sum(s["seconds"] for s in m["steps"].values())
    assert m["timings"]["seconds"] >= steps
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("01-fuzzy_dedup"))
    assert f"{m['timings']['seconds']:.1f}" in row.split()


def test_later_stages_prepare_on_the_head_in_a_thread_while_the_first_runs(tmp_path, monkeypatch):
    """Tokenize's plan loaded cl100k and hashed its ranks on the head (4.5 s of a 30 s stage on a quarter
    core): the runner now asks every later stage to prepare in a thread as the job starts. The first
    stage is not asked (nothing runs before it); a failing preparation is the stage's own to report."""
    import threading

    from curate.stages import registry

    calls = []
    cls = registry.get("normalize")

    def prepare(self, settings):
        calls.append((threading.current_thread().name, settings.drop_empty))
        raise RuntimeError("the stage says this itself when it runs")

    monkeypatch.setattr(cls, "prepare_head", prepare, raising=False)
    outcomes = runner.run_job(runner.load_job(str(make_job(tmp_path))), str(tmp_path / "out"))
    assert not any(o.skipped for o in outcomes)
    deadline = time.time() + 10
    while not calls and time.time() < deadline:
        time.sleep(0.05)
    assert calls == [("curate-prepare-stages", False)]


def test_tokenize_prepared_on_the_head_is_the_stages_own_tokenizer():
    from curate.stages.tokenize.load import load_tokenizer
    from curate.stages.tokenize.writer import TokenizeSettings, TokenizeStage

    TokenizeStage().prepare_head(TokenizeSettings(tokenizer="tiktoken:cl100k_base"))
    tok = load_tokenizer("tiktoken:cl100k_base")
    assert tok._description is not None and tok.describe()["vocab_size"] == tok.vocab_size
