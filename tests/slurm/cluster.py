"""A multi-node SLURM cluster on this machine for tests: scripts/minicluster.sh (network namespaces on
a private bridge, one slurmd per node, slurmctld and a private munged on the bridge side), plus what
tests need to poke at it: run a command inside a node, find a job's rank processes, wait for a job."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

from tests.conftest import ROOT

SCRIPT = ROOT / "scripts" / "minicluster.sh"
ENDED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY")


def why_not() -> str | None:
    """The reason this machine cannot host the cluster, or None."""
    if os.geteuid() != 0:
        return "the SLURM minicluster needs root (network namespaces, slurmd)"
    for tool in ("ip", "unshare", "nsenter", "/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/sbin/munged", "sbatch"):
        if not shutil.which(tool):
            return f"{tool} not found: run scripts/setup.sh (slurm-wlm, munge, iproute2)"
    probe = subprocess.run(["unshare", "--net", "--uts", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"the kernel refuses network/UTS namespaces: {probe.stderr.strip()}"
    return None


class MiniCluster:
    def __init__(self, folder: Path, nodes: int = 3, head: bool = False, node_cpus: float | None = None,
                 node_memory: str | None = None, link: str | None = None):
        self.dir = Path(folder)
        self.nodes = nodes
        # minicluster.sh up's options for nodes of a fixed size and a head node
        self.options = (["--head"] if head else []) + (["--node-cpus", str(node_cpus)] if node_cpus else []) \
            + (["--node-memory", node_memory] if node_memory else []) + (["--link", link] if link else [])
        self.conf = self.dir / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.up = False

    def start(self) -> MiniCluster:
        proc = subprocess.run([str(SCRIPT), "up", str(self.dir), str(self.nodes), *self.options], capture_output=True,
                              text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"minicluster up failed:\n{proc.stdout}\n{proc.stderr}")
        self.up = True
        # node name -> (namespace, address)
        self.node = {}
        for line in (self.dir / "nodes").read_text().splitlines():
            name, ns, addr = line.split()
            self.node[name] = (ns, addr)
        self.subnet = (self.dir / "subnet").read_text().strip()
        return self

    def stop(self):
        if self.up:
            subprocess.run([str(SCRIPT), "down", str(self.dir)], capture_output=True, text=True)
            self.up = False

    def run(self, *args, check=True):
        return subprocess.run(list(map(str, args)), env=self.env, capture_output=True, text=True, check=check)

    def in_node(self, node: str, *args, timeout: float = 60, check=False):
        """Run a command inside a node's network namespace."""
        ns = self.node[node][0]
        return subprocess.run(["ip", "netns", "exec", ns, *map(str, args)], capture_output=True, text=True,
                              timeout=timeout, check=check)

    def exec(self, node: str, *args, timeout: float = 60, check=False):
        """Run a command as the node's processes run: in its cgroups (caps) and its namespace."""
        return subprocess.run([str(SCRIPT), "exec", str(self.dir), node, *map(str, args)], capture_output=True,
                              text=True, timeout=timeout, check=check)

    def status(self, reset: bool = False) -> dict[str, dict[str, str]]:
        """minicluster.sh status: node -> {cpus, memory, link, cpu_seconds, memory_now, memory_peak}."""
        out = subprocess.run([str(SCRIPT), "status", str(self.dir), *(["--reset"] if reset else [])],
                             capture_output=True, text=True, check=True).stdout.splitlines()
        head = out[0].split()
        return {line.split()[0]: dict(zip(head[1:], line.split()[1:])) for line in out[1:]}

    def sbatch(self, *args) -> str:
        proc = self.run("sbatch", "--parsable", *args, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"sbatch {' '.join(map(str, args))}: {proc.stderr.strip()}\n{self.logs()}")
        return proc.stdout.strip().split(";")[0]

    def state(self, job_id: str) -> dict:
        out = self.run("scontrol", "-o", "show", "job", job_id, check=False).stdout
        return dict(kv.split("=", 1) for kv in out.split() if "=" in kv)

    def wait(self, job_id: str, timeout: float) -> dict:
        """Wait for a job to end; return scontrol's fields (JobState, ExitCode, ...)."""
        deadline = time.time() + timeout
        while True:
            fields = self.state(job_id)
            if fields.get("JobState") in ENDED:
                return fields
            if time.time() > deadline:
                self.run("scancel", job_id, check=False)
                raise TimeoutError(f"job {job_id} still {fields.get('JobState')} after {timeout}s\n{self.logs()}")
            time.sleep(0.5)

    def rank_pids(self, job_id: str) -> dict[int, int]:
        """MPI rank -> pid of the curate (python) process of each task of the job's running steps."""
        ranks = {}
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
                comm = Path(f"/proc/{pid}/comm").read_text().strip()
            except OSError:
                continue
            # job ids of two clusters (two test runs at once) can be equal: the cluster's folder tells
            if comm == "bash" or f"SLURM_JOB_ID={job_id}".encode() not in env \
                    or not any(str(self.dir).encode() in kv for kv in env):
                continue
            if not any(a == b"curate" or a.endswith(b"/curate") for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")):
                continue
            for kv in env:
                if kv.startswith(b"SLURM_PROCID="):
                    ranks[int(kv.split(b"=", 1)[1])] = int(pid)
        return ranks

    def node_of(self, pid: int) -> str:
        """The node whose network namespace holds a process."""
        ns = subprocess.run(["ip", "netns", "identify", str(pid)], capture_output=True, text=True, check=True).stdout
        names = [name for name, (node_ns, _) in self.node.items() if node_ns == ns.strip()]
        if not names:
            raise LookupError(f"pid {pid} is in no node of {self.dir} (namespace {ns.strip()!r})")
        return names[0]

    def kill_node(self, node: str) -> None:
        """Lose a node as in a crash: SIGKILL every process in its namespace, slurmd included."""
        proc = subprocess.run([str(SCRIPT), "kill-node", str(self.dir), node], capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"minicluster kill-node {node}: {proc.stderr.strip()}")

    def start_node(self, node: str, timeout: float = 60) -> None:
        """Bring a killed node back and wait until SLURM schedules on it again."""
        proc = subprocess.run([str(SCRIPT), "start-node", str(self.dir), node], capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"minicluster start-node {node}: {proc.stderr.strip()}")
        deadline = time.time() + timeout
        while time.time() < deadline:
            node_state = self.run("sinfo", "-h", "-n", node, "-o", "%T", check=False).stdout.strip()
            if node_state == "idle":
                return
            time.sleep(0.5)
        raise TimeoutError(f"{node} still {node_state!r} {timeout}s after its slurmd started\n{self.logs()}")

    def logs(self) -> str:
        return "\n".join(f"== {p.name}\n" + p.read_text()[-1500:] for p in sorted((self.dir / "log").glob("*.log")))
