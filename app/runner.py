"""Running one stage, or a job (a list of stages): fingerprints, resume, summary, performance report.

Stage k of a job writes ``<output>/<kk>-<stage>/`` and reads stage k-1's output (the first stage
reads the job's ``input``). A stage whose output has ``_SUCCESS`` and the same settings fingerprint
is skipped, so re-running a job after a crash or kill resumes where it stopped. An output with
*pending* inputs (downloads that failed for now; its manifest's ``pending``) is complete but never
up to date: the rerun retries them. A stage reading such an output says so in a warning, and the
summary names the pending inputs.

What comes before running lives beside this module, one concern a module, and every name stays
importable from here, where the CLI, the API, bench.py and the tests import it: ``job`` (reading a
job file: :class:`Job`, :class:`StageSpec`, :func:`load_job`) and ``preflight`` (every refusal before
work, the job's plan, ``--dry-run``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import time
from dataclasses import dataclass

from curate.app import resources
from curate.app.errors import WorkerKilled
from curate.app.job import Job as Job, StageSpec as StageSpec, load_job as load_job
from curate.app.preflight import (
    check_columns_of as check_columns_of,
    check_inputs as check_inputs,
    check_output_path as check_output_path,
    dry_run as dry_run,
    job_owner,
    job_plan,
    preflight_job,
    preflight_stage,
    stage_dir as stage_dir,
    stage_io,
    stage_owner,
    unit_of,
)
from curate.stages import dataset, output as output_mod, registry
from curate.stages.stage import (
    IOSettings,
    StageContext,
    fingerprint,
    settings_files,
)

log = logging.getLogger("curate.runner")


@dataclass
class StageOutcome:
    name: str
    output: str
    manifest: dict
    skipped: bool
    seconds: float


def run_stage(name: str, settings, inputs, output: str, io: IOSettings, compute=None,
              force: bool = False, job: str | None = None, lock: bool = True) -> StageOutcome:
    """Run one stage unless its output is complete with the same fingerprint.

    The output is checked (see :func:`preflight_stage`) and locked for the run; a job holds one lock
    on its root for all its stages (``lock=False`` here).
    """
    cls = registry.get(name)
    inputs = tuple(inputs)
    preflight_stage(name, settings, inputs, output, io, job, check_locks=lock)
    unit = unit_of(name, settings)
    out = output_mod.Output.at(output, unit)
    with stage_lock(name, settings, output) if lock else contextlib.nullcontext():
        identity = dataset.input_identity(inputs, io.allow_incomplete) + dataset.input_identity(settings_files(settings))
        fp = fingerprint(name, settings, identity, io)
        previous = out.manifest()
        gone = out.missing(previous) if not force and out.complete() else []
        if gone:  # its own files, deleted by hand: computed again from scratch (the journal says done)
            log.warning("stage %s: %d file(s) its manifest lists are missing (%s): running it again", name,
                        len(gone), gone[0])
            force = True
        if not force and out.complete() and previous and previous.get("fingerprint") == fp:
            if not previous.get("pending"):
                log.info("stage %s: %s is up to date (fingerprint %s); skipped", name, output, fp)
                return StageOutcome(name, output, previous, True, 0.0)
            log.info("stage %s: %s has %d pending input(s) from an earlier run; retrying them", name, output,
                     previous["pending"])
        warn_pending_inputs(name, inputs)
        log.info("stage %s: %s -> %s", name, ", ".join(inputs), output)
        started = time.perf_counter()
        ctx = StageContext(input=inputs, output=output, io=io, fingerprint=fp, compute=compute, force=force,
                           owner=stage_owner(name, job), started=time.time(), slots=compute_slots(compute))
        try:
            manifest = cls().run(settings, ctx)
        except WorkerKilled as e:
            raise e.in_stage(name, inputs, io) from None
        # one time for the stage, the same in the terminal, the manifest and the report
        seconds = (manifest.get("timings") or {}).get("seconds")
        return StageOutcome(name, output, manifest, False,
                            seconds if seconds is not None else time.perf_counter() - started)


def warn_pending_inputs(name: str, inputs) -> None:
    """An input that is a stage output with pending inputs of its own is incomplete: say so."""
    if registry.get(name).reads_raw_files:
        return
    for spec in inputs:
        manifest = dataset.read_manifest(spec) if os.path.isdir(spec) or "://" in spec else None
        if manifest and manifest.get("pending"):
            log.warning("stage %s: its input %s has %d pending input(s) (failed for now, see its manifest); "
                        "this run reads the documents it has so far: rerun the stage that wrote it to "
                        "fetch them, and this one after it", name, spec, manifest["pending"])


def job_lock(job: Job, output: str) -> output_mod.Lock:
    return output_mod.Lock(output_mod.Output.at(output), f"curate run {job.source}")


def stage_lock(name: str, settings, output: str) -> output_mod.Lock:
    return output_mod.Lock(output_mod.Output.at(output, unit_of(name, settings)), f"curate {name}")


def run_job(job: Job, output: str, compute=None, force: bool = False, stop_after: int | None = None,
            lock: bool = True):
    """Run the job's stages in order (``lock=False``: the caller already holds :func:`job_lock`)."""
    preflight_job(job, output, stop_after, check_locks=lock)
    root = output_mod.Output.at(output)
    outcomes = []
    with job_lock(job, output) if lock else contextlib.nullcontext():
        started = time.time()
        root.begin(job_owner(job))
        plan = job_plan(job, output, stop_after)
        prepare_heads(plan[1:])
        live = getattr(compute, "tracker", None)  # the live dashboard page (app/live.py) and the progress line
        line = None
        if live is not None:
            live.job(os.path.basename(job.source), output, [(spec.name, os.path.basename(out))
                                                           for _k, spec, _i, out in plan])
            if getattr(compute, "show_progress", True):
                from curate.app.progress import ProgressLine

                line = ProgressLine(live).start()
        meter = resource_meter(compute, job, plan)
        before = meter.before() if meter else None
        try:
            for k, spec, inputs, out in plan:
                if live is not None:
                    live.stage_started(k - 1)
                outcomes.append(run_stage(spec.name, spec.settings, inputs, out, stage_io(job.io, inputs, plan),
                                          compute, force, job=job.name, lock=False))
                if meter is not None and not outcomes[-1].skipped:  # a skipped stage did no work: before holds
                    before = meter.record(output, os.path.basename(out), before, outcomes[-1].seconds,
                                          then=spec is not plan[-1][1])
                if live is not None:
                    live.stage_finished(k - 1, outcomes[-1].manifest, outcomes[-1].skipped, outcomes[-1].seconds)
        finally:
            if line is not None:
                line.close()
        root.finish({
            "job": job.name, "source": os.path.abspath(job.source) if os.path.exists(job.source) else job.source,
            "stages": [{"name": o.name, "output": os.path.basename(o.output), "skipped": o.skipped,
                        "fingerprint": o.manifest.get("fingerprint"), "counts": o.manifest.get("counts"),
                        **({"pending": o.manifest["pending"]} if o.manifest.get("pending") else {})}
                       for o in outcomes],
            "seconds": round(time.time() - started, 3),
        }, [])
    return outcomes


