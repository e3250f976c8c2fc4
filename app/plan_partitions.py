"""The partition size in a plan: tasks, the head's share and a worker's peak as functions of it.

The model (docs/plan.md, "The model", says it with the rest):

- A calibration row may carry ``partition_bytes``, the run's mean input partition size (input bytes /
  the first stage's partitions, written by ``curate bench record``). On the target, at partition size
  ``P`` against the calibration's ``P0``, a stage's tasks and the head's share of its serial part scale
  with ``r x P0 / P`` (``r`` the input ratio): as many partitions, as many tasks. The parallel work does
  not change with the partition size.
- A worker's peak memory per stage: measured at two or more partition sizes, it is the least-squares
  line ``peak = p0 + k x P`` (``k``, ``p0`` >= 0, clamped as :func:`curate.app.plan.fit` clamps); at one
  size it is the measured peak, whatever ``P`` (its growth was not measured: the plan says so and marks
  it, ``peak_measured_at``).
- For each node count, the plan names the smallest candidate size (powers of two from 16 MiB to
  16 GiB, and the calibration's size) at which no stage is scheduler-bound (its head share does not
  exceed its parallel part), with a worker's largest peak at that size and whether it fits.

Pure computation, no import of app/plan.py (which imports this).
"""

from __future__ import annotations

#: the sizes the plan scans for the smallest one at which no stage is scheduler-bound: 16 MiB .. 16 GiB
CANDIDATES = tuple(2**k for k in range(24, 35))


def fit_peak(points) -> tuple[float, float]:
    """(p0, k) of peak = p0 + k x partition bytes by least squares over (partition bytes, peak) points at
    two or more distinct sizes, both kept >= 0: a peak that falls with the size is the mean peak (k = 0),
    a line that would start below 0 goes through the origin."""
    xs, ys = [float(x) for x, _ in points], [float(y) for _, y in points]
    if len(set(xs)) < 2:
        raise ValueError("fit_peak needs points at two or more partition sizes")
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    k = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    p0 = my - k * mx
    if k < 0:
        return my, 0.0
    if p0 < 0:
        return 0.0, sum(x * y for x, y in zip(xs, ys)) / sum(x * x for x in xs)
    return p0, k


def peak_at(peaks, measured_peak, size) -> tuple[float | None, float | None, dict | None]:
    """A worker's peak at partition size ``size``: (peak, the size it was measured at, the fit).

    ``peaks``: the stage's (partition bytes, largest peak at that size) points. Two or more: the fitted
    line at ``size`` (measured at None: predicted). One: the measured peak, measured at that size.
    None (a calibration without partition_bytes): ``measured_peak`` at an unknown size."""
    if len(peaks) >= 2:
        p0, k = fit_peak(peaks)
        return p0 + k * size, None, {"base_bytes": p0, "bytes_per_partition_byte": k, "sizes": len(peaks)}
    if len(peaks) == 1:
        return peaks[0][1], peaks[0][0], None
    return measured_peak, None, None


def candidates(calibration_bytes: float | None) -> list[int]:
    """The sizes to scan, smallest first: CANDIDATES and the calibration's size."""
    extra = {round(calibration_bytes)} if calibration_bytes else set()
    return sorted(set(CANDIDATES) | extra)


def smallest_unbound(at, sizes, memory_per_worker: float) -> dict:
    """The smallest of ``sizes`` at which no stage's head share exceeds its parallel part.

    ``at(size)``: the stages' predictions at that partition size (``head_seconds``,
    ``parallel_seconds``, ``peak_worker_bytes``, ``peak_measured_at``). Returns ``bytes`` (None when no
    size does), the largest ``peak_worker_bytes`` of a worker there (None when no stage measured one),
    ``peak_measured_at`` (that peak's size when it was not fitted: the peak there is then unknown) and
    ``fits`` (the peak within ``memory_per_worker``; None when unknown)."""
    for size in sizes:
        stages = at(size)
        if any(p["head_seconds"] > p["parallel_seconds"] for p in stages):
            continue
        peaks = [p for p in stages if p["peak_worker_bytes"] is not None]
        top = max(peaks, key=lambda p: p["peak_worker_bytes"]) if peaks else None
        peak = top["peak_worker_bytes"] if top else None
        return {"bytes": size, "peak_worker_bytes": peak, "peak_measured_at": top["peak_measured_at"] if top else None,
                "fits": None if peak is None else peak <= memory_per_worker}
    return {"bytes": None, "peak_worker_bytes": None, "peak_measured_at": None, "fits": None}


def notes(cals, calibration_bytes, target_bytes, from_option: bool) -> list[str]:
    """The assumptions the partition size adds to a plan."""
    if not calibration_bytes:
        said = ("partition size: unknown (no calibration row has partition_bytes): tasks and the head's share "
                "scale with the input ratio alone, a worker's peak is the calibration's, and no partition size "
                "is named")
        return [said + ("; --partition-size is not applied" if from_option else "")]
    said = (f"{round(target_bytes):,} bytes (--partition-size; the calibration's mean {round(calibration_bytes):,})"
            if from_option else f"the calibration's mean, {round(calibration_bytes):,} bytes")
    out = [f"partition size: {said}: tasks and the head's share scale with the input ratio x the calibration's "
           "partition size / this one; the parallel work does not change with it"]
    one = [c.name for c in cals if len(c.peaks) == 1]
    fitted = [c.name for c in cals if len(c.peaks) >= 2]
    unknown = [c.name for c in cals if not c.peaks and "peak_worker_bytes" in c.values]
    if fitted:
        out.append(f"peak memory per worker of {', '.join(fitted)}: fitted as p0 + k x partition size over the "
                   "calibration's partition sizes")
    if one:
        out.append(f"peak memory per worker of {', '.join(one)}: measured at one partition size only, so its growth "
                   "with partition size was not measured and the peak at another size is unknown; printed as the "
                   "measured one (marked *, peak_measured_at in JSON)")
    if unknown:
        out.append(f"peak memory per worker of {', '.join(unknown)}: measured in rows without partition_bytes; "
                   "taken as unchanged by partition size")
    return out
