"""Predicting a job's cost on a cluster that is not this one, from measured scaling points.

The model, per stage (docs/plan.md says it with an example):

- Time on ``c`` cores (workers x threads) is ``t(c) = a + b / c``: ``a`` the serial part, ``b`` the
  parallel part in core-seconds (Amdahl's law), fitted by least squares over the calibration's
  points (the best time of each core count). One point gives no serial part: ``a`` is then the
  scheduler's share (tasks x per-task overhead) and the rest is taken as perfectly parallel.
- On the target, ``r`` = target input bytes / calibration input bytes. The parallel part scales with
  ``r``. The serial part is split in two: the scheduler's share (the stage's Dask tasks x the per-task
  overhead, 1 ms by default) scales with ``r`` x (the calibration's partition size / the target's, 1
  when unknown): partitions, hence tasks, grow with the input and shrink with the partition size; the
  rest (start-up, listing, planning) is taken as fixed.
- Shuffle bytes, output and ``_work`` bytes and CPU-seconds scale with ``r``; the peak memory of a
  worker does not (curate bounds it by partition size, not input size): measured at two or more
  partition sizes it is a line in the partition size, at one it is the measured peak (app/plan_partitions.py,
  which also names per node count the smallest partition size at which no stage is scheduler-bound).
- Network time = shuffle bytes / (nodes x link), 0 on one node; it overlaps the parallel part, so
  wall = serial + max(parallel, network).
- The binding resource is memory when a worker's peak exceeds memory per node / workers per node,
  else the largest of CPU (parallel part), network and the scheduler (serial part).

Pure computation: the command (``curate plan``, app/commands/plan.py) reads the job and prints.
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
from dataclasses import dataclass

from curate.app import plan_partitions as partitions
from curate.stages.errors import SettingsError

#: the scheduler's cost per task when nothing better is known (Dask's documented order of magnitude)
TASK_OVERHEAD = 0.001

#: calibration columns that are summed up per stage and scale with the input
SCALED = ("cpu_seconds", "shuffle_bytes", "output_bytes", "work_bytes", "dask_tasks", "scheduler_cpu_seconds",
          "client_cpu_seconds")
#: of these, the ones that count partitions (tasks, the head's work): a row's value is taken to the
#: calibration's mean partition size (x its partition_bytes / the mean) before the rows are averaged
PER_PARTITION = ("dask_tasks", "scheduler_cpu_seconds", "client_cpu_seconds")


# --------------------------------------------------------------------------- settings


def parse_nodes(text: str) -> tuple[int, ...]:
    try:
        values = [int(v) for v in str(text).split(",") if v.strip()]
    except ValueError:
        raise SettingsError(f"--nodes must be a comma-separated list of integers; got {text!r}") from None
    if not values or min(values) < 1:
        raise SettingsError(f"--nodes must list positive integers; got {text!r}")
    return tuple(sorted(set(values)))


_BIT_UNITS = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}


def parse_link(text: str) -> float:
    """'25gbit' (or 25gbit/s, 25gbps) -> bytes per second; '3GB/s' -> bytes per second."""
    from curate.stages.settings import parse_bytes

    t = str(text).strip().lower().replace(" ", "")
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kmgt]?)(?:bit(?:/s)?|bps)", t)
    if m and float(m.group(1)) > 0:
        return float(m.group(1)) * _BIT_UNITS[m.group(2)] / 8
    if t.endswith("/s"):
        try:
            return float(parse_bytes(t[:-2], "--link"))
        except SettingsError:
            pass
    raise SettingsError(f"--link must be a bandwidth per node such as 25gbit or 3GB/s; got {text!r}")


@dataclass(frozen=True)
class PlanSettings:
    """The target cluster and input."""

    nodes: tuple[int, ...]
    cores_per_node: int
    memory_per_node: int  # bytes
    link: float = 25e9 / 8  # bytes per second per node (25 Gbit)
    input_size: int | None = None  # bytes; None: the job's input (or the calibration's)
    threads_per_worker: int = 1
    task_overhead: float = TASK_OVERHEAD  # seconds of scheduler time per task
    partition_size: int | None = None  # bytes per input partition; None: the calibration's

    def __post_init__(self):
        if not self.nodes or min(self.nodes) < 1:
            raise SettingsError(f"--nodes must list positive integers; got {self.nodes}")
        if self.cores_per_node < 1:
            raise SettingsError(f"--cores-per-node must be at least 1; got {self.cores_per_node}")
        if self.memory_per_node <= 0:
            raise SettingsError(f"--memory-per-node must be positive; got {self.memory_per_node}")
        if self.link <= 0:
            raise SettingsError(f"--link must be positive; got {self.link}")
        if self.input_size is not None and self.input_size <= 0:
            raise SettingsError(f"--input-size must be positive; got {self.input_size}")
        if not 1 <= self.threads_per_worker <= self.cores_per_node:
            raise SettingsError(f"--threads-per-worker must be between 1 and --cores-per-node "
                                f"({self.cores_per_node}); got {self.threads_per_worker}")
        if not math.isfinite(self.task_overhead) or self.task_overhead < 0:
            raise SettingsError(f"--task-overhead must be a finite time >= 0; got {self.task_overhead}")
        if not math.isfinite(self.link):
            raise SettingsError(f"--link must be a finite bandwidth; got {self.link}")
        if self.partition_size is not None and not (math.isfinite(self.partition_size) and self.partition_size > 0):
            raise SettingsError(f"--partition-size must be a positive size; got {self.partition_size}")

    @property
    def workers_per_node(self) -> int:
        return self.cores_per_node // self.threads_per_worker


# --------------------------------------------------------------------------- calibration


@dataclass(frozen=True)
class StageCalibration:
    name: str
    points: tuple[tuple[float, float], ...]  # (cores, best seconds), by cores
    values: dict  # SCALED columns and partition_bytes (mean over the rows), peak_worker_bytes (max); absent: not measured
    peaks: tuple[tuple[float, float], ...] = ()  # (partition bytes, largest peak at that size), by size


@dataclass(frozen=True)
class Calibration:
    folder: str
    stages: dict  # stage folder name -> StageCalibration
    input_bytes: int | None
    notes: tuple[str, ...]
    partition_bytes: float | None = None  # the mean of the rows' partition_bytes; None: no row has it


def _number(row: dict, column: str) -> float | None:
    """A measured value of a calibration row: empty is None; anything but a finite number >= 0 is refused
    (a NaN, an infinity or a negative count would print as nonsense), naming the column and the line."""
    value = (row.get(column) or "").strip()
    if not value:
        return None
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not math.isfinite(number) or number < 0:
        line = f" line {row[_LINE]}" if _LINE in row else ""
        raise SettingsError(f"--calibration: scaling.csv{line} column {column!r} has {value[:40]!r}, not a finite "
                            "number >= 0")
    return number


#: where load_calibration notes a row's line in scaling.csv (a key no CSV header can produce)
_LINE = "\0line"


def _cores(row: dict, cores_per_node: int, notes: set) -> float:
    """A row's cores: its ``cores`` (measured), else workers x threads, else nodes x the target's cores."""
    cores = _number(row, "cores")
    if cores:
        return cores
    workers = _number(row, "workers")
    if workers:
        threads = _number(row, "threads") or _number(row, "threads_per_worker")
        if not threads:
            notes.add("calibration rows without threads per worker: taken as 1 thread per worker")
        return workers * (threads or 1)
    nodes = _number(row, "nodes")
    if nodes:
        notes.add(f"calibration rows with nodes only: taken as {cores_per_node} cores per node (--cores-per-node)")
        return nodes * cores_per_node
    raise SettingsError("--calibration: scaling.csv has no cores, workers or nodes column (one is needed per row)")


def load_calibration(folder: str, cores_per_node: int) -> Calibration:
    """Per stage: the best seconds at each core count, and the resources the rows recorded."""
    path = os.path.join(folder, "scaling.csv")
    if not os.path.isfile(path):
        raise SettingsError(f"--calibration {folder}: no scaling.csv there (curate bench scaling or "
                            "slurm/strong_scaling.sbatch writes one)")
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = [{**r, _LINE: n} for n, r in enumerate(csv.DictReader(f), start=2)]
    except (UnicodeDecodeError, csv.Error) as e:
        raise SettingsError(f"--calibration {path}: not a CSV file of text ({type(e).__name__}: {e})"[:300]) from None
    missing = {"stage", "seconds"} - set(rows[0] if rows else ())
    if missing:
        raise SettingsError(f"--calibration {folder}: scaling.csv has no {sorted(missing)[0]!r} column")
    notes: set[str] = set()
    best: dict[str, dict[float, float]] = {}
    seen: dict[str, dict[str, list[tuple[float, float | None]]]] = {}  # values and their row's partition bytes
    input_bytes = None
    sizes: list[float] = []
    peaks: dict[str, dict[float, float]] = {}
    for row in rows:
        if (row.get("exit_code") or "0").strip() not in ("0", ""):
            continue  # a failed run's times say nothing about the stage
        input_bytes = input_bytes or _number(row, "input_bytes")
        if row["stage"] == "total":
            continue
        cores, secs = _cores(row, cores_per_node, notes), _number(row, "seconds")
        if cores <= 0:
            raise SettingsError(f"--calibration: scaling.csv line {row[_LINE]}: cores, workers or nodes must be "
                                "positive")
        if secs is None:
            continue
        per = best.setdefault(row["stage"], {})
        per[cores] = min(per.get(cores, math.inf), secs)
        size, peak = _number(row, "partition_bytes") or None, _number(row, "peak_worker_bytes")
        for column in (*SCALED, "peak_worker_bytes", "partition_bytes"):
            value = _number(row, column)
            if value is not None:
                seen.setdefault(row["stage"], {}).setdefault(column, []).append((value, size))
        if size:
            sizes.append(size)
            if peak is not None:
                at = peaks.setdefault(row["stage"], {})
                at[size] = max(at.get(size, 0.0), peak)
    if not best:
        raise SettingsError(f"--calibration {folder}: scaling.csv has no stage rows of a successful run")
    if input_bytes is None and os.path.isfile(os.path.join(folder, "scaling.json")):
        where = os.path.join(folder, "scaling.json")
        try:
            with open(where, encoding="utf-8") as f:
                doc = json.load(f)
        except (UnicodeDecodeError, ValueError) as e:
            raise SettingsError(f"--calibration {where}: not JSON ({type(e).__name__})") from None
        input_bytes = doc.get("input_bytes") if isinstance(doc, dict) else None
        if input_bytes is not None and (isinstance(input_bytes, bool) or not isinstance(input_bytes, (int, float))
                                        or not math.isfinite(input_bytes) or input_bytes <= 0):
            raise SettingsError(f"--calibration {where}: input_bytes must be a positive number; got "
                                f"{str(input_bytes)[:40]!r}")
    stages = {}
    mean = sum(sizes) / len(sizes) if sizes else None
    for stage, per in best.items():
        values = {}
        for c, pairs in seen.get(stage, {}).items():
            v = [x * (at / mean if c in PER_PARTITION and at else 1.0) for x, at in pairs]
            values[c] = max(v) if c == "peak_worker_bytes" else mean if c == "partition_bytes" else sum(v) / len(v)
        stages[stage] = StageCalibration(stage, tuple(sorted(per.items())), values,
                                         tuple(sorted(peaks.get(stage, {}).items())))
    return Calibration(folder, stages, int(input_bytes) if input_bytes else None, tuple(sorted(notes)), mean)


def stage_for(calibration: Calibration, folder: str) -> StageCalibration:
    """The calibration of a job's stage folder (NN-name), else of the one stage called name."""
    if folder in calibration.stages:
        return calibration.stages[folder]
    name = folder[3:] if folder[:2].isdigit() else folder
    same = [s for k, s in calibration.stages.items() if k == name or (k[:2].isdigit() and k[3:] == name)]
    if len(same) == 1:
        return same[0]
    raise SettingsError(f"--calibration {calibration.folder}: the job's stage {folder} is not in scaling.csv "
                        f"(it has {', '.join(sorted(calibration.stages))})")


