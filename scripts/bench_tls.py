"""What TLS costs: the same job on the same local cluster shape, TLS (curate's default) against
plain TCP (what curate never starts itself), alternating in one run so that both see the same machine.

    .venv/bin/python scripts/bench_tls.py jobs/sample.yaml [more jobs] --workers 2 --repeat 3 --output out/tls

Prints the worker-to-worker transfer rate (the comms alone, TLS's worst case), then one line per job:
median seconds with and without TLS and their ratio (README, "Security model").
The TCP cluster is made here, for the measurement only; curate has no setting to turn TLS off.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def run_once(job_path: str, output: str, client) -> float:
    from curate.app import runner

    job = runner.load_job(job_path)
    shutil.rmtree(output, ignore_errors=True)
    start = time.perf_counter()
    runner.run_job(job, output, compute=runner.make_compute(client, show_progress=False), force=True)
    return time.perf_counter() - start


def transfer_rate(client, mib: int = 64, repeat: int = 5) -> float:
    """MiB/s of one worker fetching a block from another: the comms alone, TLS's worst case."""
    import numpy as np
    from distributed import wait

    a, b = list(client.scheduler_info()["workers"])[:2]
    rates = []
    for i in range(repeat):
        block = client.submit(np.full, mib * 2**20, i, dtype="u1", workers=[a], pure=False)
        wait(block)
        start = time.perf_counter()
        client.submit(lambda x: int(x[-1]), block, workers=[b], pure=False).result()
        rates.append(mib / (time.perf_counter() - start))
        del block
    return statistics.median(rates)


def start_cluster(workers: int, tls: bool):
    from distributed import Client, LocalCluster

    from curate.app.cluster import cluster_security

    kwargs = {"protocol": "tls://", "security": cluster_security()} if tls else {"protocol": "tcp://"}
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                           dashboard_address="127.0.0.1:0", **kwargs)
    return cluster, Client(cluster)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("jobs", nargs="*")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--output", default="out/tls")
    args = p.parse_args()
    from curate.app import logs

    logs.setup("WARNING")
    # both clusters stay up for the whole run (idle, one costs the other nothing) so that every
    # measurement is of the job alone; the worker processes are new for each job file
    clusters = {tls: start_cluster(2, tls) for tls in (True, False)}
    rates = {tls: [] for tls in clusters}
    for r in range(3):
        for tls in ((True, False) if r % 2 == 0 else (False, True)):
            rates[tls].append(transfer_rate(clusters[tls][1]))
    for cluster, client in clusters.values():
        with contextlib.suppress(Exception):
            client.close()
            cluster.close(timeout=60)
    on, off = statistics.median(rates[True]), statistics.median(rates[False])
    print(f"64 MiB worker-to-worker: TLS {on:.0f} MiB/s, TCP {off:.0f} MiB/s, TLS/TCP {on / off:.3f}", flush=True)

    for job in args.jobs:
        clusters = {tls: start_cluster(args.workers, tls) for tls in (True, False)}
        seconds = {True: [], False: []}
        try:
            for r in range(args.repeat):
                # alternate which goes first so that a warming cache or a noisy neighbour favours neither
                for tls in ((True, False) if r % 2 == 0 else (False, True)):
                    out = os.path.join(args.output, "tls" if tls else "tcp")
                    seconds[tls].append(run_once(job, out, clusters[tls][1]))
                    print(f"  {job} {'TLS' if tls else 'TCP'} run {r + 1}: {seconds[tls][-1]:.1f}s", flush=True)
        finally:
            for cluster, client in clusters.values():
                with contextlib.suppress(Exception):
                    client.close()
                    cluster.close(timeout=60)
        on, off = statistics.median(seconds[True]), statistics.median(seconds[False])
        print(f"{job}: {args.workers} workers, median of {args.repeat}: TLS {on:.1f}s, TCP {off:.1f}s, "
              f"TLS/TCP {on / off:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
