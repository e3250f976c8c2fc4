"""What a worker costs before any work (issue 50, point 4): the scaling job over one WARC file of
``--pages`` pages (default 2: every stage runs, on next to nothing), on a local cluster of
``--workers`` workers, and each worker process's CPU-seconds over its whole life.

    .venv/bin/python jobs/bench_worker_cost.py --workers 1 --repeat 3

Prints per run the worker processes' CPU-s, the client's, and per stage the workers' CPU-s from
``_reports/resources.json``; then the medians. Run it alone: it is a benchmark.

    .venv/bin/python jobs/bench_worker_cost.py --cluster mpi --workers 2 --repeat 3

runs the same job under ``mpirun`` (rank 0 the scheduler, 1 the client, 2.. the workers) and prints
each rank's CPU-s, its children's included (a worker rank's extraction sandbox, every rank's
``--extract-memory`` probe), from the rank's own resource usage once it has ended.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "jobs"))


def main() -> int:
    from bench_dedup import run_cli_measured

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--pages", type=int, default=2)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--cluster", choices=("local", "mpi"), default="local")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="curate-worker-cost-") as tmp:
        data = os.path.join(tmp, "in")
        subprocess.run([sys.executable, os.path.join(ROOT, "jobs", "data", "make_bench_input.py"), "--docs",
                        str(args.pages), "--files", "1", "--output", data], check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(ROOT, "jobs", "scaling.yaml")) as f:
            job = f.read().replace("out/bench-input/*.warc.gz", os.path.join(data, "*.warc.gz"))
        job_path = os.path.join(tmp, "job.yaml")
        with open(job_path, "w") as f:
            f.write("name: worker-cost\n" + job)
        if args.cluster == "mpi":
            return mpi_runs(job_path, tmp, args)
        runs = []
        for i in range(args.repeat):
            out = os.path.join(tmp, f"out{i}")
            load = os.getloadavg()[0]
            run = run_cli_measured(["--log-level", "WARNING", "run", job_path, "--output", out, "--cluster", "local",
                                    "--workers", str(args.workers), "--force"], args.workers)
            if run["exit"] != 0:
                print(run["log_tail"])
                return 1
            with open(os.path.join(out, "_reports", "resources.json")) as f:
                stages = json.load(f)["stages"]
            workers = [c for k, c in run["cpu_by_process"] if k == "worker"]
            row = {"load": round(load, 2), "wall": round(run["wall"], 1), "main_cpu": round(run["main_cpu"], 2),
                   "worker_cpu": [round(c, 2) for c in workers],
                   "stage_worker_cpu": {k: round(v.get("cpu_seconds") or 0.0, 2) for k, v in stages.items()}}
            print(json.dumps(row))
            runs.append(row)
    per_worker = statistics.median(sum(r["worker_cpu"]) / max(1, len(r["worker_cpu"])) for r in runs)
    print(json.dumps({"median_worker_cpu": round(per_worker, 2),
                      "median_in_stages": round(statistics.median(sum(r["stage_worker_cpu"].values()) for r in runs)
                                                / args.workers, 2),
                      "median_main_cpu": round(statistics.median(r["main_cpu"] for r in runs), 2)}))
    return 0


#: run under mpirun as each rank: the curate command as a child, then the child's CPU-s (its own
#: children included) into rank-N.json; the rank's number from the launcher's environment
RANK_CPU = """
import json, os, resource, subprocess, sys
code = subprocess.call(sys.argv[2:])
r = resource.getrusage(resource.RUSAGE_CHILDREN)
rank = next(os.environ[v] for v in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK") if v in os.environ)
with open(os.path.join(sys.argv[1], f"rank-{rank}.json"), "w") as f:
    json.dump({"rank": int(rank), "cpu": r.ru_utime + r.ru_stime, "exit": code}, f)
sys.exit(code)
"""


def mpi_runs(job_path: str, tmp: str, args) -> int:
    import shutil
    import time

    mpirun = shutil.which("mpirun")
    if not mpirun:
        print("bench_worker_cost: no mpirun (scripts/setup.sh installs OpenMPI)", file=sys.stderr)
        return 2
    ranks = args.workers + 2
    cmd = [mpirun, "-np", str(ranks), "--oversubscribe", *(["--allow-run-as-root"] if os.geteuid() == 0 else []),
           *(["-x", "PYTHONPATH"] if "PYTHONPATH" in os.environ else [])]
    runs = []
    for i in range(args.repeat):
        folder = os.path.join(tmp, f"ranks{i}")
        os.makedirs(folder)
        load, t = os.getloadavg()[0], time.perf_counter()
        proc = subprocess.run([*cmd, sys.executable, "-c", RANK_CPU, folder, sys.executable, "-m", "curate",
                               "--log-level", "WARNING", "run", job_path, "--output", os.path.join(tmp, f"out{i}"),
                               "--cluster", "mpi", "--force"], cwd=ROOT, capture_output=True, text=True)
        if proc.returncode != 0:
            print(proc.stdout[-3000:], proc.stderr[-3000:])
            return 1
        by_rank = {}
        for name in os.listdir(folder):
            with open(os.path.join(folder, name)) as f:
                r = json.load(f)
            by_rank[r["rank"]] = round(r["cpu"], 2)
        row = {"load": round(load, 2), "wall": round(time.perf_counter() - t, 1), "scheduler_cpu": by_rank.get(0),
               "client_cpu": by_rank.get(1), "worker_cpu": [by_rank[k] for k in sorted(by_rank) if k >= 2]}
        print(json.dumps(row))
        runs.append(row)
    print(json.dumps({"median_worker_cpu": round(statistics.median(
        sum(r["worker_cpu"]) / max(1, len(r["worker_cpu"])) for r in runs), 2),
        "median_scheduler_cpu": round(statistics.median(r["scheduler_cpu"] for r in runs), 2),
        "median_client_cpu": round(statistics.median(r["client_cpu"] for r in runs), 2)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
