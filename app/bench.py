"""Strong scaling: the same job on the same input with 1, 2, 4, ... workers.

For each worker count the job runs ``repeat`` times on one local cluster of that size (``--force``, so
every stage computes); the best time of the repeats counts (least disturbed by other load). Written
to ``DIR``: ``scaling.csv`` (every measurement), ``scaling.json`` (best times, speedup, efficiency and
the Amdahl fit per stage) and ``scaling.png``.

Amdahl's law: with serial fraction s, the speedup on n workers is S(n) = 1 / (s + (1 - s) / n).
Rewritten as 1/S(n) - 1/n = s (1 - 1/n), s is a least-squares fit through the origin over the measured
points. The predictions assume that s stays what it was on this machine: no extra cost for
communication, shuffles or shared storage as the cluster grows, so they are upper bounds.
"""

from __future__ import annotations

import csv
import json
import math
import os
import time

# the fit is shared with the node-scaling summary (curate bench summarise)
from curate.app.scaling import amdahl_fit, amdahl_speedup
from curate.stages.errors import DataError, SettingsError

PREDICT_AT = (64, 256, 1024)
ASSUMPTION = ("Amdahl's law with the serial fraction fitted per stage on this machine; assumes it does not grow "
              "with the cluster (no extra communication, shuffle or storage cost), so predictions are upper bounds.")


def summarise(rows: list[dict]) -> dict:
    """Best seconds per (stage, workers), then speedup, efficiency and the Amdahl fit per stage."""
    best: dict[str, dict[int, float]] = {}
    for r in rows:
        per = best.setdefault(r["stage"], {})
        w = int(r["workers"])
        per[w] = min(per.get(w, float("inf")), float(r["seconds"]))
    stages = {}
    for stage, times in best.items():
        base_n = min(times)
        base = times[base_n] * base_n  # time on one worker, extrapolated when 1 was not measured
        speedup = {n: base / t if t > 0 else 0.0 for n, t in sorted(times.items())}
        s = amdahl_fit(speedup)
        stages[stage] = {
            "seconds": {n: round(t, 3) for n, t in sorted(times.items())},
            "speedup": {n: round(v, 3) for n, v in speedup.items()},
            "efficiency": {n: round(v / n, 3) for n, v in speedup.items()},
            "serial_fraction": round(s, 4),
            "predicted_speedup": {n: round(amdahl_speedup(s, n), 1) for n in PREDICT_AT},
            "baseline_workers": base_n,
        }
    return stages


def run_scaling(job_path: str, workers: list[int], repeat: int, output: str, cluster_kwargs: dict) -> dict:
    from curate.app import runner
    from curate.app.cluster import ClusterSettings, connect

    job = runner.load_job(job_path)
    first = job.stages[0]
    runner.check_inputs(first.name, first.input or job.input, job.io)
    os.makedirs(output, exist_ok=True)
    rows = []
    for n in workers:
        with connect(ClusterSettings(mode="local", workers=n, **cluster_kwargs)) as client:
            compute = runner.make_compute(client, show_progress=False)
            for r in range(repeat):
                run_dir = os.path.join(output, "runs", f"workers-{n:04d}")
                started = time.perf_counter()
                outcomes = runner.run_job(job, run_dir, compute=compute, force=True)
                total = time.perf_counter() - started
                for o in outcomes:
                    rows.append({"workers": n, "repeat": r, "stage": os.path.basename(o.output),
                                 "seconds": round(o.seconds, 4), "docs_in": o.manifest["counts"]["in"]})
                rows.append({"workers": n, "repeat": r, "stage": "total", "seconds": round(total, 4),
                             "docs_in": outcomes[0].manifest["counts"]["in"]})
                print(f"bench: {n} worker(s), run {r + 1}/{repeat}: {total:.2f}s", flush=True)
    write_csv(os.path.join(output, "scaling.csv"), rows)
    stages = summarise(rows)
    result = {"job": job_path, "workers": workers, "repeat": repeat, "cpu_count": os.cpu_count(),
              "assumption": ASSUMPTION, "stages": stages}
    with open(os.path.join(output, "scaling.json"), "w") as f:
        json.dump(result, f, indent=2)
    plot(stages, os.path.join(output, "scaling.png"))
    return result


