"""Scaling across nodes: the summary of a SLURM sweep (slurm/strong_scaling.sbatch's scaling.csv).

The CSV has one row per run and stage (``curate bench record``); the columns are read by name, so a
CSV with more columns than these works too: ``nodes``, ``stage``, ``seconds``, ``exit_code`` and,
when present, ``scaling`` (``strong`` or ``weak``; strong when absent) and ``repeat``. Runs that did
not end with exit code 0 are left out. Per mode, stage and node count the median of the repeats
counts (the middle of the runs, not the luckiest one).

Strong scaling (same input at every node count): speedup S(n) = T(1) / T(n) (T(1) extrapolated as
n0 * T(n0) when the smallest count n0 is not 1), efficiency S(n) / n, and Amdahl's serial fraction s,
S(n) = 1 / (s + (1 - s) / n), fitted by least squares over all the points, with the fit's relative
residual at each point: predicted seconds / measured seconds - 1.

Weak scaling (input proportional to the node count): wall time relative to the smallest count's;
ideal is 1, the target within 15 %.

Pure functions but ``plot`` and the file helpers; ``curate bench summarise DIR`` writes scaling.json
and scaling.png from DIR/scaling.csv.
"""

from __future__ import annotations

import csv
import glob
import json
import os

WEAK_TARGET = 0.15


def amdahl_fit(speedups: dict[int, float]) -> float:
    """Serial fraction s in [0, 1] from {workers or nodes: speedup relative to one}.

    1/S(n) - 1/n = s (1 - 1/n): a least-squares line through the origin over the points (n = 1 adds
    nothing: both sides are 0 there)."""
    num = den = 0.0
    for n, sp in speedups.items():
        if n <= 1 or sp <= 0:
            continue
        x = 1.0 - 1.0 / n
        num += (1.0 / sp - 1.0 / n) * x
        den += x * x
    if den == 0:
        return 0.0
    return min(1.0, max(0.0, num / den))


def amdahl_speedup(s: float, n: int) -> float:
    return 1.0 / (s + (1.0 - s) / n)


def median(values: list[float]) -> float:
    v = sorted(values)
    mid = len(v) // 2
    return v[mid] if len(v) % 2 else (v[mid - 1] + v[mid]) / 2


def read_csv(path: str) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def medians(rows: list[dict], mode: str) -> dict[str, dict[int, float]]:
    """{stage: {nodes: median seconds}} over the rows of one mode that ended with exit code 0."""
    found: dict[str, dict[int, list[float]]] = {}
    for r in rows:
        if (r.get("scaling") or "strong") != mode or str(r.get("exit_code", "0")).strip() not in ("0", ""):
            continue
        found.setdefault(r["stage"], {}).setdefault(int(r["nodes"]), []).append(float(r["seconds"]))
    return {stage: {n: median(ts) for n, ts in sorted(per.items())} for stage, per in found.items()}


def strong(times: dict[int, float]) -> dict:
    """Seconds, speedup, efficiency, the Amdahl fit and its relative residual per node count."""
    n0 = min(times)
    base = times[n0] * n0
    speedup = {n: base / t if t > 0 else 0.0 for n, t in times.items()}
    s = amdahl_fit(speedup)
    predicted = {n: base * (s + (1.0 - s) / n) for n in times}
    return {
        "seconds": {n: round(t, 3) for n, t in times.items()},
        "speedup": {n: round(v, 3) for n, v in speedup.items()},
        "efficiency": {n: round(v / n, 3) for n, v in speedup.items()},
        "serial_fraction": round(s, 4),
        "predicted_seconds": {n: round(p, 3) for n, p in predicted.items()},
        "residual": {n: round(predicted[n] / t - 1.0, 4) if t > 0 else None for n, t in times.items()},
        "baseline_nodes": n0,
    }


def weak(times: dict[int, float]) -> dict:
    """Seconds and wall time relative to the smallest node count's; within target if <= 15 % off."""
    n0 = min(times)
    rel = {n: t / times[n0] if times[n0] > 0 else 0.0 for n, t in times.items()}
    return {
        "seconds": {n: round(t, 3) for n, t in times.items()},
        "relative": {n: round(v, 3) for n, v in rel.items()},
        "within_target": {n: abs(v - 1.0) <= WEAK_TARGET for n, v in rel.items()},
        "target": WEAK_TARGET,
        "baseline_nodes": n0,
    }


def summarise(rows: list[dict]) -> dict:
    """{"strong": {stage: strong(...)}, "weak": {stage: weak(...)}, "runs": {mode: runs counted}}."""
    result: dict = {"strong": {}, "weak": {}, "runs": {}}
    for mode, fn in (("strong", strong), ("weak", weak)):
        per_stage = medians(rows, mode)
        result[mode] = {stage: fn(times) for stage, times in per_stage.items()}
        result["runs"][mode] = sum(1 for r in rows if (r.get("scaling") or "strong") == mode and r["stage"] == "total")
    return result


