"""What the extraction sandbox costs on the normal path: ``extract_warc_file`` with ``--extract-timeout``
5 (pages in a child process) against 0 (in process), alternated, on the same WARC files.

    .venv/bin/python jobs/data/make_bench_input.py --docs 8000 --files 4 --output out/bench-sandbox
    .venv/bin/python jobs/bench_sandbox.py out/bench-sandbox/*.warc.gz [--repeat 5]

Per run: wall seconds and CPU seconds of this process and its children (the sandbox's child is one),
for every file in turn, one after the other (one core), after a warm-up that also starts the sandbox's
child (it lives as long as the worker thread). Prints the medians, the ratio and the load average;
the target is at most 5% more.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def cpu() -> float:
    """CPU seconds of this process, its reaped children, and the sandbox children still running
    (they live as long as the thread: read from /proc)."""
    from curate.stages.extract import sandbox

    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    total = own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
    tick = os.sysconf("SC_CLK_TCK")
    for box in sandbox._ALL:
        proc = box._proc
        if proc is not None and proc.poll() is None:
            fields = open(f"/proc/{proc.pid}/stat").read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return total


def one(files, timeout: float) -> tuple[float, float, int]:
    from curate.stages.extract import RawFile
    from curate.stages.extract.warc import ExtractWarcSettings, extract_warc_file

    settings = ExtractWarcSettings(extract_timeout=timeout)
    wall, c, docs = time.perf_counter(), cpu(), 0
    for path in files:
        df = extract_warc_file(RawFile(path, os.path.basename(path)), settings, on_error="skip")
        docs += int(df["_reason"].isna().sum()) if "_reason" in df.columns else len(df)
        if "_reason" in df.columns:  # what no run should reject (timeout, too_large, a crash), named
            for reason, detail in df.loc[df["_reason"].isin(["timeout", "too_large", "extract_error"]),
                                         ["_reason", "_detail"]].itertuples(index=False):
                print(f"--extract-timeout {timeout:g}: {reason}: {detail}", file=sys.stderr)
    return time.perf_counter() - wall, cpu() - c, docs


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("files", nargs="+")
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    one(args.files[:1], 0)  # warm-up: imports, stop lists, language model
    one(args.files[:1], 5)  # and the sandbox's child, which a worker thread keeps
    runs = {0.0: [], 5.0: []}
    for _ in range(args.repeat):
        for timeout in runs:
            runs[timeout].append(one(args.files, timeout))
    docs = runs[0.0][0][2]
    assert all(r[2] == docs for rs in runs.values() for r in rs), "the two paths kept different documents"
    med = {t: (statistics.median(r[0] for r in rs), statistics.median(r[1] for r in rs)) for t, rs in runs.items()}
    print(f"{len(args.files)} files, {docs:,} documents kept; median of {args.repeat}, alternated; "
          f"load average {os.getloadavg()[0]:.2f}")
    print("| path | wall s | CPU s (process + children) | docs/s per CPU-second |")
    print("|---|---|---|---|")
    for t, name in ((0.0, "in process (--extract-timeout 0)"), (5.0, "sandboxed (--extract-timeout 5)")):
        print(f"| {name} | {med[t][0]:.2f} | {med[t][1]:.2f} | {docs / med[t][1]:,.0f} |")
    print(f"\nsandbox / in process: wall {med[5.0][0] / med[0.0][0]:.3f}, CPU {med[5.0][1] / med[0.0][1]:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
