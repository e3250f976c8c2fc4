"""Cluster modes: local vs MPI give identical files; attaching to a running scheduler."""

import filecmp
import os
import shutil
import subprocess
import sys
import time

import pytest

from tests.conftest import CURATE, ROOT, curate, curate_here

MPIRUN = shutil.which("mpirun")


def part_files(stage_dir):
    return sorted(p.name for p in stage_dir.glob("part[-_]*"))  # datasets part-N.parquet, tokens part_N.bin


def assert_same_outputs(a, b):
    stages = sorted(p.name for p in a.iterdir() if p.is_dir() and not p.name.startswith("_") and not p.name.endswith(".side"))
    assert stages == sorted(p.name for p in b.iterdir() if p.is_dir() and not p.name.startswith("_")
                            and not p.name.endswith(".side"))
    for stage in stages:
        names = part_files(a / stage)
        assert names and names == part_files(b / stage)
        for name in names:
            assert filecmp.cmp(a / stage / name, b / stage / name, shallow=False), f"{stage}/{name} differs"


def mpirun(*args):
    cmd = [MPIRUN, "-np", "4", "--oversubscribe"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    return subprocess.run([*cmd, *CURATE, *map(str, args)], cwd=ROOT, capture_output=True, text=True, timeout=900)


@pytest.mark.slow
def test_local_and_mpi_give_identical_files_and_mpi_warns_about_workers(tmp_path):
    # the sample job across three SLURM nodes against --cluster local: tests/slurm/test_curate_sbatch.py
    assert MPIRUN, "mpirun not found: run scripts/setup.sh (installs OpenMPI)"
    local, mpi = tmp_path / "local", tmp_path / "mpi"
    job = tmp_path / "job.yaml"
    job.write_text(f"input: {ROOT / 'jobs/data/sample.jsonl.gz'}\nstages: [normalize, clean]\n")
    # the reference in this process (auto: threads for this input, as in a process of its own); the
    # MPI run below is the one whose processes matter
    ref = curate_here("run", job, "--output", local, cwd=ROOT)
    assert ref.returncode == 0, ref.stderr[-4000:]
    proc = mpirun("run", job, "--output", mpi, "--cluster", "mpi", "--workers", "5")
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "Traceback" not in proc.stderr and "CommClosedError" not in proc.stderr, proc.stderr[-4000:]
    assert "scheduler tls://" in proc.stderr and "2 worker(s) on 1 node(s)" in proc.stderr, proc.stderr[-4000:]
    assert "dashboard at http://127.0.0.1:" in proc.stderr and "ssh -J <login-node> -L " in proc.stderr
    warnings = [ln for ln in proc.stderr.splitlines() if "--workers" in ln]
    assert len(warnings) == 1 and "WARNING" in warnings[0] and "ignored with --cluster mpi" in warnings[0], warnings
    assert list((mpi / "_reports").glob("*.html"))
    assert_same_outputs(local, mpi)


#: a process without the cluster's certificate tries every address three ways, all at once: plain
#: TCP, TLS without a client certificate, TLS with a certificate of another CA; were one to connect,
#: it would run code that leaves a marker file. Prints one line per try.
ATTACKER = """
import asyncio, ssl, sys
from distributed import Client
from distributed.comm import connect
from distributed.security import Security
marker = sys.argv[1]
no_cert = ssl.create_default_context()
no_cert.check_hostname, no_cert.verify_mode = False, ssl.CERT_NONE
other_ca = Security.temporary()
ways = [("tcp", {}, "plain"), ("tls", {"ssl_context": no_cert}, "no-cert"),
        ("tls", other_ca.get_connection_args("client"), "other-ca")]

async def attempt(address, proto, kwargs, how):
    try:
        comm = await connect(f"{proto}://{address}", timeout=5, **kwargs)
    except Exception as e:
        return f"refused {address} {how}: {type(e).__name__}"
    await comm.close()
    try:
        async with Client(f"{proto}://{address}", security=other_ca if how == "other-ca" else None,
                          asynchronous=True, timeout=5) as c:
            await c.run(lambda: open(marker, "w").write("ran"))
    except Exception:
        pass
    return f"CONNECTED {address} {how}"

async def main():
    tries = [attempt(a.split("://")[-1], p, k, h) for a in sys.argv[2:] for p, k, h in ways]
    for line in await asyncio.gather(*tries):
        print(line)

asyncio.run(main())
"""


@pytest.mark.slow
def test_local_cluster_refuses_a_client_without_its_certificate(tmp_path):
    from curate.app.cluster import ClusterSettings, connect

    marker = tmp_path / "ran"
    with connect(ClusterSettings(workers=1)) as client:
        assert client.scheduler.address.startswith("tls://127.0.0.1:")
        addresses = [client.scheduler.address, *client.scheduler_info()["workers"]]
        assert all(a.startswith("tls://") for a in addresses)
        # the scheduler and the worker alike: plain TCP, TLS without a certificate, TLS with a
        # certificate from another CA; each is refused and runs nothing
        proc = subprocess.run([sys.executable, "-c", ATTACKER, str(marker), *addresses], capture_output=True,
                              text=True, timeout=300)
        assert proc.stdout.count("refused") == 3 * len(addresses), proc.stdout + proc.stderr[-2000:]
        assert "CONNECTED" not in proc.stdout
        # while the client with the certificate works
        assert client.submit(sum, [1, 2]).result() == 3
    assert not marker.exists()


@pytest.mark.slow
def test_mpi_with_too_few_ranks_is_one_line_error(tmp_path):
    assert MPIRUN, "mpirun not found: run scripts/setup.sh (installs OpenMPI)"
    cmd = [MPIRUN, "-np", "2", "--oversubscribe", "--allow-run-as-root", *CURATE,
           "run", "jobs/sample.yaml", "--output", str(tmp_path / "o"), "--cluster", "mpi"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("curate: error:")]
    assert errors == ["curate: error: --cluster mpi needs at least 3 MPI ranks (scheduler, job, one worker); got 2"]


@pytest.mark.slow
def test_attach_to_a_scheduler_file(tmp_path):
    sched_file = tmp_path / "scheduler.json"
    py = sys.executable
    scheduler = subprocess.Popen([py, "-m", "distributed.cli.dask_scheduler", "--scheduler-file", str(sched_file),
                                  "--host", "127.0.0.1", "--dashboard-address", "127.0.0.1:0"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    worker = None
    try:
        deadline = time.time() + 60
        while not sched_file.exists():
            assert time.time() < deadline, "scheduler did not start"
            time.sleep(0.1)
        worker = subprocess.Popen([py, "-m", "distributed.cli.dask_worker", "--scheduler-file", str(sched_file),
                                   "--nthreads", "1", "--nworkers", "1"], cwd=ROOT,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        out = tmp_path / "out"
        proc = curate("normalize", "--input", "jobs/data/sample.jsonl.gz", "--output", out, "--cluster", sched_file,
                      "--workers", "3")
        assert "attached to tcp://127.0.0.1:" in proc.stderr
        warnings = [ln for ln in proc.stderr.splitlines() if "--workers" in ln]
        assert len(warnings) == 1 and "ignored when attaching" in warnings[0], warnings
        assert (out / "_SUCCESS").exists()
        # the cluster we attached to is left running
        assert scheduler.poll() is None
    finally:
        for p in (worker, scheduler):
            if p is not None:
                p.terminate()
                p.wait(timeout=30)


def test_node_address_without_a_default_route_takes_the_first_interface_that_is_up(monkeypatch):
    # compute nodes often have no default route: distributed's get_ip then falls back to 127.0.0.1,
    # which the other nodes cannot reach
    import socket
    from types import SimpleNamespace as NS

    import distributed.utils
    import psutil

    from curate.app.cluster import _node_address
    from curate.stages.errors import SettingsError

    addrs = {"lo": [NS(family=socket.AF_INET, address="127.0.0.1")],
             "eth0": [NS(family=socket.AF_INET6, address="fe80::1"), NS(family=socket.AF_INET, address="10.0.0.5")],
             "ib0": [NS(family=socket.AF_INET, address="10.1.0.7")]}
    monkeypatch.setattr(psutil, "net_if_addrs", lambda: addrs)
    monkeypatch.setattr(psutil, "net_if_stats", lambda: {"lo": NS(isup=True), "eth0": NS(isup=False), "ib0": NS(isup=True)})
    monkeypatch.setattr(distributed.utils, "get_ip", lambda *a, **k: "127.0.0.1")
    assert _node_address(None) == "10.1.0.7"  # eth0 is down
    monkeypatch.setattr(distributed.utils, "get_ip", lambda *a, **k: "10.9.8.7")
    assert _node_address(None) == "10.9.8.7"  # the default route's address wins
    monkeypatch.setattr(distributed.utils, "get_ip_interface", lambda name: addrs[name][-1].address)
    assert _node_address("eth0") == "10.0.0.5"  # --interface wins over both
    monkeypatch.setattr(distributed.utils, "get_ip_interface",
                        lambda name: (_ for _ in ()).throw(ValueError(f"{name!r} is not a valid network interface")))
    with pytest.raises(SettingsError, match="--interface nope: 'nope' is not a valid network interface"):
        _node_address("nope")
    monkeypatch.setattr(distributed.utils, "get_ip", lambda *a, **k: "127.0.0.1")
    monkeypatch.setattr(psutil, "net_if_addrs", lambda: {"lo": addrs["lo"]})
    assert _node_address(None) == "127.0.0.1"  # one machine, loopback only


def test_exit_codes_of_the_mpi_ranks(monkeypatch):
    # a scheduler or worker rank returns its code through NotClientRank: 0 after a finished job,
    # EXIT_CLUSTER_LOST when the scheduler or the job rank was lost
    from curate.app import cli, cluster

    for code in (0, cluster.EXIT_CLUSTER_LOST):
        def fake(args, code=code):
            raise cluster.NotClientRank(code)

        monkeypatch.setattr(cli, "cmd_run", fake)
        assert cli.main(["run", "jobs/sample.yaml"]) == code
    assert cluster.ClusterLost("x").exit_code == cluster.EXIT_CLUSTER_LOST == 3


@pytest.mark.parametrize("mode", ["local", "threads"])
def test_ctrl_c_is_one_line_and_exit_130_with_the_workers_gone(tmp_path, mode):
    """Issue 31, point 5: Ctrl-C of a local-cluster run printed 85-113 lines with up to ten tracebacks
    (a terminal sends SIGINT to the whole process group: every nanny and worker got it too)."""
    import signal

    import psutil

    proc = subprocess.Popen([*CURATE, "run", "jobs/sample.yaml", "--output", str(tmp_path / "out"), "--cluster", mode,
                             "--workers", "2"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    err = []
    for line in proc.stderr:  # until the second stage starts: the workers are busy
        err.append(line)
        if "stage clean:" in line:
            break
    children = psutil.Process(proc.pid).children(recursive=True)
    os.killpg(proc.pid, signal.SIGINT)
    started = time.monotonic()
    _out, tail = proc.communicate(timeout=60)
    err.append(tail or "")
    text = "".join(err)
    assert proc.returncode == 130, text[-3000:]
    assert time.monotonic() - started < 20
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text[-3000:]
    assert text.rstrip().splitlines()[-1] == "curate: interrupted"
    _gone, alive = psutil.wait_procs(children, timeout=15)
    assert not alive, [c.pid for c in alive]


def test_lean_dask_thins_out_dask_self_observation_and_a_users_config_still_decides():
    """``LEAN_DASK``: defaults only. In a fresh process: applied, and a DASK_* variable wins."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    code = ("import dask; from curate.app import cluster; cluster.lean_dask(); g = dask.config.get; "
            "print(g('distributed.worker.profile.enabled'), g('distributed.admin.tick.interval'), "
            "g('distributed.admin.system-monitor.interval'))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DASK_")}
    run = lambda extra: subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,  # noqa: E731
                                       env={**env, "PYTHONPATH": str(ROOT), **extra}, timeout=120)
    assert run({}).stdout.split() == ["False", "500ms", "2s"]
    mine = run({"DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED": "True"})
    assert mine.stdout.split()[0] == "True", mine.stderr
