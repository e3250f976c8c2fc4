"""SIGTERM and Ctrl-C at every moment (issue 40, point 6; issue 43, point 2).

SIGTERM (what SLURM sends at a time limit) used to end curate with signal 15, no line of its own, a
stale ``_LOCK`` and a "leaked semaphore objects" warning; a Ctrl-C during the local cluster's start
was dropped (the job ran to the end, exit 0); one raised inside distributed's garbage-collection
callback was swallowed. Now both stop the run: one line, every process gone, no lock left, a rerun
that resumes.
"""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import time

import pytest

from curate.app import signals
from tests.conftest import CURATE, ROOT, curate_here


def _start(tmp_path, mode="local"):
    return subprocess.Popen([*CURATE, "run", "jobs/sample.yaml", "--output", str(tmp_path / "out"), "--cluster", mode,
                             "--workers", "2"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _finish(proc, err, children):
    import psutil

    _out, tail = proc.communicate(timeout=90)
    text = "".join(err) + (tail or "")
    _gone, alive = psutil.wait_procs(children, timeout=15)
    assert not alive, [c.pid for c in alive]
    return text


def _no_lock(out):
    return [str(p) for p in out.rglob("_LOCK*")]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["local", "threads"])
def test_sigterm_to_the_whole_step_is_one_line_exit_143_no_lock_and_a_rerun_resumes(tmp_path, mode):
    import psutil

    proc = _start(tmp_path, mode)
    err = []
    for line in proc.stderr:  # until the second stage starts: the workers are busy
        err.append(line)
        if "stage clean:" in line:
            break
    children = psutil.Process(proc.pid).children(recursive=True)
    os.killpg(proc.pid, signal.SIGTERM)  # as slurmstepd signals every process of the step
    text = _finish(proc, err, children)
    assert proc.returncode == 143, text[-3000:]
    assert text.rstrip().splitlines()[-1] == "curate: terminated (SIGTERM)"
    assert "Traceback" not in text and "leaked semaphore" not in text, text[-3000:]
    assert _no_lock(tmp_path / "out") == []
    # the rerun through cli.main in this process: the signal's effects are the killed process's, checked above
    rerun = curate_here("run", "jobs/sample.yaml", "--output", tmp_path / "out", "--cluster", "threads", cwd=ROOT)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "skip" in rerun.stdout + rerun.stderr  # the first stage finished before the signal: resumed


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_the_local_cluster_starts_stops_the_run(tmp_path, sig):
    import psutil

    proc = _start(tmp_path)
    parent = psutil.Process(proc.pid)
    deadline = time.monotonic() + 60
    def spawning():  # the first worker process of the local cluster is starting
        try:
            return any("spawn_main" in " ".join(c.cmdline()) for c in parent.children())
        except psutil.Error:
            return False
    while not spawning() and time.monotonic() < deadline:
        time.sleep(0.02)
    children = parent.children(recursive=True)
    assert children, "no worker process started"
    os.killpg(proc.pid, sig)
    text = _finish(proc, [], children + [c for c in parent.children(recursive=True) if c not in children])
    assert proc.returncode == (130 if sig == signal.SIGINT else 143), text[-3000:]
    assert text.rstrip().splitlines()[-1] in ("curate: interrupted", "curate: terminated (SIGTERM)")
    assert "Traceback" not in text, text[-3000:]
    assert not (tmp_path / "out" / "01-extract_warc" / "_SUCCESS").exists()  # stopped, not run to the end
    assert _no_lock(tmp_path / "out") == []


def test_an_interrupt_a_gc_callback_swallowed_is_raised_again():
    def callback(phase, info):
        if phase == "start":
            raise KeyboardInterrupt  # Python prints "Exception ignored in gc callback" and goes on

    with pytest.raises(KeyboardInterrupt):
        with signals.handled():
            gc.callbacks.append(callback)
            try:
                gc.collect()
            finally:
                gc.callbacks.remove(callback)
            for _ in range(200):  # the interrupt comes back at the next bytecode
                time.sleep(0.005)


def test_sigterm_in_process_raises_terminated_and_handlers_are_restored():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(signals.Terminated) as e:
        with signals.handled():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)
    assert signals.exit_code(e.value) == 143 and signals.message(e.value) == "curate: terminated (SIGTERM)"
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_stop_while_the_report_is_written_says_every_stage_finished(tmp_path, monkeypatch, capsys):
    """Issue 47, point 10: a Ctrl-C once every stage finished said "interrupted" as if the run had not."""
    from curate.app import report_html
    from curate.app.cli import main
    from tests.conftest import write_jsonl

    write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "text": "one document"}, {"id": "b", "text": "another one"}])
    job = tmp_path / "job.yaml"
    job.write_text(f"input: {tmp_path / 'in.jsonl'}\nstages:\n  - clean: {{}}\n")

    def stopped(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(report_html, "write_run_report", stopped)
    assert main(["run", str(job), "--output", str(tmp_path / "out"), "--cluster", "threads"]) == 130
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("curate: interrupted while the run's reports were written; every stage had finished"), err
    assert (tmp_path / "out" / "01-clean" / "_SUCCESS").exists()


def test_at_a_signal_the_libraries_loggers_with_their_own_levels_are_quieted_too():
    import logging

    import distributed  # noqa: F401  (its logging config gives tornado.application and others a level)

    from curate.app import signals

    names = ("tornado.application", "distributed.client", "distributed.gc", "tornado", "asyncio")
    before = {n: logging.getLogger(n).level for n in signals.QUIETED}
    try:
        signals._quiet_libraries()
        assert all(logging.getLogger(n).level == logging.CRITICAL for n in names)
    finally:
        for n, level in before.items():
            logging.getLogger(n).setLevel(level)
