"""Scaling sweeps of the whole pipeline on emulated nodes of a fixed size (scripts/minicluster.sh), as a
user would run them: sbatch slurm/strong_scaling.sbatch, dask-mpi, a head node for the scheduler and
the job. Run it as root from the repository root, alone on the machine (it measures time):

    python jobs/bench_cluster.py sweep --nodes 1,2,3,4,6 --node-cpus 0.25 --node-memory 3GiB --pages 20000 \\
        --repeat 2 --output out/cluster-sweep
    python jobs/bench_cluster.py weak --nodes 1,2,4,6 --node-cpus 0.25 --node-memory 3GiB \\
        --pages-per-node 3000 --files-per-node 4 --output out/cluster-weak
    python jobs/bench_cluster.py node-loss --nodes 6 --node-cpus 0.25 --node-memory 3GiB --pages 6000 \\
        --output out/cluster-loss

Each brings up a minicluster with a head node and max(--nodes) worker nodes, makes the input
(jobs/data/make_bench_input.py, WARC), runs, and always takes the cluster down again. Written to
--output: input/, job.yaml, job.log, results/ (scaling.csv, scaling.json, scaling.png, the runs),
node_usage.csv (per run and node: CPU-seconds, memory peak, the machine's load average, from
`minicluster.sh status` around each run), loadavg.csv (the machine's load every 5 s), cluster-logs/.
node-loss runs the job at --nodes twice, the second time losing the last worker node (every process
in it) halfway through fuzzy dedup, and writes node_loss.json: whether both ended with 0 and gave the
same bytes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "minicluster.sh"
ENDED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY")
USAGE_HEADER = "nodes,repeat,scaling,load1,node,cpus,memory,link,cpu_seconds,memory_now,memory_peak"

# run around each run by strong_scaling.sbatch (CURATE_RUN_HOOK) on the head node: zero the nodes'
# counters before, one row per node after (so CPU-seconds and the memory peak are the run's own)
HOOK = """#!/bin/sh
if [ "$1" = before ]; then exec {script} status {cluster} --reset >/dev/null; fi
load=$(cut -d' ' -f1 /proc/loadavg)
{script} status {cluster} | tail -n +2 | tr ' ' ',' | sed "s/^/$2,$3,$4,$load,/" >>{usage}
"""


class Cluster:
    """A minicluster with a head node; ``down`` is safe to call twice."""

    def __init__(self, nodes: int, cpus: float, memory: str, link: str | None, keep_logs: Path):
        self.dir = Path(tempfile.mkdtemp(prefix="curate-mc-"))  # short: munge's socket path has a limit
        self.options = ["--head", "--node-cpus", str(cpus), "--node-memory", memory] + (["--link", link] if link else [])
        self.nodes, self.keep_logs, self.is_up = nodes, keep_logs, False
        self.env = {**os.environ, "SLURM_CONF": str(self.dir / "slurm.conf")}

    def up(self) -> Cluster:
        self.is_up = True  # a half-made cluster must be taken down too
        proc = subprocess.run([str(SCRIPT), "up", str(self.dir), str(self.nodes), *self.options],
                              capture_output=True, text=True)
        print(proc.stdout.strip(), flush=True)
        if proc.returncode != 0:
            raise RuntimeError(f"minicluster up failed:\n{proc.stdout}\n{proc.stderr}")
        return self

    def down(self) -> None:
        if not self.is_up:
            return
        if (self.dir / "log").is_dir():
            shutil.copytree(self.dir / "log", self.keep_logs, dirs_exist_ok=True)
        proc = subprocess.run([str(SCRIPT), "down", str(self.dir)], capture_output=True, text=True)
        print(proc.stdout.strip() or proc.stderr.strip(), flush=True)
        self.is_up = False
        if proc.returncode == 0:
            shutil.rmtree(self.dir, ignore_errors=True)

    def script(self, *args) -> str:
        return subprocess.run([str(SCRIPT), *map(str, args)], capture_output=True, text=True, check=True).stdout

    def slurm(self, *args) -> subprocess.CompletedProcess:
        return subprocess.run(list(map(str, args)), env=self.env, capture_output=True, text=True)

    def state(self, job_id: str) -> dict:
        out = self.slurm("scontrol", "-o", "show", "job", job_id).stdout
        return dict(kv.split("=", 1) for kv in out.split() if "=" in kv)

    def wait(self, job_id: str, timeout: float, log: Path, while_running=None) -> dict:
        deadline, shown = time.time() + timeout, 0
        while True:
            fields = self.state(job_id)
            if fields.get("JobState") in ENDED:
                return fields
            if time.time() > deadline:
                self.slurm("scancel", job_id)
                raise TimeoutError(f"job {job_id} still {fields.get('JobState')} after {timeout:.0f}s")
            if while_running:
                while_running()
            text = log.read_text() if log.exists() else ""
            for line in text[shown:].splitlines():
                if line.startswith(("strong_scaling:", "bench:")) or "stage " in line[:40]:
                    print(f"  | {line}", flush=True)
            shown = len(text)
            time.sleep(1)


class LoadSampler(threading.Thread):
    """The machine's load average every few seconds, to tell a run that was disturbed."""

    def __init__(self, path: Path, every: float = 5.0):
        super().__init__(daemon=True)
        self.path, self.every, self.stop = path, every, threading.Event()

    def run(self):
        with open(self.path, "a") as f:
            f.write("time,load1,load5,load15\n")
            while not self.stop.is_set():
                f.write(f"{time.time():.1f},{','.join(f'{v:.2f}' for v in os.getloadavg())}\n")
                f.flush()
                self.stop.wait(self.every)


