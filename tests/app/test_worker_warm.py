"""A worker imports the job's modules as it starts, before its first task (curate.app.worker_warm)."""

import os
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT


def test_job_imports_are_the_common_modules_then_each_stages_own_once():
    from curate.app.worker_warm import COMMON, job_imports
    from curate.stages import registry

    names = job_imports(registry.get(n) for n in ("clean", "fuzzy_dedup", "clean", "tokenize"))
    fuzzy = registry.get("fuzzy_dedup")
    assert names[:len(COMMON)] == COMMON
    assert names.count("curate.stages.clean") == 1  # a stage twice: its module once
    assert {fuzzy.__module__, *fuzzy.worker_imports, "tiktoken"} <= set(names)
    assert len(names) == len(set(names))


def test_dask_dataframe_only_for_jobs_whose_tasks_run_it():
    """Its import (about 0.9 CPU-s) is paid by every worker that preloads it: only a job with a stage
    that shuffles or reads through a DataFrame collection names it."""
    from curate.app.worker_warm import DATAFRAME, job_imports, plain_tasks
    from curate.stages import registry

    plain = ["extract_warc", "extract_wikipedia", "clean", "filter", "normalize", "split_documents", "tokenize"]
    assert all(plain_tasks(registry.get(n)) for n in plain)
    assert DATAFRAME not in job_imports(registry.get(n) for n in plain)
    for other in ("exact_dedup", "fuzzy_dedup", "shuffle", "blend", "tag", "redact", "join_documents",
                  "download_urls"):
        assert not plain_tasks(registry.get(other)), other
        names = job_imports(registry.get(n) for n in ("clean", other))
        assert names.index(DATAFRAME) < names.index("curate.stages.clean")  # before any stage's own


@pytest.mark.slow
def test_a_job_of_plain_stages_imports_no_dask_dataframe_on_its_worker(tmp_path):
    """What :data:`NO_DATAFRAME` and :func:`plain_tasks` claim, on a worker that imports only what its
    tasks unpickle and run (a local cluster preloads nothing): extraction, per-document stages,
    tokenize and the run's report."""
    from curate.app import runner
    from curate.app.cluster import connect
    from curate.app.cluster_settings import ClusterSettings

    subprocess.run([sys.executable, os.path.join(ROOT, "jobs", "data", "make_bench_input.py"), "--docs", "4",
                    "--files", "1", "--output", str(tmp_path / "in")], check=True, capture_output=True, cwd=ROOT)
    job = tmp_path / "job.yaml"
    job.write_text(f"name: plain\ninput: {tmp_path / 'in'}/*.warc.gz\nstages:\n  - extract_warc: {{}}\n"
                   "  - clean: {}\n  - filter: {config: " + os.path.join(ROOT, "jobs", "filters", "heuristic_en.yaml")
                   + "}\n  - tokenize: {tokenizer: 'tiktoken:cl100k_base'}\n")

    def loaded():
        return sorted(m for m in ("dask.dataframe", "dask.array", "curate.stages.tokenize.writer") if m in sys.modules)

    with connect(ClusterSettings(mode="local", workers=1, memory_limit="2GiB")) as client:
        outcomes = runner.execute_job(runner.load_job(str(job)), str(tmp_path / "out"), client=client)
        assert len(outcomes) == 4
        assert list(client.run(loaded).values()) == [["curate.stages.tokenize.writer"]]  # the tasks did run here


def test_every_named_module_exists():
    """A misspelt name would only be logged at debug level on the workers: check them all here."""
    import importlib.util

    from curate.app.worker_warm import COMMON
    from curate.stages import registry

    stages = [registry.get(name) for name in registry.STAGES]
    for entry in (*COMMON, *(m for cls in stages for m in cls.worker_imports)):
        name, _, function = entry.partition(":")
        assert importlib.util.find_spec(name) is not None, entry
        assert not function or callable(getattr(importlib.import_module(name), function)), entry


def test_a_named_function_is_called_by_a_worker_and_not_by_the_client(monkeypatch):
    """``module:function`` entries: the worker's preload calls them; the client (under MPI it imports
    the job's modules too) only imports."""
    import types

    from curate.app.worker_warm import import_all

    calls = []
    module = types.ModuleType("curate_warm_probe")
    module.warm = lambda: calls.append(1)
    monkeypatch.setitem(sys.modules, "curate_warm_probe", module)
    import_all(("json", "curate_warm_probe:warm", "curate_warm_probe:missing", "no_such_module_here:warm"))
    assert calls == [1]  # the missing function and module are only logged: the task would raise them
    import_all(("curate_warm_probe:warm",), call=False)
    assert calls == [1]


