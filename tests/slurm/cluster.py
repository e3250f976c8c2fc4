"""A one-node SLURM cluster on localhost for tests: munged, slurmctld and slurmd with a config
written into a temporary folder. Needs root (slurmd runs jobs as their user) and the Debian packages
slurm-wlm and munge, which scripts/setup.sh installs."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

CONF = """\
ClusterName=curatetest
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd.pid
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmctldLogFile={dir}/slurmctld.log
SlurmdLogFile={dir}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def munge_running() -> bool:
    return subprocess.run(["sh", "-c", "munge -n | unmunge"], capture_output=True).returncode == 0


class LocalSlurm:
    def __init__(self, folder: Path):
        self.dir = Path(folder)
        self.conf = self.dir / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.procs: list[subprocess.Popen] = []
        self.started_munge = False

    def start(self, timeout: float = 60) -> LocalSlurm:
        for tool in ("slurmctld", "slurmd", "sbatch", "munged"):
            if not shutil.which(tool) and not os.path.exists(f"/usr/sbin/{tool}"):
                raise RuntimeError(f"{tool} not found: run scripts/setup.sh (installs slurm-wlm and munge)")
        if not munge_running():
            self._start_munge()
        for sub in ("state", "spool"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        self.conf.write_text(CONF.format(host=socket.gethostname().split(".")[0], dir=self.dir,
                                         ctld_port=free_port(), slurmd_port=free_port(), cpus=os.cpu_count()))
        for daemon in ("slurmctld", "slurmd"):
            self.procs.append(subprocess.Popen([f"/usr/sbin/{daemon}", "-D", "-f", str(self.conf)], env=self.env,
                                               stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))
        deadline = time.time() + timeout
        while time.time() < deadline:
            out = self.run("sinfo", "-h", "-o", "%T", check=False).stdout.strip()
            if out in ("idle", "mixed", "allocated"):
                return self
            time.sleep(0.5)
        raise RuntimeError(f"SLURM did not come up: {self.logs()}")

    def _start_munge(self):
        os.makedirs("/run/munge", exist_ok=True)
        shutil.chown("/run/munge", "munge", "munge")
        if not os.path.exists("/etc/munge/munge.key"):
            subprocess.run(["runuser", "-u", "munge", "--", "mungekey", "--create"], check=True)
        subprocess.run(["runuser", "-u", "munge", "--", "/usr/sbin/munged"], check=True)
        self.started_munge = True
        for _ in range(50):
            if munge_running():
                return
            time.sleep(0.1)
        raise RuntimeError("munged did not start")

    def run(self, *args, check=True):
        return subprocess.run(list(args), env=self.env, capture_output=True, text=True, check=check)

    def wait(self, job_id: str, timeout: float) -> dict:
        """Wait for a job to end; return scontrol's fields (JobState, ExitCode, ...)."""
        deadline = time.time() + timeout
        while True:
            out = self.run("scontrol", "-o", "show", "job", job_id, check=False).stdout
            fields = dict(kv.split("=", 1) for kv in out.split() if "=" in kv)
            if fields.get("JobState") in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"):
                return fields
            if time.time() > deadline:
                self.run("scancel", job_id, check=False)
                raise TimeoutError(f"job {job_id} still {fields.get('JobState')} after {timeout}s")
            time.sleep(1)

    def logs(self) -> str:
        return "\n".join(p.read_text()[-2000:] for p in self.dir.glob("*.log"))

    def stop(self):
        self.run("scancel", "--user", os.environ.get("USER", "root"), check=False)
        for p in reversed(self.procs):
            p.terminate()
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        if self.started_munge:
            subprocess.run(["pkill", "-x", "munged"], check=False)