def make_input(folder: Path, pages: int, files: int) -> Path:
    """The WARC input (regenerated only when the size asked for changed)."""
    stamp = folder / "params.json"
    want = {"docs": pages, "files": files, "seed": 0}
    if not (stamp.exists() and json.loads(stamp.read_text()) == want):
        shutil.rmtree(folder, ignore_errors=True)
        subprocess.run([sys.executable, "jobs/data/make_bench_input.py", "--docs", str(pages), "--files", str(files),
                        "--output", str(folder)], cwd=ROOT, check=True)
        stamp.write_text(json.dumps(want))
    return folder


def make_job(template: Path, input_dir: Path, path: Path, node_cpus: float = 1.0) -> Path:
    """The job template on the sweep's input. On a node of a fraction of a core a page's extraction takes
    that much longer in wall time: an extract stage without its own ``extract_timeout`` gets the default
    divided by the share, or a page a whole core extracts in time is a ``timeout`` reject on a starved
    node and the outputs differ between node counts (one page at 6 quarter-core nodes did)."""
    from curate.stages.extract.warc import ExtractWarcSettings

    doc = yaml.safe_load(template.read_text())
    doc["input"] = f"{input_dir}/*.warc.gz"
    if node_cpus < 1:
        stages = doc.get("stages", [])
        for i, stage in enumerate(stages):
            # a stage is a name alone ("clean") or a one-key mapping of its name to its settings
            (name, settings), = stage.items() if isinstance(stage, dict) else [(stage, None)]
            if name.startswith("extract") and "extract_timeout" not in (settings or {}):
                stages[i] = {name: {**(settings or {}),
                                    "extract_timeout": min(3600.0, ExtractWarcSettings.extract_timeout / node_cpus)}}
    doc.pop("output", None)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def curate_bin() -> str:
    """The curate this checkout runs (its .venv's, with the checkout first on PYTHONPATH)."""
    venv = Path(sys.executable).parent / "curate"
    return str(venv) if venv.exists() else shutil.which("curate") or "curate"


def submit(cluster: Cluster, args, job: Path, results: Path, log: Path, counts: list[int], extra_env: dict) -> str:
    hook = args.output / "hook.sh"
    hook.write_text(HOOK.format(script=SCRIPT, cluster=cluster.dir, usage=args.output / "node_usage.csv"))
    hook.chmod(0o755)
    usage = args.output / "node_usage.csv"
    if not usage.exists():
        usage.write_text(USAGE_HEADER + "\n")
    env = {"CURATE_BIN": curate_bin(), "CURATE_HEAD": "1", "CURATE_NODE_COUNTS": " ".join(map(str, counts)),
           "CURATE_REPEAT": str(args.repeat), "CURATE_WORKERS_PER_NODE": str(args.workers_per_node),
           "CURATE_THREADS": str(args.threads), "CURATE_RUN_HOOK": str(hook), **extra_env}
    memory = args.memory_limit or per_worker_memory(args.node_memory, args.workers_per_node)
    env["CURATE_MEMORY_LIMIT"] = memory
    cluster.env.update(env)
    cluster.env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    proc = cluster.slurm("sbatch", "--parsable", "-N", max(counts) + 1, f"--ntasks-per-node={max(2, args.workers_per_node)}",
                         "--overcommit", f"--output={log}", "slurm/strong_scaling.sbatch", job, results)
    if proc.returncode != 0:
        raise RuntimeError(f"sbatch: {proc.stderr.strip()}")
    job_id = proc.stdout.strip().split(";")[0]
    print(f"bench_cluster: job {job_id}: {', '.join(f'{k}={v}' for k, v in env.items() if k != 'CURATE_RUN_HOOK')}",
          flush=True)
    return job_id


