"""The whole pipeline at scale on a local cluster (issue 50, point 6): the scaling job's stages over
generated WARC pages, every setting at its default, 2 workers at --memory-limit 2GiB.

    .venv/bin/python jobs/data/make_bench_input.py --docs 1000000 --files 500 --output /work/bench/in-1m
    .venv/bin/python jobs/bench_pipeline_scale.py /work/bench/in-1m --output /work/bench/run-1m

Prints wall, CPU-seconds of the whole process tree, peak RSS per process, worker restarts, the load
average around the run, and per stage (from ``_reports/resources.json``) seconds, workers' CPU, the
largest worker's peak, Dask tasks and the head's CPU; writes the same as JSON beside the output.
"""

import argparse
import json
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "jobs"))


def main() -> int:
    from bench_dedup import run_cli_measured

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("input", help="a folder of WARC files (make_bench_input.py)")
    p.add_argument("--output", required=True)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--memory-limit", default="2GiB")
    args = p.parse_args()
    import shutil

    with open(os.path.join(ROOT, "jobs", "scaling.yaml")) as f:
        job = "name: pipeline-scale\n" + f.read().replace("out/bench-input/*.warc.gz",
                                                          os.path.join(os.path.abspath(args.input), "*.warc.gz"))
    shutil.rmtree(args.output, ignore_errors=True)  # a measured run starts from nothing
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(job)
    load_before = os.getloadavg()
    run = run_cli_measured(["--log-level", "WARNING", "run", f.name, "--output", args.output, "--cluster", "local",
                            "--workers", str(args.workers), "--memory-limit", args.memory_limit, "--force"],
                           args.workers)
    load_after = os.getloadavg()
    os.unlink(f.name)
    if run["exit"] != 0:
        print(run["log_tail"])
        return 1
    with open(os.path.join(args.output, "_reports", "resources.json")) as f:
        stages = json.load(f)["stages"]
    with open(os.path.join(args.output, "01-extract_warc", "_manifest.json")) as f:
        pages = json.load(f)["counts"]["in"]
    result = {"pages": pages, "wall": round(run["wall"], 1), "cpu": round(run["cpu"], 1),
              "cpu_ms_per_page": round(run["cpu"] / pages * 1000, 3), "wall_ms_per_page": round(run["wall"] / pages * 1000, 3),
              "peaks_mib": [(k, round(v / 2**20)) for k, v in run["peaks"][:4]], "restarts": run["restarts"],
              "restart_lines": run["restart_lines"], "load_before": load_before, "load_after": load_after,
              "stages": {k: {c: v.get(c) for c in ("seconds", "cpu_seconds", "peak_worker_bytes", "dask_tasks",
                                                  "client_cpu_seconds", "scheduler_cpu_seconds")}
                         for k, v in stages.items()}}
    print(json.dumps(result, indent=1))
    with open(args.output.rstrip("/") + ".json", "w") as f:
        json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