def check_append(path: str, columns: list[str]) -> None:
    """Refuse to append rows with ``columns`` to the CSV ``path`` unless its header is exactly them.

    Readers take columns by name from the header, so a row under another header puts values under
    the wrong names. A header that stops before the last columns (a CSV written before
    ``client_cpu_seconds`` existed) is refused too, not widened: its old rows would stay one field
    short, which pandas and the csv module read as a malformed file."""
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return
    with open(path, "rb") as f:
        first = f.readline()
        f.seek(-1, os.SEEK_END)
        last = f.read(1)
    try:
        header = next(csv.reader([first.decode("utf-8")]), [])
    except (UnicodeDecodeError, csv.Error) as e:
        raise SettingsError(f"--csv {path}: its first line is not a CSV header ({e}); use another file") from None
    if header == columns:
        if last != b"\n":  # a row cut short: the next one would be glued to it
            raise SettingsError(f"--csv {path}: does not end with a line break (its last row was cut short?); "
                                "mend it or use another file")
        return
    if header and len(header) < len(columns) and header == columns[:len(header)]:
        raise SettingsError(f"--csv {path}: written before curate bench record had the column(s) "
                            f"{', '.join(columns[len(header):])}; start a new CSV (its rows and these cannot "
                            "share one header)")
    raise SettingsError(f"--csv {path}: its header is {','.join(header)}, but these rows are "
                        f"{','.join(columns)}; appending would put values under the wrong names: use another "
                        "file, or the labels it was started with")