def prepare_heads(plan) -> None:
    """Each stage's :meth:`Stage.prepare_head` (tokenize loads its tokenizer), in one background thread,
    while the workers run the stages before: the head is idle then, and the stage's own plan, which is
    serial, finds the result cached."""
    import threading

    def prepare():
        for _k, spec, _inputs, _out in plan:
            try:
                registry.get(spec.name)().prepare_head(spec.settings)
            except Exception as e:  # not lost: the stage meets the same error when it runs, in its context
                log.debug("stage %s: preparing on the head failed (the stage will say why): %s", spec.name, e)

    if plan:
        threading.Thread(target=prepare, name="curate-prepare-stages", daemon=True).start()


def resource_meter(compute, job: Job, plan) -> resources.Meter | None:
    """What measures each stage's resources (:mod:`curate.app.resources`): the workers of the compute's
    client, this process when there is none; None for a compute that is not :func:`make_compute`'s
    (where its work runs is unknown). It knows the job's input bytes (what a plan scales from)."""
    if compute is not None and not hasattr(compute, "tracker"):
        return None
    _k, first, inputs, _out = plan[0]
    try:
        size = input_bytes(first.name, inputs, stage_io(job.io, inputs, plan))
    except Exception:  # a listing that fails now fails the stage with its own message
        size = None
    return resources.Meter(getattr(getattr(compute, "tracker", None), "client", None), size)


