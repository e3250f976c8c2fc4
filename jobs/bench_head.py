"""What the head (the client process and the scheduler it hosts) costs per input partition (issue 50).

    .venv/bin/python jobs/data/make_bench_input.py --docs 6000 --files 24 --output /tmp/head-24
    .venv/bin/python jobs/data/make_bench_input.py --docs 6000 --files 96 --output /tmp/head-96
    .venv/bin/python jobs/bench_head.py /tmp/head-24 /tmp/head-96 [--repeat 2] [--checkout OTHER_CLONE]

Runs the scaling job (jobs/scaling.yaml's stages) over each input on a local cluster of 2 workers,
alternating inputs (and checkouts, with --checkout: an earlier clone run with this venv), and reports
per run: the client process's own CPU-seconds (children, i.e. the workers, excluded; sampled from
/proc every 0.2 s), the workers' CPU-seconds, the Dask tasks per input partition (resources.json),
wall seconds and the load average. The head's cost per added partition is the growth of the client's
CPU between the inputs divided by the growth of their partition count.
"""

import argparse
import glob
import json
import os
import statistics
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "jobs"))


def one(folder: str, checkout: str, out: str) -> dict:
    from bench_dedup import run_cli_measured

    with open(os.path.join(ROOT, "jobs", "scaling.yaml")) as f:
        job = "name: bench-head\n" + f.read().replace("out/bench-input/*.warc.gz",
                                                     os.path.join(os.path.abspath(folder), "*.warc.gz"))
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(job)
    os.environ["CURATE_BENCH_CWD"] = checkout
    os.environ["PYTHONPATH"] = checkout
    load = os.getloadavg()[0]
    import shutil

    shutil.rmtree(out, ignore_errors=True)
    run = run_cli_measured(["--log-level", "WARNING", "run", f.name, "--output", out, "--cluster", "local",
                            "--workers", "2", "--force"], 2)
    os.unlink(f.name)
    if run["exit"] != 0:
        raise SystemExit(run["log_tail"])
    files = len(glob.glob(os.path.join(folder, "*.warc.gz")))
    with open(os.path.join(out, "_reports", "resources.json")) as f:
        stages = json.load(f)["stages"]
    return {"files": files, "checkout": checkout, "client_cpu": round(run["main_cpu"], 2),
            "workers_cpu": round(sum(s["cpu_seconds"] for s in stages.values()), 2),
            "tasks_per_partition": round(sum(s.get("dask_tasks", 0) for s in stages.values()) / files, 1),
            "wall": round(run["wall"], 1), "load": round(load, 2)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("inputs", nargs="+", help="WARC folders of the same pages in different file counts")
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--checkout", action="append", default=[], help="another clone to run side by side")
    p.add_argument("--workdir", default="/tmp/curate-bench-head")
    args = p.parse_args()
    rows = []
    for _ in range(args.repeat):
        for checkout in [ROOT, *args.checkout]:
            for folder in args.inputs:
                row = one(folder, checkout, os.path.join(args.workdir, "out"))
                print(json.dumps(row), flush=True)
                rows.append(row)
    print("\nmedians:")
    for checkout in [ROOT, *args.checkout]:
        med = {}
        for folder in args.inputs:
            mine = [x for x in rows if x["checkout"] == checkout and x["files"] == len(glob.glob(os.path.join(folder, "*.warc.gz")))]
            med[folder] = {k: statistics.median(x[k] for x in mine) for k in ("client_cpu", "workers_cpu", "wall", "load")}
            med[folder]["tasks_per_partition"] = mine[0]["tasks_per_partition"]
            med[folder]["files"] = mine[0]["files"]
            print(checkout, json.dumps(med[folder]))
        a, b = (med[f] for f in (args.inputs[0], args.inputs[-1]))
        if b["files"] != a["files"]:
            per = (b["client_cpu"] - a["client_cpu"]) / (b["files"] - a["files"]) * 1000
            print(f"{checkout}: client CPU per added partition: {per:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
