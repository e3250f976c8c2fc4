"""Predict a job's cost on a cluster from measured scaling points.

``curate plan JOB.yaml --calibration SCALING_DIR --nodes 8,64,512 --cores-per-node 32 --memory-per-node
256GiB [--link 25gbit] [--input-size 10TB] [--partition-size 512MiB] [--json FILE]``: per stage and in total, the wall time,
CPU-hours (used) and core-hours (allocated), each worker's peak memory, the bytes shuffled over the
network, the disk for outputs and ``_work``, and the resource that binds (CPU, memory, network, the
scheduler); per node count, the smallest partition size at which no stage is scheduler-bound. SCALING_DIR holds ``scaling.csv`` (``curate bench scaling``, slurm/strong_scaling.sbatch).
``--sample 1%`` instead runs the job on that share of its input files first (one calibration point:
no serial fraction, see the output's assumptions). The model: docs/plan.md, app/plan.py.
"""

from __future__ import annotations

import os

from curate.stages.errors import SettingsError

HELP = "predict a job's time, CPU, memory, network and disk on a cluster, from scaling measurements"


def add_arguments(p) -> None:
    from curate.app.cli import add_cluster_arguments

    p.add_argument("job", help="job YAML (its stages are planned)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--calibration", metavar="DIR", help="folder with scaling.csv (and optionally scaling.json)")
    src.add_argument("--sample", metavar="SHARE",
                     help="run the job on this share of its input files first, e.g. 1%%, and calibrate from it")
    p.add_argument("--sample-output", metavar="DIR", default=None,
                   help="--sample: where the sample run writes (default: a temporary folder, removed afterwards)")
    p.add_argument("--nodes", required=True, help="node counts to plan for, comma-separated, e.g. 8,64,512")
    p.add_argument("--cores-per-node", type=int, required=True, help="cores of one node")
    p.add_argument("--memory-per-node", required=True, help="memory of one node, e.g. 256GiB")
    p.add_argument("--link", default="25gbit", help="network bandwidth per node, e.g. 25gbit or 3GB/s (default 25gbit)")
    p.add_argument("--input-size", default=None,
                   help="bytes of input to plan for, e.g. 10TB (default: the job's input on disk)")
    p.add_argument("--task-overhead", default="1ms", help="scheduler time per Dask task (default 1ms)")
    p.add_argument("--partition-size", default=None, metavar="SIZE",
                   help="bytes per input partition on the target, e.g. 512MiB (default: the calibration's "
                        "partition_bytes)")
    p.add_argument("--json", default=None, metavar="FILE", help="also write the predictions as JSON")
    # --sample's run; its --threads-per-worker is the target's too: workers per node = cores / threads
    add_cluster_arguments(p)


def _seconds(text: str) -> float:
    t = str(text).strip().lower()
    import math

    for unit, factor in (("us", 1e-6), ("ms", 1e-3), ("s", 1.0)):
        if t.endswith(unit):
            try:
                value = float(t[:-len(unit)]) * factor
            except ValueError:
                break
            if math.isfinite(value) and value >= 0:  # "nans" and "infs" end in s too
                return value
            break
    raise SettingsError(f"--task-overhead must be a time such as 1ms or 200us; got {text[:40]!r}")


def _share(text: str) -> float:
    t = str(text).strip()
    try:
        value = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        value = -1.0
    if not 0 < value <= 1:
        raise SettingsError(f"--sample must be a share of the input such as 1% or 0.01; got {text!r}")
    return value


def settings_of(args):
    from curate.app.plan import PlanSettings, parse_link, parse_nodes
    from curate.stages.settings import parse_bytes

    return PlanSettings(
        nodes=parse_nodes(args.nodes), cores_per_node=args.cores_per_node,
        memory_per_node=parse_bytes(args.memory_per_node, "--memory-per-node"), link=parse_link(args.link),
        input_size=parse_bytes(args.input_size, "--input-size") if args.input_size is not None else None,
        threads_per_worker=args.threads_per_worker, task_overhead=_seconds(args.task_overhead),
        partition_size=(parse_bytes(args.partition_size, "--partition-size") if args.partition_size is not None
                        else None))


