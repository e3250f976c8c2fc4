"""Benchmarks.

``curate bench scaling JOB.yaml --workers 1,2,4 [--repeat 3] --output DIR``: strong scaling on a local
cluster (scaling.csv, scaling.json, scaling.png, Amdahl fit). ``curate bench record JOB_OUTPUT --csv
FILE --label nodes=4``: append the per-stage times of a finished job to a CSV (used by
slurm/strong_scaling.sbatch); refused (exit 2) when the CSV's header is not these rows' columns (one
written before a column was added included: start a new CSV), or a label is given twice or takes a
measured column's name; a measurement that is not a finite number >= 0 is bad data (exit 1), and
nothing is written either way. ``curate bench summarise DIR``: DIR/scaling.csv of a node sweep ->
scaling.json and scaling.png (median per point, speedup, efficiency, Amdahl fit and residuals, weak
scaling). ``curate bench weak-job JOB --files N --output NEW.yaml``: the job reading only its first N
input files (weak scaling). The per-stage speed benchmarks are scripts in jobs/ (bench_*.py).
"""

from __future__ import annotations

import os

from curate.stages.errors import SettingsError

HELP = "benchmarks: strong scaling (local), record a job's stage times, summarise a node sweep"


def _int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise SettingsError(f"--workers must be a comma-separated list of integers; got {text!r}") from None
    if not values or min(values) < 1:
        raise SettingsError(f"--workers must list positive integers; got {text!r}")
    return sorted(set(values))


def _labels(text: str) -> dict[str, str]:
    labels = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep or not key:
            raise SettingsError(f"--label must look like key=value[,key=value]; got {text!r}")
        if key in labels:
            raise SettingsError(f"--label {key}: given twice ({key}={labels[key]}, {key}={value})")
        labels[key] = value
    return labels


def add_arguments(p) -> None:
    sub = p.add_subparsers(dest="bench", metavar="KIND", required=True, parser_class=type(p))
    s = sub.add_parser("scaling", help="strong scaling of a job on a local cluster")
    s.add_argument("job", help="job YAML")
    s.add_argument("--workers", default="1,2", help="worker counts, comma-separated (default 1,2)")
    s.add_argument("--repeat", type=int, default=3, help="runs per worker count; the best counts (default 3)")
    s.add_argument("--output", required=True, help="folder for runs/, scaling.csv, scaling.json, scaling.png")
    s.add_argument("--threads-per-worker", type=int, default=1)
    s.add_argument("--memory-limit", default=None)
    r = sub.add_parser("record", help="append a finished job's per-stage times to a CSV")
    r.add_argument("job_output", help="a job's output folder (with NN-stage folders)")
    r.add_argument("--csv", required=True, help="CSV file to append to")
    r.add_argument("--label", default="", help="extra columns, e.g. nodes=4,tasks=64")
    m = sub.add_parser("summarise", help="scaling.csv of a node sweep -> scaling.json, scaling.png")
    m.add_argument("folder", help="folder with scaling.csv (slurm/strong_scaling.sbatch's output folder)")
    w = sub.add_parser("weak-job", help="write a copy of a job that reads only its first N input files")
    w.add_argument("job", help="job YAML")
    w.add_argument("--files", type=int, required=True, help="how many input files (in sorted order)")
    w.add_argument("--output", required=True, help="the new job YAML")


def main(args) -> int:
    from curate.app import bench, scaling

    if args.bench == "summarise":
        if not os.path.isfile(os.path.join(args.folder, "scaling.csv")):
            raise SettingsError(f"{args.folder}: no scaling.csv")
        summary = scaling.write_summary(args.folder)
        print(scaling.format_summary(summary))
        print(f"bench: wrote {os.path.join(args.folder, 'scaling.json')} and scaling.png")
        return 0
    if args.bench == "weak-job":
        if args.files < 1:
            raise SettingsError(f"--files must be at least 1; got {args.files}")
        files = scaling.write_weak_job(args.job, args.files, args.output)
        print(f"bench: {args.output} reads {len(files)} file(s): {files[0]} .. {files[-1]}")
        return 0
    if args.bench == "record":
        if not os.path.isdir(args.job_output):
            raise SettingsError(f"{args.job_output}: no such directory")
        if os.path.isdir(args.csv):
            raise SettingsError(f"--csv {args.csv}: a directory, not a CSV file")
        labels = _labels(args.label)
        bench.check_append(args.csv, bench.columns(labels))
        rows = bench.record_rows(args.job_output, labels)
        if not rows:
            raise SettingsError(f"{args.job_output}: no finished stage folders (NN-stage/_manifest.json)")
        bench.write_csv(args.csv, rows, append=True)
        print(f"bench: {len(rows)} row(s) appended to {args.csv}")
        return 0
    if args.repeat < 1:
        raise SettingsError(f"--repeat must be at least 1; got {args.repeat}")
    workers = _int_list(args.workers)
    result = bench.run_scaling(args.job, workers, args.repeat, args.output,
                               {"threads_per_worker": args.threads_per_worker, "memory_limit": args.memory_limit})
    print(format_summary(result))
    print(f"bench: wrote {os.path.join(args.output, 'scaling.csv')}, scaling.json and scaling.png")
    return 0


def format_summary(result: dict) -> str:
    ns = result["workers"]
    head = ["stage"] + [f"{n}w s" for n in ns] + [f"eff@{n}" for n in ns[1:]] + ["serial"] + \
        [f"S({n})" for n in (64, 256, 1024)]
    rows = [head]
    for stage, s in result["stages"].items():
        rows.append([stage] + [f"{s['seconds'].get(n, float('nan')):.2f}" for n in ns]
                    + [f"{s['efficiency'].get(n, float('nan')):.0%}" for n in ns[1:]]
                    + [f"{s['serial_fraction']:.3f}"] + [f"{v:.1f}" for v in s["predicted_speedup"].values()])
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.append(f"Predictions: {result['assumption']}")
    return "\n".join(lines)