def write_csv(path: str, rows: list[dict], append: bool = False) -> None:
    if not rows:
        return
    exists = append and os.path.exists(path) and os.path.getsize(path) > 0
    with open(path, "a" if append else "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        if not exists:
            writer.writeheader()
        writer.writerows(rows)


#: what record_rows adds after the stage's times and counts (empty where the run did not measure it)
RESOURCE_COLUMNS = ("cpu_seconds", "peak_worker_bytes", "shuffle_bytes", "output_bytes", "work_bytes",
                    "cores", "dask_tasks", "scheduler_cpu_seconds", "input_bytes", "client_cpu_seconds")
#: the mean input partition size of the run (input bytes / the first stage's partitions): the last column
PARTITION_COLUMN = "partition_bytes"
#: every column record_rows writes after the labels: a label may not take one of these names
MEASURED = ("stage", "seconds", "docs_in", "docs_out", *RESOURCE_COLUMNS, PARTITION_COLUMN)


def columns(labels: dict[str, str]) -> list[str]:
    """The columns of record_rows' rows with these labels (refused when one names a measured column)."""
    for key in labels:
        if key in MEASURED:
            raise SettingsError(f"--label {key}={labels[key]}: {key!r} is a column curate bench record measures; "
                                "give the label another name")
    return [*labels, *MEASURED]


def _measurement(value, where: str):
    """``value`` when it is a finite number >= 0 (or "": not measured); else a DataError naming ``where``."""
    if value == "":
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise DataError(f"{where}: {value!r} is not a measurement (a finite number >= 0); nothing recorded")
    return value


def record_rows(job_output: str, labels: dict[str, str]) -> list[dict]:
    """One row per stage folder (NN-stage) of a finished job output, from its manifest, plus the total.

    After labels, stage, seconds, docs_in and docs_out: the stage's resources as the run measured them
    (``_reports/resources.json``, :mod:`curate.app.resources`; empty for a stage run without them),
    its output bytes and ``_work`` bytes (from the manifest's file list), and the job's input bytes
    (on every row: what the calibration's sizes scale from), and last the run's mean input partition
    size, ``partition_bytes`` = input bytes / the first stage's manifest ``partitions`` (on every row;
    empty when either is unknown: what the plan scales tasks and a worker's peak with). The total sums
    what adds up."""
    from curate.app import resources
    from curate.app.run_folders import manifest_file

    columns(labels)
    record = resources.load(job_output)
    measured = record.get("stages", {})
    source = resources.path_of(job_output)
    input_bytes = _measurement(record.get("input_bytes", ""), f"{source}: input_bytes")
    rows = []
    partition_bytes = ""
    for name in sorted(os.listdir(job_output)):
        path = manifest_file(os.path.join(job_output, name))
        if not (name[:2].isdigit() and os.path.exists(path)):
            continue
        with open(path) as f:
            m = json.load(f)
        if not rows:  # the first stage read the input: its partitions are the input's
            partition_bytes = _partition_bytes(input_bytes, m.get("partitions"), f"{path}: partitions")
        files = [r for r in m.get("outputs", []) if isinstance(r, dict)]
        work = sum(int(r.get("bytes", 0)) for r in files if str(r.get("path", "")).startswith("_work/"))
        res = measured.get(name, {})
        if not isinstance(res, dict):
            raise DataError(f"{source}: stages.{name}: {res!r} is not a stage's measurements; nothing recorded")
        res = {c: _measurement(res.get(c, ""), f"{source}: stages.{name}.{c}") for c in RESOURCE_COLUMNS}
        rows.append({**labels, "stage": name,
                     "seconds": float(_measurement(m.get("timings", {}).get("seconds", 0.0), f"{path}: timings.seconds")),
                     "docs_in": _measurement(m["counts"]["in"], f"{path}: counts.in"),
                     "docs_out": _measurement(m["counts"]["out"], f"{path}: counts.out"),
                     **{c: res[c] for c in RESOURCE_COLUMNS[:3]},
                     "output_bytes": sum(int(r.get("bytes", 0)) for r in files) - work, "work_bytes": work,
                     **{c: res[c] for c in RESOURCE_COLUMNS[5:8]},
                     "input_bytes": input_bytes,
                     "client_cpu_seconds": res["client_cpu_seconds"]})
    for r in rows:
        r[PARTITION_COLUMN] = partition_bytes
    if rows:
        total = {**labels, "stage": "total", "seconds": round(sum(r["seconds"] for r in rows), 3),
                 "docs_in": rows[0]["docs_in"], "docs_out": rows[-1]["docs_out"]}
        for c in RESOURCE_COLUMNS:
            values = [r[c] for r in rows]
            if c == "input_bytes" or "" in values:  # not measured for every stage: no total
                total[c] = rows[0][c] if c == "input_bytes" else ""
            elif c in ("peak_worker_bytes", "cores"):
                total[c] = max(values)
            else:
                total[c] = round(sum(values), 3) if isinstance(values[0], float) else sum(values)
        total[PARTITION_COLUMN] = partition_bytes
        rows.append(total)
    return rows


def _partition_bytes(input_bytes, partitions, where: str):
    """The mean input partition size, rounded to a byte: "" when the input bytes or the partition count
    is unknown (a manifest without ``partitions``, or 0 of them)."""
    if input_bytes == "" or partitions is None:
        return ""
    _measurement(partitions, where)
    return round(input_bytes / partitions) if partitions else ""


def plot(stages: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    all_n = sorted({n for s in stages.values() for n in s["speedup"]})
    for stage, s in stages.items():
        ns = list(s["speedup"])
        style = {"linewidth": 2.5, "color": "black"} if stage == "total" else {}
        ax1.plot(ns, list(s["speedup"].values()), marker="o", label=f"{stage} (s={s['serial_fraction']:.2f})", **style)
        ax2.plot(ns, list(s["efficiency"].values()), marker="o", label=stage, **style)
    ax1.plot(all_n, [n / all_n[0] for n in all_n], linestyle="--", color="grey", label="ideal")
    ax1.set(xlabel="workers", ylabel="speedup", title="Strong scaling: speedup")
    ax2.axhline(1.0, linestyle="--", color="grey")
    ax2.set(xlabel="workers", ylabel="parallel efficiency", title="Parallel efficiency", ylim=(0, 1.15))
    for ax in (ax1, ax2):
        ax.set_xticks(all_n)
        ax.grid(alpha=0.3)
    ax1.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