@contextlib.contextmanager
def _cluster(cluster, client):
    """The given client (left open: it is the caller's), else one :func:`curate.app.cluster.connect` makes."""
    if client is not None:
        yield client
        return
    from curate.app.cluster import connect

    with connect(cluster) as made:
        yield made


def input_bytes(name: str, inputs, io: IOSettings) -> int | None:
    """Bytes on disk of what stage ``name`` reads from ``inputs`` (None when unknown: URLs, downloads).
    Reads listings only; it decides ``--cluster auto``."""
    from curate.stages.paths import glob_files

    cls = registry.get(name)
    if not cls.takes_input or any("://" in str(i) for i in inputs):
        return None
    if cls.reads_raw_files:  # raw files, token sets: whatever the specs name
        total = 0
        for spec in inputs:
            if os.path.isdir(spec):
                total += sum(os.path.getsize(os.path.join(d, f)) for d, _, names in os.walk(spec) for f in names)
            else:
                total += sum(os.path.getsize(f) for f in ([spec] if os.path.isfile(spec) else glob_files(spec)))
        return total
    return sum(os.path.getsize(f) for f in dataset.expand_inputs(inputs, allow_incomplete=io.allow_incomplete))


def execute_job(job: Job, output: str, cluster=None, client=None, force: bool = False,
                stop_after: int | None = None) -> list[StageOutcome]:
    """Everything ``curate run`` does, for the CLI and the Python API: the refusals before any work, the
    lock (taken before the cluster starts; under MPI only the client rank may take it), the cluster
    (``cluster``: a ClusterSettings; ``auto`` judged by the first stage's input) or the caller's
    ``client``, the job, the reports."""
    preflight_job(job, output, stop_after)
    if client is None and cluster is not None and cluster.mode == "auto":
        from curate.app.cluster import resolve_auto

        first = job_plan(job, output, stop_after)[0]
        cluster = resolve_auto(cluster, input_bytes(first[1].name, first[2], job.io))
    if cluster is not None and cluster.mode == "mpi" and not cluster.worker_imports:
        # MPI only: there the workers start on their own nodes while the client imports and plans, so
        # their imports cost no wall time; a local cluster's workers would only start later on the
        # same cores (about 2 s on a 2-core laptop), for imports the first task makes anyway
        from curate.app.worker_warm import job_imports

        cluster = dataclasses.replace(cluster, worker_imports=job_imports(
            registry.get(spec.name) for spec in job.stages))
    early = client is not None or cluster is None or cluster.mode != "mpi"
    with job_lock(job, output) if early else contextlib.nullcontext(), \
            _cluster(cluster, client) as c, performance_report(output, "run", c):
        return run_job(job, output, compute=make_compute(c), force=force, stop_after=stop_after, lock=not early)


# --------------------------------------------------------------------------- presentation


def summary_table(outcomes: list[StageOutcome]) -> str:
    rows = [("stage", "status", "docs in", "docs out", "dropped", "seconds", "docs/s")]
    for o in outcomes:
        counts = o.manifest.get("counts", {})
        dropped = ", ".join(f"{k}={v}" for k, v in counts.get("dropped", {}).items()) or "-"
        secs = o.seconds if not o.skipped else o.manifest.get("timings", {}).get("seconds", 0.0)
        rate = counts.get("in", 0) / secs if secs else 0.0
        rows.append((
            os.path.basename(o.output),
            "skipped" if o.skipped else "ran",
            str(counts.get("in", "")),
            str(counts.get("out", "")),
            dropped,
            f"{secs:.1f}",
            f"{rate:,.0f}",
        ))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    for o in outcomes:
        pending = o.manifest.get("pending")
        if pending:
            files = o.manifest.get("download", {}).get("pending_files", [])
            named = ", ".join(files[:3]) + (", ..." if len(files) > 3 else "")
            lines.append(f"{os.path.basename(o.output)}: {pending} input(s) still pending (failed for now: {named}); "
                         "run the same command again to fetch them")
    empty = next((k for k, o in enumerate(outcomes, start=1)
                  if o.manifest.get("counts", {}).get("out") == 0 and o.manifest.get("counts", {}).get("in")), None)
    first = outcomes[0].manifest.get("counts", {}) if outcomes else {}
    if first.get("in") == 0 and first.get("out") == 0:  # an empty input: said, never a silent exit 0
        lines.append(f"no documents: stage 1 ({os.path.basename(outcomes[0].output)}) read none from its input")
    elif empty is not None:
        o = outcomes[empty - 1]
        lines.append(f"no document is left after stage {empty} ({os.path.basename(o.output)}): "
                     f"{', '.join(f'{k}={v}' for k, v in o.manifest['counts'].get('dropped', {}).items()) or 'all dropped'}"
                     + ("; the stages after it had nothing to do" if empty < len(outcomes) else ""))
    return "\n".join(lines)