def per_worker_memory(node_memory: str, workers: int) -> str:
    """Most of a node's memory split among its workers: the rest is for the rank's own Python and slurmd."""
    units = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
    text = node_memory.rstrip("B").rstrip("i")
    size = float(text[:-1]) * units[text[-1].upper()] if text[-1].isalpha() else float(text)
    return f"{int(size * 0.8 / workers / 2**20)}MiB"


def run_sweep(args, mode: str) -> dict:
    counts = sorted({int(n) for n in args.nodes.split(",")})
    args.output.mkdir(parents=True, exist_ok=True)
    if mode == "weak":
        pages, files = args.pages_per_node * max(counts), args.files_per_node * max(counts)
        extra = {"CURATE_WEAK_FILES_PER_NODE": str(args.files_per_node)}
    else:
        pages, files, extra = args.pages, args.files, {}
    job = make_job(args.job, make_input(args.output / "input", pages, files), args.output / "job.yaml",
                   args.node_cpus)
    results, log = args.output / "results", args.output / "job.log"
    compile_checkout()
    cluster = Cluster(max(counts), args.node_cpus, args.node_memory, args.link, args.output / "cluster-logs")
    sampler = LoadSampler(args.output / "loadavg.csv")
    started = time.time()
    try:
        cluster.up()
        sampler.start()
        job_id = submit(cluster, args, job, results, log, counts, extra)
        state = cluster.wait(job_id, args.timeout, log)
        status = cluster.script("status", cluster.dir)
    finally:
        sampler.stop.set()
        cluster.down()
    report = {"mode": mode, "nodes": counts, "node_cpus": args.node_cpus, "node_memory": args.node_memory,
              "link": args.link, "pages": pages, "files": files, "repeat": args.repeat, "job_state": state.get("JobState"),
              "exit_code": state.get("ExitCode"), "wall_seconds": round(time.time() - started, 1),
              "cpu_count": os.cpu_count(), "status_at_end": status}
    (args.output / "sweep.json").write_text(json.dumps(report, indent=2))
    print(status)
    summary = results / "scaling.json"
    print(f"bench_cluster: {state.get('JobState')} {state.get('ExitCode')}; {summary if summary.exists() else log}")
    return report


def compile_checkout() -> None:
    """The checkout's bytecode, fresh (as scripts/setup.sh writes it): with PYTHONDONTWRITEBYTECODE set,
    every rank would otherwise compile curate's modules again, and a node's share of that is CPU a
    real installation never spends."""
    import compileall

    for folder in ("app", "modules"):
        compileall.compile_dir(ROOT / folder, quiet=1, workers=0)


def stage_files(folder: Path) -> dict[str, bytes]:
    """Every data file (not _manifest, _SUCCESS, _work) of every stage folder, by relative path."""
    found = {}
    for stage in sorted(p for p in folder.iterdir() if p.is_dir() and p.name[:2].isdigit()):
        for f in sorted(stage.glob("part[-_]*")):
            found[f"{stage.name}/{f.name}"] = f.read_bytes()
    return found