def test_numbas_warm_up_leaves_a_cached_kernels_first_call_cheap():
    """Fuzzy dedup's worker entry: after ``hashing.warm`` a fresh process's first signature costs little
    CPU (numba's registries were its 0.45 CPU-s; a cached kernel alone loads in about 0.02)."""
    code = ("import resource, pandas as pd\n"
            "from curate.stages.dedup import hashing\n"
            "from curate.stages.dedup.fuzzy import signatures\n"
            "from curate.stages.dedup.fuzzy.settings import FuzzyDedupSettings\n"
            "df = pd.DataFrame({'id': ['a'], 'text': ['the quick brown fox jumps over the lazy dog']})\n"
            "signatures.signatures_and_sets(df, 0, FuzzyDedupSettings())\n"  # compiles into the cache if cold
            "print('ok')\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True, timeout=300, env=env)
    timed = code.replace("signatures.signatures_and_sets", "hashing.warm()\n"
                         "cpu = lambda: sum(resource.getrusage(resource.RUSAGE_SELF)[:2])\n"
                         "t = cpu()\nsignatures.signatures_and_sets").replace(
        "print('ok')", "print(cpu() - t)")
    out = subprocess.run([sys.executable, "-c", timed], cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr
    assert float(out.stdout) < 0.15, out.stdout


def test_a_users_preload_is_kept_and_ours_comes_after_it():
    code = ("import dask; from curate.app import cluster; "
            "dask.config.set({'distributed.worker.preload': ['mine']}); "
            "cluster.warm_workers(('pandas',)); cluster.warm_workers(('json',)); "
            "print(dask.config.get('distributed.worker.preload'), dask.config.get('curate.worker-imports'))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DASK_")}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**env, "PYTHONPATH": str(ROOT)})
    assert out.stdout.split("] [") == ["['mine', 'curate.app.worker_warm'", "'json']\n"], out.stderr


def test_a_local_worker_has_the_modules_before_any_task():
    """The worker imports them before it joins: the module is there as soon as the cluster is up,
    although no task of ours ran (client.run is not a task). ``colorsys`` stands in: nothing else in
    a worker imports it."""
    from curate.app.cluster import connect
    from curate.app.cluster_settings import ClusterSettings

    def imported():
        return "colorsys" in sys.modules

    with connect(ClusterSettings(mode="local", workers=1, memory_limit="1GiB",
                                 worker_imports=("colorsys", "no_such_module_here"))) as client:
        assert all(client.run(imported).values())
        assert client.submit(lambda: 1 + 1).result() == 2  # a module that does not exist fails nothing


def _probe(folder):
    """In a worker: an exit handler that leaves a file, and an object that leaves another when the
    interpreter's teardown frees the modules (a module's global, as pandas' and numba's are)."""
    import atexit
    import sys
    import types

    class Freed:
        def __del__(self):
            open(f"{folder}/teardown", "w").close()

    atexit.register(lambda: open(f"{folder}/exit-handler", "w").close())
    module = types.ModuleType("curate_teardown_probe")
    module.freed = Freed()
    sys.modules[module.__name__] = module
    return getattr(sys.exit, "curate_exit", False)


@pytest.mark.slow
def test_a_local_worker_ends_with_its_exit_handlers_and_without_the_teardown(tmp_path):
    """The teardown freed every module's objects (about 0.6 CPU-s of a worker); the exit handlers
    (logging's flush, temporary folders) still run, and a worker that did not close (a task's own
    sys.exit, in a worker thread) is not ended by it."""
    from curate.app.cluster import connect
    from curate.app.cluster_settings import ClusterSettings

    def task_exit():
        import sys

        try:
            sys.exit(7)
        except SystemExit as e:  # raised as before: only the main thread's last call is ours
            return e.code

    with connect(ClusterSettings(mode="local", workers=1, memory_limit="1GiB")) as client:
        assert list(client.run(_probe, str(tmp_path)).values()) == [True]
        assert client.submit(task_exit, pure=False).result() == 7
    deadline = time.time() + 30
    while not (tmp_path / "exit-handler").exists():  # the worker process ends a little after the cluster
        assert time.time() < deadline, "the worker's exit handlers did not run"
        time.sleep(0.1)
    time.sleep(0.5)
    assert not (tmp_path / "teardown").exists()


def test_an_mpi_rank_or_the_client_keeps_its_sys_exit():
    """Not a multiprocessing child: the preload leaves sys.exit alone (an MPI rank ends in cluster_mpi)."""
    from curate.app import worker_warm

    before = sys.exit
    worker_warm.end_without_teardown()
    assert sys.exit is before
