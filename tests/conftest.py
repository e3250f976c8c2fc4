"""Shared test helpers.

Most tests call stages in-process with Dask's synchronous scheduler (``run_stage``); the CLI and
cluster tests start real clusters (``curate`` in a subprocess, ``mpirun``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import dask
import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
CURATE = [sys.executable, "-m", "curate"]


def pytest_configure(config):
    """Everything the suite and its subprocesses put in the temporary folder (Dask's scratch space,
    Chromium's singleton folders, tempfile users) goes into one folder of the session's, removed at
    its end; a passing test's tmp_path is removed too (pyproject: tmp_path_retention_policy)."""
    import tempfile

    if getattr(config, "workerinput", None) is None and "CURATE_TEST_TMPDIR" not in os.environ:
        # pytest's own folders (pytest-of-USER, where a failed test's tmp_path stays) where they were
        os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", tempfile.gettempdir())
        config._curate_tmp = tempfile.mkdtemp(prefix="curate-tests-")
        os.environ["CURATE_TEST_TMPDIR"] = os.environ["TMPDIR"] = config._curate_tmp
        tempfile.tempdir = None  # gettempdir() reads TMPDIR again


def pytest_unconfigure(config):
    import shutil

    folder = getattr(config, "_curate_tmp", None)
    if folder:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(autouse=True)
def _frozen_heap():
    """What is alive when a test starts (the modules imported so far, session and module fixtures)
    goes into the permanent generation, after a collection: a full collection during the test walks
    only the test's own objects. ``cli.main`` collects at its end (app/cli.py), and ``curate_here`` and
    the in-process runs call it hundreds of times: each walked the whole heap of the suite's process
    (0.25 s and more). Frozen objects are still freed when their last reference goes; a test's own
    reference cycles are collected as before."""
    import gc

    gc.collect()
    gc.freeze()
    yield


@pytest.fixture(autouse=True)
def _sync_scheduler():
    # in-process tests run on the synchronous scheduler: deterministic and no cluster start-up cost
    with dask.config.set(scheduler="synchronous"):
        yield


@pytest.fixture(scope="session")
def sample_job(tmp_path_factory) -> Path:
    """jobs/sample.yaml run once for the session, in this process (``--cluster threads``), as the
    reference several tests compare with or start from. Read it; copy it (``copy_job``) to change it."""
    from curate.app import cli

    out = tmp_path_factory.mktemp("sample-job") / "sample"
    with pytest.MonkeyPatch.context() as mp, dask.config.set(scheduler="synchronous"):
        mp.chdir(ROOT)
        code = cli.main(["--log-level", "WARNING", "run", "jobs/sample.yaml", "--output", str(out),
                         "--cluster", "threads"])
    assert code == 0
    return out


def copy_job(src, dst) -> Path:
    """Copy a job's output folder (its stages, their side folders and _reports) to change it."""
    import shutil

    return Path(shutil.copytree(src, dst, symlinks=True))


def write_jsonl(path, records, raw_lines=()):
    """Write records (dicts) and then raw lines (str/bytes, written as given) to a JSONL file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False).encode() + b"\n")
        for line in raw_lines:
            f.write((line.encode() if isinstance(line, str) else line) + b"\n")
    return path


def run_stage(name, settings=None, inputs=(), output=None, **io):
    """Run a registered stage in-process (synchronous scheduler); return its manifest."""
    from curate.app.runner import run_stage as _run
    from curate.stages import registry
    from curate.stages.stage import IOSettings, settings_from_mapping

    cls = registry.get(name)
    if settings is None or isinstance(settings, dict):
        settings = settings_from_mapping(cls.Settings, settings or {}, name)
    inputs = (inputs,) if isinstance(inputs, (str, Path)) else tuple(inputs)
    outcome = _run(name, settings, tuple(map(str, inputs)), str(output), IOSettings(**io))
    return outcome.manifest


def side(folder, *parts) -> Path:
    """A path in the side folder of a stage output (``side(out, "_rejects")``): the sibling ``OUT.side/``
    that holds rejects, dedup audits and intermediates and the journal, out of the folder readers read."""
    from curate.stages.output import side_of

    return Path(side_of(str(folder))).joinpath(*parts)


def copy_output(src, dst) -> Path:
    """Copy an output with its side folder (a copy without it misses the files its manifest lists)."""
    import shutil

    if side(src).is_dir():
        shutil.copytree(side(src), side(dst))
    return Path(shutil.copytree(src, dst))


def read_output(path):
    """All kept rows of a stage output directory as one pandas frame (partition order)."""
    import pandas as pd

    path = Path(path)
    parts = sorted(path.glob("part-*"))
    frames = [pd.read_parquet(p) if p.suffix == ".parquet" else pd.read_json(p, lines=True, dtype=False)
              for p in parts]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def curate(*args, check=True, timeout=600, env=None, **kw):
    """Run the CLI in a subprocess from the repository root."""
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.run([*CURATE, *map(str, args)], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env=full_env, **kw)
    if check and proc.returncode != 0:
        raise AssertionError(f"curate {' '.join(map(str, args))} exited {proc.returncode}\n{proc.stderr[-4000:]}")
    return proc


def curate_here(*args, cwd=None) -> subprocess.CompletedProcess:
    """``curate ARGS`` through ``cli.main`` in this process (stdout and stderr captured): a refusal or a
    read-only command without the start of a process. Tests that check a command this way keep a real
    process (``curate``) for at least one of its cases: what only a process shows (its exit, stray
    lines at import) stays checked there."""
    import contextlib
    import io

    from curate.app import cli

    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        if cwd is not None:
            mp.chdir(cwd)
        code = cli.main(list(map(str, args)))
    return subprocess.CompletedProcess(["curate", *map(str, args)], code, out.getvalue(), err.getvalue())


@pytest.fixture
def s3_endpoint(monkeypatch):
    """moto's S3 server on 127.0.0.1 with test credentials in the environment; yields its URL."""
    from moto.server import ThreadedMotoServer

    for k, v in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                 "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(k, v)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()