# --------------------------------------------------------------------------- the model


def fit(points, tasks: float | None = None, task_overhead: float = TASK_OVERHEAD) -> tuple[float, float]:
    """(a, b) of t(c) = a + b / c by least squares over (cores, seconds) points, both kept >= 0. One
    core count: a = the scheduler's share (tasks x overhead, at most t), the rest parallel."""
    if len({c for c, _ in points}) < 2:
        c, t = points[0]
        a = min(t, (tasks or 0.0) * task_overhead)
        return a, (t - a) * c
    xs, ts = [1.0 / c for c, _ in points], [t for _, t in points]
    mx, mt = sum(xs) / len(xs), sum(ts) / len(ts)
    b = sum((x - mx) * (t - mt) for x, t in zip(xs, ts)) / sum((x - mx) ** 2 for x in xs)
    a = mt - b * mx
    if b < 0:  # slower with more cores: nothing parallel to gain
        return mt, 0.0
    if a < 0:  # faster than perfectly parallel: through the origin
        return 0.0, sum(x * t for x, t in zip(xs, ts)) / sum(x * x for x in xs)
    return a, b


def predict_stage(cal: StageCalibration, s: PlanSettings, nodes: int, ratio: float,
                  size: float | None = None) -> dict:
    """One stage on ``nodes`` nodes with ``ratio`` times the calibration's input, in partitions of
    ``size`` bytes (None: the calibration's)."""
    v = cal.values
    size = size or v.get("partition_bytes")
    per_partition = v["partition_bytes"] / size if size and v.get("partition_bytes") else 1.0
    a, b = fit(cal.points, v.get("dask_tasks"), s.task_overhead)
    cores = nodes * s.cores_per_node
    tasks = v.get("dask_tasks")
    if "client_cpu_seconds" in v and "scheduler_cpu_seconds" in v:
        # the head as measured: the scheduler's own CPU and the client's planning thread (a calibration
        # written before both were recorded counted a local cluster's workers as the scheduler's)
        sched_cal = min(a, v["scheduler_cpu_seconds"] + v["client_cpu_seconds"])
    else:
        sched_cal = min(a, tasks * s.task_overhead) if tasks is not None else 0.0
    head = sched_cal * ratio * per_partition
    serial = (a - sched_cal) + head
    parallel = b * ratio / cores
    shuffle = v["shuffle_bytes"] * ratio if "shuffle_bytes" in v else None
    network = shuffle / (nodes * s.link) if shuffle is not None and nodes > 1 else 0.0
    wall = serial + max(parallel, network)
    peak, measured_at, peak_fit = partitions.peak_at(cal.peaks, v.get("peak_worker_bytes"), size)
    per_worker = s.memory_per_node / s.workers_per_node
    times = {"CPU": parallel, "network": network, "scheduler": serial}
    binding = "memory" if peak is not None and peak > per_worker else max(times, key=times.get)
    return {
        "stage": cal.name, "nodes": nodes, "cores": cores,
        "serial_seconds": serial, "head_seconds": head, "parallel_seconds": parallel, "network_seconds": network,
        "wall_seconds": wall,
        "cpu_hours": (v["cpu_seconds"] if "cpu_seconds" in v else b) * ratio / 3600,
        "cpu_measured": "cpu_seconds" in v,
        "core_hours": wall * cores / 3600,
        "dask_tasks": tasks * ratio * per_partition if tasks is not None else None,
        "partition_bytes": size, "peak_worker_bytes": peak, "peak_measured_at": measured_at, "peak_fit": peak_fit,
        "memory_per_worker": per_worker,
        "max_workers_per_node": int(s.memory_per_node // peak) if peak else None,
        "shuffle_bytes": shuffle,
        "output_bytes": v["output_bytes"] * ratio if "output_bytes" in v else None,
        "work_bytes": v["work_bytes"] * ratio if "work_bytes" in v else None,
        "binding": binding, "fit": {"serial": a, "parallel": b, "points": len(cal.points)},
    }


def total_of(stages: list[dict]) -> dict:
    """The job: times, hours, bytes and disk add up (every stage's output stays); the peak is the largest."""
    def add(key):
        values = [p[key] for p in stages]
        return None if any(v is None for v in values) else sum(values)

    peaks = [p for p in stages if p["peak_worker_bytes"] is not None]
    top = max(peaks, key=lambda p: p["peak_worker_bytes"]) if peaks else None
    times = {"CPU": add("parallel_seconds"), "network": add("network_seconds"), "scheduler": add("serial_seconds")}
    memory = any(p["binding"] == "memory" for p in stages)
    return {"stage": "total", "nodes": stages[0]["nodes"], "cores": stages[0]["cores"],
            **{k: add(k) for k in ("serial_seconds", "head_seconds", "parallel_seconds", "network_seconds", "wall_seconds",
                                   "cpu_hours", "core_hours", "dask_tasks", "shuffle_bytes", "output_bytes",
                                   "work_bytes")},
            "cpu_measured": all(p["cpu_measured"] for p in stages),
            "partition_bytes": stages[0]["partition_bytes"],
            "peak_worker_bytes": top["peak_worker_bytes"] if top else None,
            "peak_measured_at": top["peak_measured_at"] if top else None, "memory_per_worker": stages[0]["memory_per_worker"],
            "max_workers_per_node": min((p["max_workers_per_node"] for p in stages if p["max_workers_per_node"]),
                                        default=None),
            "binding": "memory" if memory else max(times, key=times.get)}


def plan(calibration: Calibration, folders: list[str], s: PlanSettings, target_bytes: int | None,
         notes: list[str]) -> dict:
    """Predictions for each node count: every stage of the job (its folder names, in order) and the total."""
    cals = [stage_for(calibration, f) for f in folders]
    notes = list(calibration.notes) + list(notes)
    if target_bytes is None or calibration.input_bytes is None:
        ratio = 1.0
        notes.append("input: the calibration's size (no input size to scale to)" if target_bytes is None else
                     "input: the calibration does not record its input bytes; planned at its size")
    else:
        ratio = target_bytes / calibration.input_bytes
        notes.append(f"input: {target_bytes:,} bytes = {ratio:,.6g} x the calibration's {calibration.input_bytes:,} "
                     "bytes; parallel work, tasks, shuffle, CPU and disk scale by that ratio")
    if any(len({c for c, _ in cal.points}) < 2 for cal in cals):
        notes.append("one calibration point for some stage: no serial fraction can be fitted; its serial part is "
                     "taken as the scheduler's (tasks x per-task overhead) and the rest as perfectly parallel, so "
                     "its predictions on many nodes are optimistic")
    if any("dask_tasks" not in cal.values for cal in cals):
        notes.append("no task counts for some stage: its whole serial part is taken as fixed, not growing with "
                     "the input")
    notes.append(f"scheduler: {s.task_overhead * 1000:g} ms per task; network: shuffle bytes / (nodes x "
                 f"{s.link * 8 / 1e9:g} Gbit/s), overlapping the parallel part")
    known = calibration.partition_bytes
    size = (s.partition_size or known) if known else None  # the target's partition size
    notes += partitions.notes(cals, known, size, s.partition_size is not None)
    per_worker = s.memory_per_node / s.workers_per_node
    plans = []
    for nodes in s.nodes:
        def at(size, nodes=nodes):
            stages = [predict_stage(cal, s, nodes, ratio, size) for cal in cals]
            for folder, p in zip(folders, stages):
                p["stage"] = folder
            return stages

        stages = at(size)
        unbound = partitions.smallest_unbound(at, partitions.candidates(known), per_worker) if known else None
        if unbound and unbound["bytes"] and (target_bytes or calibration.input_bytes):  # the input's partitions there
            unbound["partitions"] = math.ceil((target_bytes or calibration.input_bytes) / unbound["bytes"])
        plans.append({"nodes": nodes, "stages": stages, "total": total_of(stages), "partition_size": unbound})
    for p in plans:  # every number printed is finite and >= 0, or the plan is not printed
        for q in [*p["stages"], p["total"], {"stage": "partition size", **(p["partition_size"] or {})}]:
            for key, value in [*q.items(), *(q.get("peak_fit") or {}).items()]:
                if isinstance(value, float) and (not math.isfinite(value) or value < 0):
                    raise SettingsError(f"--calibration {calibration.folder}: stage {q['stage']} on {p['nodes']} "
                                        f"node(s) gives {key} = {value}: check its scaling.csv rows")
    return {"settings": {"nodes": list(s.nodes), "cores_per_node": s.cores_per_node,
                         "memory_per_node": s.memory_per_node, "link_bytes_per_second": s.link,
                         "threads_per_worker": s.threads_per_worker, "workers_per_node": s.workers_per_node,
                         "task_overhead_seconds": s.task_overhead, "partition_bytes": size},
            "calibration": {"folder": calibration.folder, "input_bytes": calibration.input_bytes,
                            "partition_bytes": known,
                            "peaks": {k: [list(p) for p in c.peaks] for k, c in calibration.stages.items()},
                            "points": {k: [list(p) for p in c.points] for k, c in calibration.stages.items()}},
            "input_bytes": target_bytes, "ratio": ratio, "assumptions": notes, "plans": plans}