def main(args) -> int:
    import contextlib
    import dataclasses
    import json
    import tempfile

    from curate.app import plan as model, runner

    s = settings_of(args)  # every option checked before a sample runs
    job = runner.load_job(args.job)
    folders = [os.path.basename(out) for _k, _spec, _i, out in runner.job_plan(job, job.output or "plan")]
    first = job.stages[0]
    inputs = first.input or job.input or ()
    try:
        job_bytes = runner.input_bytes(first.name, inputs, job.io)
    except Exception:  # a local input that matches no file here: 0 bytes, never the calibration's size unasked
        job_bytes = 0
    # an input elsewhere (a URL) is None: the plan then says it uses the calibration's size
    no_input = job_bytes == 0 and s.input_size is None and args.sample is None
    notes = []
    folder = args.calibration
    # a sample run without --sample-output writes into a temporary folder that tempfile owns and removes
    with contextlib.ExitStack() as scratch:
        if args.sample is not None:
            share = _share(args.sample)
            folder = args.sample_output or scratch.enter_context(tempfile.TemporaryDirectory(prefix="curate-plan-"))
            notes.append(sample_run(job, share, folder, args))
        calibration = model.load_calibration(folder, s.cores_per_node)
        if calibration.input_bytes is None and job_bytes is not None and args.sample is None:
            calibration = dataclasses.replace(calibration, input_bytes=job_bytes)
            notes.append("the calibration does not record its input bytes: taken as the job's input on disk")
        for f in folders:  # a stage the calibration lacks is named first
            model.stage_for(calibration, f)
        if no_input:
            raise SettingsError(f"{args.job}: the job's input {', '.join(map(str, inputs))} holds no bytes here "
                                "(no file matches): give --input-size to plan for a size")
        result = model.plan(calibration, folders, s, s.input_size or job_bytes, notes)
    result["job"] = args.job
    print(format_plan(result))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
        print(f"plan: predictions in {args.json}")
    return 0


def sample_run(job, share: float, folder: str, args) -> str:
    """Run ``job`` on ``share`` of its input files (evenly spread, at least one) into ``folder``/run and
    record it as ``folder``/scaling.csv; return what the plan should say about it."""
    import dataclasses
    import math

    from curate.app import bench, runner
    from curate.app.cli import cluster_settings
    from curate.stages import dataset, registry

    first = job.stages[0]
    inputs = first.input or job.input
    if registry.get(first.name).reads_raw_files or any("://" in str(i) for i in inputs or ()):
        files = sorted(f for spec in inputs or () for f in _raw_files(spec))
    else:
        files = sorted(dataset.expand_inputs(inputs, allow_incomplete=job.io.allow_incomplete))
    if not files:
        raise SettingsError(f"--sample: the job's input {', '.join(map(str, inputs))} has no local files to sample")
    k = max(1, math.ceil(share * len(files)))
    picked = [files[int(i * len(files) / k)] for i in range(k)]
    stages = list(job.stages)
    stages[0] = dataclasses.replace(first, input=None)
    sample = dataclasses.replace(job, input=tuple(picked), stages=tuple(stages))
    run = os.path.join(folder, "run")
    runner.execute_job(sample, run, cluster_settings(args), force=True)
    bench.write_csv(os.path.join(folder, "scaling.csv"), bench.record_rows(run, {}))
    return (f"calibrated from one sample run: {k} of the job's {len(files)} input files ({args.sample}); one point "
            "gives no serial fraction: the serial part is the scheduler's share, the rest perfectly parallel")


def _raw_files(spec: str) -> list[str]:
    import glob

    if "://" in str(spec):
        return []
    if os.path.isdir(spec):
        return [os.path.join(d, f) for d, _, names in os.walk(spec) for f in names]
    return [spec] if os.path.isfile(spec) else glob.glob(spec)


# --------------------------------------------------------------------------- presentation


def _size(n) -> str:
    from curate.stages.dataset import format_size

    return "-" if n is None else format_size(n)