def compute_slots(compute) -> int:
    """The threads that run ``compute``'s tasks: its client's workers' (as the stage starts), or this
    process's."""
    client = getattr(getattr(compute, "tracker", None), "client", None)
    if client is not None:
        try:
            return max(1, sum(int(n) for n in client.nthreads().values()))
        except Exception as e:  # a courtesy for the task split: the run goes on with one
            log.warning("cannot count the cluster's threads (%s: %s)", type(e).__name__, e)
            return 1
    import dask

    return int(dask.config.get("num_workers", None) or os.cpu_count() or 1)


def make_compute(client, show_progress: bool | None = None):
    """A compute function for stages: submit to the client (or run on this process's threads), and
    count the finished tasks for the job's progress line and the live page (:mod:`curate.app.live`).
    ``show_progress=False``: no progress line (benchmarks)."""
    from curate.app.live import Tracker

    tracker = Tracker(client).start()

    def compute(*collections):

        if client is None:
            return _compute_here(collections, tracker)
        from distributed import KilledWorker

        futures = client.compute(list(collections))
        tracker.watch(futures)
        try:
            return tuple(client.gather(futures))
        except KilledWorker as e:  # names a task key only; run_stage adds the stage and the input
            raise WorkerKilled.from_killed(e) from e

    def start(collection):
        from distributed import KilledWorker

        future = client.compute(collection)
        tracker.watch([future])

        def result():
            try:
                return future.result()
            except KilledWorker as e:
                raise WorkerKilled.from_killed(e) from e

        return result

    compute.tracker = tracker
    compute.show_progress = show_progress is not False
    # StageContext.run_beside: on a cluster a computation can start beside the next one
    compute.start = start if client is not None else None
    return compute


def _compute_here(collections, tracker):
    """``dask.compute`` on this process's threads, telling ``tracker`` of each finished output task."""
    import dask
    from dask.callbacks import Callback

    from curate.stages.dataset.write import is_write_key

    keys = set()
    for c in collections:
        keys.update(k for k in dask.core.flatten(c.__dask_keys__()) if not isinstance(k, list))
    tracker.expect(len(keys))

    class Count(Callback):
        def _posttask(self, key, result, dsk, state, worker_id):
            if key in keys:
                tracker.finished(result if is_write_key(key) else None)

    with Count():
        return dask.compute(*collections)


@contextlib.contextmanager
def performance_report(output: str, label: str, client):
    """Save Dask's performance report (HTML) under ``<output>/_reports/``; a job's HTML report too
    (without a client, ``--cluster threads``, only that). A Ctrl-C or SIGTERM once every stage finished
    (while the reports are written) says so: the outputs are complete (:class:`signals.AfterStages`)."""
    from curate.app import signals

    if "://" in output:  # a remote output (s3://...): no local folder to put it in
        yield None
        return
    done = False
    try:
        if client is None:
            started = time.time()
            yield None
            done = True
            if label == "run":  # a stage command writes no page: nothing to import for it
                from curate.app.report_html import cluster_info, write_run_report

                write_run_report(output, None, None, started, cluster_info(None))
            return
        from distributed import performance_report as report

        folder = os.path.join(output, "_reports")
        path = os.path.join(folder, f"{time.strftime('%Y%m%d-%H%M%S')}-{label}.html")
        output_mod.refuse_link(output, path)
        os.makedirs(folder, exist_ok=True)
        from curate.app.report_html import cluster_info, write_run_report

        started, cluster = time.time(), cluster_info(client)  # workers as the run starts
        with report(filename=path):
            yield path
            done = True
        log.info("performance report: %s", path)
        if label == "run":  # the job's own page, after the performance report it links to
            write_run_report(output, client, path, started, cluster)
    except KeyboardInterrupt as e:
        if not done:  # the stages' own interrupt, as it came
            raise
        raise signals.after_stages(e, output) from None

