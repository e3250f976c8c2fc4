"""scripts/minicluster.sh's nodes of a fixed size: a node capped at C CPUs gives a CPU-bound loop C of a
CPU, the caps reach what slurmd runs, and `down` leaves no cgroup, namespace, link or process behind.
Fast (a few seconds per cluster); root only, like the other SLURM tests."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.slurm.cluster import MiniCluster, why_not

#: a CPU-bound loop for about 3 s of wall time; prints its CPU-seconds over its wall seconds
SPIN = ("import time\nt, c = time.monotonic(), time.process_time()\nwhile time.monotonic() - t < 3: pass\n"
        "print((time.process_time() - c) / (time.monotonic() - t))")


@pytest.fixture(scope="module")
def capped(tmp_path_factory):
    reason = why_not()
    if reason:
        pytest.skip(reason)
    folder = tmp_path_factory.mktemp("capped")
    cluster = MiniCluster(folder, nodes=2, head=True, node_cpus=0.25, node_memory="512MiB", link="100mbit").start()
    yield cluster
    cluster.stop()


def leftovers(tag: str) -> list[str]:
    """Every cgroup, namespace, link and process of the cluster with this tag still on the machine."""
    found = []
    for ctl in ("cpu", "cpuacct", "memory"):
        found += [str(p) for p in Path(f"/sys/fs/cgroup/{ctl}").rglob(f"curate-mini-{tag}")]
    found += [n for n in subprocess.run(["ip", "netns"], capture_output=True, text=True).stdout.split() if tag in n]
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    found += sorted(set(re.findall(rf"^\d+: (cm[bv]{tag}\w*)", links, re.M)))
    return found


def test_a_capped_node_gives_a_busy_loop_its_share_of_a_cpu(capped):
    for node in ("node1", "head"):
        share = float(capped.exec(node, sys.executable, "-c", SPIN, check=True).stdout)
        assert 0.25 * 0.9 <= share <= 0.25 * 1.1, (node, share)
    status = capped.status()
    assert sorted(status) == ["head", "node1", "node2"]
    assert status["node1"]["cpus"] == "0.25" and status["node1"]["memory"] == "512MiB" \
        and status["node1"]["link"] == "100mbit"
    # the loop's CPU-seconds (about 0.75) are counted for its node; node2 ran nothing but its slurmd
    assert 0.6 < float(status["node1"]["cpu_seconds"]) < 1.2, status
    assert float(status["node2"]["cpu_seconds"]) < 0.5, status
    assert int(status["node1"]["memory_peak"]) >= int(status["node1"]["memory_now"]) > 0
    assert float(capped.status(reset=True)["node1"]["cpu_seconds"]) < 0.1


def test_what_slurm_runs_on_a_node_is_capped_and_in_its_namespace(capped):
    out = capped.run("srun", "-w", "node2", "-n", "1", "--overcommit", "sh", "-c",
                     "hostname; hostname -I; grep -E ':(cpu|memory):' /proc/self/cgroup").stdout
    assert out.split()[:2] == ["node2", capped.node["node2"][1]], out
    assert "/curate-mini-" in out and out.count("/node2") == 2, out
    # the memory cap: a process that wants more than the node has is killed, not the machine's others
    hog = capped.exec("node1", sys.executable, "-c", "b = bytearray(700 * 2**20); print('survived')")
    assert hog.returncode != 0 and "survived" not in hog.stdout
    # the link: an htb qdisc at 100mbit on both ends
    ns = capped.node["node1"][0]
    assert "rate 100Mbit" in subprocess.run(["tc", "-n", ns, "class", "show", "dev", "eth0"], capture_output=True,
                                            text=True).stdout


def test_the_old_usage_still_works_and_down_leaves_nothing_behind(tmp_path):
    reason = why_not()
    if reason:
        pytest.skip(reason)
    for options in ({}, {"head": True, "node_cpus": 0.5, "node_memory": "256MiB", "link": "1gbit"}):
        cluster = MiniCluster(tmp_path / f"c{len(options)}", nodes=1, **options).start()
        tag = cluster.node["node1"][0].split("-")[1]
        try:
            pids = [int(line.split()[0]) for line in (cluster.dir / "pids").read_text().splitlines()]
            if options:
                # a group per controller, a namespace per node, the bridge and a veth per node
                assert len(leftovers(tag)) == 3 + 2 + 1 + 2, leftovers(tag)
                share = float(cluster.exec("node1", sys.executable, "-c", SPIN, check=True).stdout)
                assert 0.45 <= share <= 0.55, share
            else:
                assert "head" not in cluster.node and not (cluster.dir / "cgroups").read_text()
        finally:
            cluster.stop()
        assert leftovers(tag) == []
        assert not any(os.path.exists(f"/proc/{pid}") for pid in pids)


SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "minicluster.sh"


@pytest.mark.parametrize("args, message", [
    (["2", "--link", "bogusrate"], "--link must be a rate such as 100mbit"),
    (["0"], "NODES must be a whole number"),
    (["abc"], "NODES must be a whole number"),
])
def test_up_refuses_bad_arguments_before_touching_anything(tmp_path, args, message):  # issue 47, point 10
    folder = tmp_path / "mini"
    proc = subprocess.run(["bash", str(SCRIPT), "up", str(folder), *args], capture_output=True, text=True)
    assert proc.returncode != 0 and message in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert not folder.exists()


@pytest.mark.parametrize("name", ["with space", "quo'te"])
def test_up_refuses_a_folder_that_would_reach_a_shell_string(tmp_path, name):
    proc = subprocess.run(["bash", str(SCRIPT), "up", str(tmp_path / name), "2"], capture_output=True, text=True)
    assert proc.returncode != 0 and "DIR may hold only" in proc.stderr, proc.stderr
    assert not (tmp_path / name).exists()


def test_up_that_fails_part_way_removes_what_it_made(tmp_path):
    reason = why_not()
    if reason:
        pytest.skip(reason)
    before = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    proc = subprocess.run(["bash", str(SCRIPT), "up", str(tmp_path / "mini"), "2"], capture_output=True, text=True,
                          env={**os.environ, "MINICLUSTER_SUBNET": "999.1.1"})  # the bridge's address fails
    assert proc.returncode != 0 and "up failed; removing what it made" in proc.stderr, proc.stderr
    after = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert sorted(re.findall(r"^\d+: (cm[bv]\w+)", after, re.M)) == sorted(re.findall(r"^\d+: (cm[bv]\w+)", before, re.M))
    assert not (tmp_path / "mini" / "names").exists() and not (tmp_path / "mini" / "pids").exists()
