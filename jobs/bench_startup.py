"""Fixed cost of a run: CPU time and memory of the client and the workers before the first document.

    .venv/bin/python jobs/bench_startup.py [--workers 2]

Prints, for the client process: CPU seconds and RSS after importing the settings layer (pandas),
after building one command's parser (what ``curate tokenize ...`` builds), then the whole CLI parser
(``curate --help``), after importing dask.dataframe + distributed, and after starting
a local cluster; for each worker: RSS and modules loaded when idle, then after its first MinHash
call (pandas, pyarrow, numba and the cached kernels). CPU seconds, not wall time, so that other load
on a shared machine does not count; the cluster start is also given in wall seconds.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def rss() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def info():
    return round(rss()), len(sys.modules), round(cpu(), 2)


def first_minhash():
    from curate.stages.dedup import minhash

    minhash.signatures(["a b c d e f"], 16)
    return info()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workers", type=int, default=2)
    args = p.parse_args()
    t0 = cpu()
    import curate.stages.stage  # noqa: F401

    t1 = cpu()
    print(f"client: import curate.stages.stage (pandas): {t1 - t0:.2f} s CPU, {rss():.0f} MiB")
    import curate.app.cli

    curate.app.cli.build_parser(curate.app.cli.command_of(["tokenize"]))
    t15 = cpu()
    print(f"client: build one command's parser (curate tokenize ...): {t15 - t1:.2f} s CPU, {rss():.0f} MiB, "
          f"{len(sys.modules)} modules")
    curate.app.cli.build_parser()
    t2 = cpu()
    print(f"client: build the whole CLI parser (every stage; curate --help): {t2 - t15:.2f} s CPU more, "
          f"{rss():.0f} MiB, {len(sys.modules)} modules")
    import dask.dataframe  # noqa: F401
    import distributed  # noqa: F401

    t3 = cpu()
    print(f"client: import dask.dataframe + distributed: {t3 - t2:.2f} s CPU, {rss():.0f} MiB")
    from curate.app.cluster import ClusterSettings, connect

    wall = time.perf_counter()
    with connect(ClusterSettings(mode="local", workers=args.workers, threads_per_worker=1,
                                 dashboard_address="127.0.0.1:0")) as client:
        started = time.perf_counter() - wall
        print(f"client: local cluster of {args.workers} started in {started:.2f} s wall, {cpu() - t3:.2f} s CPU, "
              f"{rss():.0f} MiB")
        for w, (mib, mods, c) in client.run(info).items():
            print(f"worker {w}: idle {mib} MiB, {mods} modules, {c} s CPU")
        wall = time.perf_counter()
        ran = client.run(first_minhash)
        print(f"workers: first MinHash call {time.perf_counter() - wall:.2f} s wall")
        for w, (mib, mods, c) in ran.items():
            print(f"worker {w}: after it {mib} MiB, {mods} modules, {c} s CPU in total")
    return 0


if __name__ == "__main__":
    sys.exit(main())