def expand_inputs(patterns: list[str]) -> list[str]:
    """A job's input paths and globs as a sorted list of files (the order `curate run` reads them)."""
    files = []
    for p in patterns:
        files += sorted(glob.glob(p)) if glob.has_magic(p) else [p]
    return files


def subset_job(doc: dict, files: list[str]) -> dict:
    """The job document reading exactly these files (weak scaling: the first k x F input files)."""
    return {**doc, "input": list(files)}


def write_weak_job(job_path: str, count: int, output: str) -> list[str]:
    """Write a copy of the job that reads only its first ``count`` input files; return them."""
    import yaml

    from curate.stages.errors import SettingsError

    with open(job_path) as f:
        doc = yaml.safe_load(f)
    inputs = doc.get("input")
    files = expand_inputs([inputs] if isinstance(inputs, str) else list(inputs or []))
    if len(files) < count:
        raise SettingsError(f"{job_path}: weak scaling needs {count} input files; the job's input has {len(files)}")
    with open(output, "w") as f:
        yaml.safe_dump(subset_job(doc, files[:count]), f, sort_keys=False)
    return files[:count]


def write_summary(folder: str) -> dict:
    """scaling.csv in ``folder`` -> scaling.json and scaling.png there; returns the summary."""
    summary = summarise(read_csv(os.path.join(folder, "scaling.csv")))
    with open(os.path.join(folder, "scaling.json"), "w") as f:
        json.dump(summary, f, indent=2)
    plot(summary, os.path.join(folder, "scaling.png"))
    return summary


def format_summary(summary: dict) -> str:
    lines = []
    for stage, s in summary["strong"].items():
        points = "  ".join(f"{n}n {s['seconds'][n]:.1f}s x{s['speedup'][n]:.2f} eff {s['efficiency'][n]:.0%} "
                           f"res {s['residual'][n]:+.0%}" for n in s["seconds"])
        lines.append(f"strong {stage:<18} serial {s['serial_fraction']:.3f}  {points}")
    for stage, s in summary["weak"].items():
        points = "  ".join(f"{n}n {s['seconds'][n]:.1f}s {s['relative'][n]:.2f}{'' if s['within_target'][n] else '!'}"
                           for n in s["seconds"])
        lines.append(f"weak   {stage:<18} {points}  (! more than {WEAK_TARGET:.0%} off the baseline)")
    return "\n".join(lines) or "no successful runs in scaling.csv"


def plot(summary: dict, path: str) -> None:
    """Seconds, speedup (with the Amdahl fit) and efficiency per stage; weak scaling's relative time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = 4 if summary["weak"] else 3
    fig, axes = plt.subplots(1, panels, figsize=(4.2 * panels, 4.2))
    for stage, s in summary["strong"].items():
        ns = list(s["seconds"])
        style = {"linewidth": 2.5, "color": "black"} if stage == "total" else {}
        axes[0].plot(ns, list(s["seconds"].values()), marker="o", label=stage, **style)
        line = axes[1].plot(ns, list(s["speedup"].values()), marker="o", label=f"{stage} (s={s['serial_fraction']:.2f})",
                            **style)
        fit = [s["predicted_seconds"][n] for n in ns]
        axes[1].plot(ns, [s["seconds"][ns[0]] * ns[0] / p if p else 0 for p in fit], linestyle=":",
                     color=line[0].get_color())
        axes[2].plot(ns, list(s["efficiency"].values()), marker="o", label=stage, **style)
    all_n = sorted({n for s in summary["strong"].values() for n in s["seconds"]})
    if all_n:
        axes[1].plot(all_n, all_n, linestyle="--", color="grey", label="ideal")
    axes[0].set(xlabel="worker nodes", ylabel="seconds (median)", title="Strong scaling: time", yscale="log")
    axes[1].set(xlabel="worker nodes", ylabel="speedup", title="Speedup (dotted: Amdahl fit)")
    axes[2].axhline(1.0, linestyle="--", color="grey")
    axes[2].set(xlabel="worker nodes", ylabel="parallel efficiency", title="Efficiency", ylim=(0, 1.15))
    if panels == 4:
        for stage, s in summary["weak"].items():
            style = {"linewidth": 2.5, "color": "black"} if stage == "total" else {}
            axes[3].plot(list(s["relative"]), list(s["relative"].values()), marker="o", label=stage, **style)
        axes[3].axhspan(1 - WEAK_TARGET, 1 + WEAK_TARGET, color="green", alpha=0.1)
        axes[3].set(xlabel="worker nodes (input x nodes)", ylabel="time / 1-node time", title="Weak scaling")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