def _time(secs) -> str:
    if secs is None:
        return "-"
    if secs < 120:
        return f"{secs:.1f}s"
    if secs < 7200:
        return f"{secs / 60:.1f}m"
    return f"{secs / 3600:.1f}h"


def _peak(q: dict) -> str:
    """A worker's peak; marked * when it was measured at another partition size than the one planned."""
    at, size = q.get("peak_measured_at"), q.get("partition_bytes")
    other = at is not None and size is not None and abs(at - size) > 0.5
    return _size(q["peak_worker_bytes"]) + ("*" if other and q["peak_worker_bytes"] is not None else "")


def _measured(p: dict):
    return next(q["peak_measured_at"] for q in p["stages"] if _peak(q).endswith("*"))


def _partition_line(found: dict | None, per_worker: float, cores: int) -> str:
    """The smallest partition size at which no stage is scheduler-bound, as one line."""
    from curate.app.plan_partitions import CANDIDATES

    if found is None:
        return "partition size: none named (the calibration records no partition_bytes)"
    if found["bytes"] is None:
        return (f"partition size: none from {_size(CANDIDATES[0])} to {_size(CANDIDATES[-1])} keeps every stage "
                "off the scheduler (a stage's head share exceeds its parallel part at each)")
    peak = found["peak_worker_bytes"]
    if peak is None:
        said = "a worker's peak there is unknown (not measured)"
    else:
        at = found["peak_measured_at"]
        measured = (f" (as measured at {_size(at)}: its growth with partition size was not measured)"
                    if at is not None and abs(at - found["bytes"]) > 0.5 else "")
        said = (f"a worker's peak there {_size(peak)}{measured}, "
                f"{'within' if found['fits'] else 'above'} the {_size(per_worker)} per worker")
    idle = (f" (only {found['partitions']:,} input partitions for {cores:,} cores: some idle, which the model does "
            "not count)" if found.get("partitions") is not None and found["partitions"] < cores else "")
    return (f"partition size: {_size(found['bytes'])} is the smallest at which no stage is scheduler-bound "
            f"(head share <= parallel part){idle}; {said}")


def format_plan(result: dict) -> str:
    lines = []
    st = result["settings"]
    for p in result["plans"]:
        lines.append(f"{p['nodes']} node(s) x {st['cores_per_node']} cores = {p['total']['cores']} cores, "
                     f"{st['workers_per_node']} worker(s) per node with {_size(st['memory_per_node'] / st['workers_per_node'])} each")
        rows = [("stage", "wall", "CPU-h", "core-h", "peak/worker", "shuffle", "network", "output", "_work", "binds")]
        for q in [*p["stages"], p["total"]]:
            rows.append((q["stage"], _time(q["wall_seconds"]), f"{q['cpu_hours']:.2f}", f"{q['core_hours']:.2f}",
                         _peak(q), _size(q["shuffle_bytes"]), _time(q["network_seconds"]),
                         _size(q["output_bytes"]), _size(q["work_bytes"]), q["binding"]))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        table = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        table.insert(1, "  ".join("-" * w for w in widths))
        lines += table
        for q in [*p["stages"], p["total"]][:-1]:
            if q["binding"] == "memory":
                lines.append(f"{q['stage']}: a worker's peak of {_size(q['peak_worker_bytes'])} exceeds the "
                             f"{_size(q['memory_per_worker'])} per worker: at most {q['max_workers_per_node']} "
                             "worker(s) per node (or a smaller --blocksize)")
        if any(_peak(q).endswith("*") for q in p["stages"]):
            lines.append(f"* a peak measured at partitions of {_size(_measured(p))}, not at the "
                         f"{_size(p['total']['partition_bytes'])} planned: its growth with partition size was not "
                         "measured")
        lines.append(_partition_line(p["partition_size"], p["total"]["memory_per_worker"], p["total"]["cores"]))
        lines.append("")
    lines.append("assumptions:")
    lines += [f"- {n}" for n in result["assumptions"]]
    return "\n".join(lines)
