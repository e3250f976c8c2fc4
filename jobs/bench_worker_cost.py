"""What a worker costs before any work (issue 50, point 4): the scaling job over one WARC file of
``--pages`` pages (default 2: every stage runs, on next to nothing), on a local cluster of
``--workers`` workers, and each worker process's CPU-seconds over its whole life.

    .venv/bin/python jobs/bench_worker_cost.py --workers 1 --repeat 3

Prints per run the worker processes' CPU-s, the client's, and per stage the workers' CPU-s from
``_reports/resources.json``; then the medians. Run it alone: it is a benchmark.
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


if __name__ == "__main__":
    sys.exit(main())