def run_node_loss(args) -> dict:
    k = max(int(n) for n in args.nodes.split(","))
    args.output.mkdir(parents=True, exist_ok=True)
    args.repeat = 1
    job = make_job(args.job, make_input(args.output / "input", args.pages, args.files), args.output / "job.yaml",
                   args.node_cpus)
    cluster = Cluster(k, args.node_cpus, args.node_memory, args.link, args.output / "cluster-logs")
    victim, report = f"node{k}", {"nodes": k}
    try:
        cluster.up()
        for name in ("base", "loss"):
            results, log = args.output / f"results-{name}", args.output / f"job-{name}.log"
            job_id = submit(cluster, args, job, results, log, [k], {})
            killed = {}

            def lose_a_node_halfway(results=results, killed=killed, name=name):
                # halfway: fuzzy dedup has begun writing its signatures and has not finished
                if name != "loss" or killed:
                    return
                run = results / f"nodes-{k:04d}"
                fuzzy = next(iter(sorted(run.glob("*-fuzzy_dedup"))), None) if run.exists() else None
                if fuzzy and (fuzzy.with_name(fuzzy.name + ".side") / "_work" / "signatures").exists() and not (fuzzy / "_SUCCESS").exists():
                    cluster.script("kill-node", cluster.dir, victim)
                    # SLURM would declare the silent node DOWN after SlurmdTimeout; declare it now
                    cluster.slurm("scontrol", "update", f"nodename={victim}", "state=down", "reason=bench: node lost")
                    killed["at"] = time.time()
                    print(f"bench_cluster: {victim} lost (every process in it) in {fuzzy.name}", flush=True)

            state = cluster.wait(job_id, args.timeout, log, lose_a_node_halfway)
            report[name] = {"job_state": state.get("JobState"), "exit_code": state.get("ExitCode"),
                            "lost_node": victim if killed else None}
            if killed:
                report[name]["job_over_seconds_after_loss"] = round(time.time() - killed["at"], 1)
                cluster.script("start-node", cluster.dir, victim)
    finally:
        cluster.down()
    base = stage_files(args.output / "results-base" / f"nodes-{k:04d}")
    loss = stage_files(args.output / "results-loss" / f"nodes-{k:04d}")
    report["files"] = len(base)
    report["same_output"] = bool(base) and base == loss
    report["differing"] = sorted(n for n in set(base) | set(loss) if base.get(n) != loss.get(n))[:20]
    report["node_was_lost"] = report.get("loss", {}).get("lost_node") is not None
    (args.output / "node_loss.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    return report


def main(argv=None) -> int:
    import signal

    # SIGTERM (a test's time limit, scancel, kill) ends the driver through its finally blocks: the
    # cluster goes down, no namespace, cgroup or daemon is left behind
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="kind", required=True)
    for kind in ("sweep", "weak", "node-loss"):
        s = sub.add_parser(kind)
        s.add_argument("--nodes", default={"sweep": "1,2,3,4,6", "weak": "1,2,4,6", "node-loss": "6"}[kind],
                       help="worker node counts, comma-separated (the head node comes on top)")
        s.add_argument("--node-cpus", type=float, default=0.25, help="CPUs per node (a CFS quota; default 0.25)")
        s.add_argument("--node-memory", default="3GiB", help="memory per node (default 3GiB)")
        s.add_argument("--link", default=None, help="shape each node's link, e.g. 1gbit (default: unshaped)")
        s.add_argument("--workers-per-node", type=int, default=1, help="worker ranks per worker node (default 1)")
        s.add_argument("--threads", type=int, default=1, help="threads per worker (default 1)")
        s.add_argument("--memory-limit", default=None, help="per worker (default 80%% of the node's memory / workers)")
        s.add_argument("--job", type=Path, default=ROOT / "jobs" / "scaling.yaml", help="job template (input replaced)")
        s.add_argument("--output", type=Path, required=True)
        s.add_argument("--timeout", type=float, default=6 * 3600, help="seconds for the whole SLURM job")
        if kind == "weak":
            s.add_argument("--pages-per-node", type=int, default=3000)
            s.add_argument("--files-per-node", type=int, default=4)
            s.add_argument("--repeat", type=int, default=1)
        else:
            s.add_argument("--pages", type=int, default=20000)
            s.add_argument("--files", type=int, default=24, help="input files (partitions of the first stage)")
            if kind == "sweep":
                s.add_argument("--repeat", type=int, default=1)
    args = p.parse_args(argv)
    if os.geteuid() != 0:
        p.error("needs root (scripts/minicluster.sh: namespaces, cgroups, slurmd)")
    args.output = args.output.resolve()
    os.chdir(ROOT)
    if args.kind == "node-loss":
        report = run_node_loss(args)
        ok = report["same_output"] and report["node_was_lost"] and \
            all(report[n]["exit_code"] == "0:0" for n in ("base", "loss"))
        return 0 if ok else 1
    report = run_sweep(args, "weak" if args.kind == "weak" else "strong")
    return 0 if report["exit_code"] == "0:0" else 1


if __name__ == "__main__":
    sys.exit(main())
