"""slurm/*.sbatch on a real 3-node SLURM cluster (scripts/minicluster.sh: one network namespace,
hostname and slurmd per node), with secure Dask comms and lost ranks.

One cluster serves the whole module. The sample job runs once across the three nodes with a worker
SIGKILLed in the middle, and must still give the files of a ``--cluster local`` run byte for byte;
so must a fuzzy dedup that loses a whole node (every process in it, slurmd included) halfway.
Smaller jobs prove the exit codes, the scaling script, and that losing the scheduler or the job rank
stops every rank quickly and that re-submitting resumes.
"""

from __future__ import annotations

import csv
import json
import os
import random
import re
import signal
import subprocess
import sys
import time

import pytest

from tests.app.test_cluster import ATTACKER, assert_same_outputs
from tests.conftest import CURATE, ROOT, side, write_jsonl
from tests.slurm.cluster import MiniCluster, why_not

pytestmark = pytest.mark.slow

#: every rank must be gone this long after the scheduler or job rank died (docs/slurm.md promises
#: about 15 s after a process death; the rest is slack for a loaded 2-core machine)
LOST_RANK_BOUND = 60


@pytest.fixture(scope="module")
def mini(tmp_path_factory):
    reason = why_not()
    if reason:
        print(f"skipping the SLURM tests: {reason}")
        pytest.skip(reason)
    cluster = MiniCluster(tmp_path_factory.mktemp("minicluster"), nodes=3).start()
    yield cluster
    cluster.stop()


def last_stage(out):
    return sorted(p for p in out.iterdir() if p.is_dir() and p.name[:2].isdigit() and not p.name.endswith(".side"))[-1]


def wait_for_line(log, pattern, proc_or_job, mini, timeout=300):
    deadline = time.time() + timeout
    while time.time() < deadline:
        text = log.read_text() if log.exists() else ""
        m = re.search(pattern, text)
        if m:
            return m
        if mini.state(proc_or_job).get("JobState") in ("COMPLETED", "FAILED", "CANCELLED"):
            break
        time.sleep(0.1)
    raise AssertionError(f"{pattern!r} never appeared in the log:\n{log.read_text()[-3000:] if log.exists() else ''}")


def tiny_job(tmp_path, files=8, docs=300):
    """Two stages on a few small files: partitions enough to keep the workers busy a few seconds."""
    for f in range(files):
        write_jsonl(tmp_path / "data" / f"{f:02d}.jsonl",
                    [{"id": f"{f}-{i}", "text": f"Document {f} {i}: " + "some words to clean  here. " * 30}
                     for i in range(docs)])
    job = tmp_path / "job.yaml"
    job.write_text(f"input: {tmp_path / 'data'}/*.jsonl\nstages: [normalize, clean]\n")
    return job




def attack(mini, where, addresses, marker):
    cmd = [sys.executable, "-c", ATTACKER, marker, *addresses]
    if where == "machine":
        return subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
    return mini.in_node(where, *cmd, timeout=300)


def http_status(mini, node, url):
    code = f"import urllib.request as u\ntry: print(u.urlopen({url!r}, timeout=5).status)\nexcept OSError as e: print('refused', e)"
    return mini.in_node(node, sys.executable, "-c", code).stdout.strip()


def test_nodes_reach_only_each_other(mini):
    # the machine's own addresses outside the test subnet (its uplink, docker bridges, ...)
    machine = re.findall(r"inet (\d+\.\d+\.\d+\.\d+)", subprocess.run(["ip", "-4", "addr"], capture_output=True,
                                                                     text=True).stdout)
    outside = [a for a in machine if not a.startswith(("127.", mini.subnet + "."))]
    for ns, addr in mini.node.values():
        routes = subprocess.run(["ip", "-n", ns, "route"], capture_output=True, text=True, check=True).stdout
        assert routes.strip().splitlines() == [f"{mini.subnet}.0/24 dev eth0 proto kernel scope link src {addr}"]
        for target in ["1.1.1.1", *outside]:
            assert subprocess.run(["ip", "-n", ns, "route", "get", target], capture_output=True).returncode != 0, target
    assert mini.run("sinfo", "-h", "-N", "-o", "%N %T").stdout.split() == ["node1", "idle", "node2", "idle",
                                                                            "node3", "idle"]
    # each node's tasks see their node's own hostname and address
    seen = mini.run("srun", "-N", "3", "--ntasks-per-node=1", "sh", "-c", "echo $(hostname) $(hostname -I)").stdout
    assert sorted(seen.split("\n")[:-1]) == [f"{n} {a}" for n, (_, a) in sorted(mini.node.items())], seen


@pytest.mark.timeout(1800)  # two full sample runs; minutes on a busy CI machine
def test_sample_on_three_nodes_secure_and_survives_a_killed_worker(mini, tmp_path, sample_job):
    local = sample_job  # jobs/sample.yaml run in this process (the session's, shared with other tests)

    out, log, marker = tmp_path / "out", tmp_path / "job.log", tmp_path / "attacker-ran"
    job = mini.sbatch("-N", "3", "--ntasks-per-node=2", "--overcommit", f"--output={log}", "slurm/curate.sbatch",
                      "jobs/sample.yaml", str(out))
    m = wait_for_line(log, r"scheduler tls://([\d.]+):(\d+) on (\w+).*worker\(s\) on (\d+) node\(s\): (.*)", job, mini)
    host, port, sched_node, n_nodes, worker_hosts = m.groups()
    # the scheduler's worker list: workers sit on at least two different node addresses
    assert int(n_nodes) >= 2 and len(re.findall(r"10\.77\.\d+\.\d+", worker_hosts)) >= 2, m.group(0)
    dash = wait_for_line(log, r"dashboard at http://127\.0\.0\.1:(\d+)/status on (\w+).*\n.*loopback only; from your "
                              r"machine: ssh -J <login-node> -L (\d+):localhost:(\d+) (\w+)", job, mini)
    assert dash.group(2) == dash.group(5) == sched_node and dash.group(1) == dash.group(3) == dash.group(4), dash.group(0)

    # every socket the job's ranks listen on, on every node: the scheduler and the workers (TLS) on
    # the network; the dashboard and each worker's metrics page (HTTP) on loopback; nothing else
    ranks = mini.rank_pids(job)
    assert sorted(ranks) == [0, 1, 2, 3, 4, 5], ranks
    pids = set(ranks.values())
    exposed, loopback, seen = [], [], {}
    for node in mini.node:
        seen[node] = mini.in_node(node, "ss", "-ltnpH").stdout
        for line in seen[node].splitlines():
            bound, owners = line.split()[3], {int(p) for p in re.findall(r"pid=(\d+)", line)}
            # sockets of the ranks' own (slurmstepd's, inherited by every task, are SLURM's)
            if owners and owners <= pids:
                (loopback if bound.startswith("127.") else exposed).append((node, bound))
    assert (sched_node, f"127.0.0.1:{dash.group(1)}") in loopback and len(loopback) == 1 + 4, (loopback, ranks, seen)
    assert f"{host}:{port}" in [a for _, a in exposed] and len(exposed) == 1 + 4, (exposed, ranks, seen)
    # no certificate, no entry: from the scheduler's own node, another node and the machine itself
    for where in (sched_node, "node3", "machine"):
        tried = attack(mini, where, [a for _, a in exposed], str(marker))
        assert tried.stdout.count("refused") == 3 * len(exposed) and "CONNECTED" not in tried.stdout, \
            (where, tried.stdout, tried.stderr[-2000:])
    # the dashboard answers on the scheduler node's loopback, not on its network address
    dport = dash.group(1)
    assert http_status(mini, sched_node, f"http://127.0.0.1:{dport}/status") == "200"
    assert http_status(mini, sched_node, f"http://{host}:{dport}/status").startswith("refused")
    assert http_status(mini, "node3", f"http://{host}:{dport}/status").startswith("refused")

    # SIGKILL a worker on another node while a stage runs: Dask re-runs its tasks elsewhere
    wait_for_line(log, r"stage filter:", job, mini)
    os.kill(ranks[5], signal.SIGKILL)

    state = mini.wait(job, timeout=900)
    text = log.read_text()
    assert state["JobState"] == "COMPLETED" and state["ExitCode"] == "0:0", f"{state}\n{text[-4000:]}"
    assert "ranks ended abnormally" in text and "finished with exit code 0" in text
    assert not marker.exists()
    final = last_stage(out)
    assert final.name.endswith("tokenize") and (final / "_SUCCESS").exists()
    verify = subprocess.run([*CURATE, "verify", str(final)], cwd=ROOT, capture_output=True, text=True)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert_same_outputs(local, out)


def near_duplicate_corpus(folder, files=6, docs=500, seed=7):
    """Documents of random words over several files; about one in seven is an earlier document (of
    any file) with one word changed: a near duplicate (5-word shingles, Jaccard about 0.85)."""
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(3000)]
    texts = []
    for f in range(files):
        rows = []
        for i in range(docs):
            if texts and rng.random() < 0.15:
                words = rng.choice(texts).split()
                words[rng.randrange(len(words))] = rng.choice(vocab)
            else:
                words = [rng.choice(vocab) for _ in range(rng.randint(60, 100))]
            texts.append(" ".join(words))
            rows.append({"id": f"{f}-{i}", "text": texts[-1]})
        write_jsonl(folder / f"{f:02d}.jsonl", rows)


def test_fuzzy_dedup_survives_losing_a_whole_worker_node(mini, tmp_path):
    near_duplicate_corpus(tmp_path / "data")
    job = tmp_path / "job.yaml"
    # fuzzy_dedup's defaults, the false-positive check among them
    job.write_text(f"input: {tmp_path / 'data'}/*.jsonl\nstages: [fuzzy_dedup]\n")
    local, local_log = tmp_path / "local", tmp_path / "local.log"
    # the run without the loss, on the machine while the cluster job runs (a file, not a pipe,
    # takes its output: a full pipe would stall it)
    with open(local_log, "w") as f:
        baseline = subprocess.Popen([*CURATE, "run", str(job), "--output", str(local), "--cluster", "local"],
                                    cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)

    try:
        out, log = tmp_path / "out", tmp_path / "job.log"
        # two ranks per node in rank order: scheduler and job on one node, only workers on the others
        job_id = mini.sbatch("-N", "3", "--ntasks-per-node=2", "--distribution=block", "--overcommit",
                             f"--output={log}", "slurm/curate.sbatch", str(job), str(out))
        wait_for_line(log, r"stage fuzzy_dedup:", job_id, mini)
        ranks = mini.rank_pids(job_id)
        assert sorted(ranks) == [0, 1, 2, 3, 4, 5], ranks
        where = {rank: mini.node_of(pid) for rank, pid in ranks.items()}
        victim = max(set(where.values()) - {where[0], where[1]})
        lost = sorted(r for r, n in where.items() if n == victim)
        assert lost and min(lost) >= 2, where

        # in the middle: the first step has begun writing and the stage is not done
        work = side(out / "01-fuzzy_dedup", "_work") / "signatures"
        deadline = time.time() + 300
        while not work.exists():
            assert time.time() < deadline and mini.state(job_id).get("JobState") == "RUNNING", log.read_text()[-3000:]
            time.sleep(0.1)
        killed = time.time()
        try:
            mini.kill_node(victim)
            # SLURM declares a silent node DOWN after SlurmdTimeout (30 s here, 300 s by default), then
            # removes it from the job and ends what ran there; declaring it now takes that same path
            # while the job surely still runs, without the wait
            mini.run("scontrol", "update", f"nodename={victim}", "state=down", "reason=curate test: node lost")
            assert not (out / "01-fuzzy_dedup" / "_SUCCESS").exists(), "the stage ended before the node was lost"
            state = mini.wait(job_id, timeout=300)
            took = time.time() - killed
        finally:
            mini.start_node(victim)
        print(f"{victim} (ranks {lost}) lost: job over {took:.1f}s later")
        text = log.read_text()
        assert state["JobState"] == "COMPLETED" and state["ExitCode"] == "0:0", f"{state}\n{text[-4000:]}"
        assert f"Node failure on {victim}" in text and "finished with exit code 0" in text, text[-4000:]
        # the false-positive check ran, and near duplicates went
        assert "step verified:" in text and "fuzzy_duplicate=" in text, text[-4000:]
        assert not any(os.path.exists(f"/proc/{ranks[r]}") for r in lost)
        assert baseline.wait(timeout=600) == 0, local_log.read_text()[-3000:]
    finally:
        if baseline.poll() is None:
            # a failed check must not leave the baseline's cluster running: its own process group
            os.killpg(baseline.pid, signal.SIGKILL)
            baseline.wait()
    assert_same_outputs(local, out)


def test_failing_job_gives_the_pipeline_exit_code(mini, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\nnot json\n')
    job = tmp_path / "job.yaml"
    job.write_text(f"input: {bad}\nstages: [normalize]\n")
    log = tmp_path / "job.log"
    job_id = mini.sbatch("-N", "2", "--ntasks-per-node=2", "--overcommit", f"--output={log}", "slurm/curate.sbatch",
                         str(job), str(tmp_path / "out"))
    state = mini.wait(job_id, timeout=600)
    text = log.read_text()
    assert state["JobState"] == "FAILED" and state["ExitCode"] == "1:0", f"{state}\n{text[-3000:]}"
    assert "bad.jsonl line 2: invalid_json" in text
    assert "Traceback" not in text


def test_strong_scaling_at_one_two_and_three_nodes(mini, tmp_path):
    job = tiny_job(tmp_path, files=4, docs=100)
    out, log = tmp_path / "scaling", tmp_path / "scaling.log"
    job_id = mini.sbatch("-N", "3", "--ntasks-per-node=2", "--overcommit", f"--output={log}",
                         "slurm/strong_scaling.sbatch", str(job), str(out))
    state = mini.wait(job_id, timeout=900)
    text = log.read_text()
    assert state["ExitCode"] == "0:0", f"{state}\n{text[-4000:]}"
    rows = list(csv.DictReader((out / "scaling.csv").open()))
    assert {"nodes", "tasks", "workers", "repeat", "scaling", "exit_code", "stage", "seconds", "docs_in",
            "docs_out"} <= set(rows[0]), rows[0]
    totals = [[r["nodes"], r["tasks"], r["workers"], r["exit_code"]] for r in rows if r["stage"] == "total"]
    # one node: 2 tasks per node would leave no worker, so the script asks for 3
    assert totals == [["1", "3", "1", "0"], ["2", "4", "2", "0"], ["3", "6", "4", "0"]], rows
    summary = json.loads((out / "scaling.json").read_text())
    assert sorted(summary["strong"]["total"]["seconds"]) == ["1", "2", "3"] and (out / "scaling.png").exists()


@pytest.mark.parametrize("victim", [0, 1], ids=["scheduler-rank", "job-rank"])
def test_losing_the_scheduler_or_the_job_rank_stops_every_rank_and_resubmit_resumes(mini, tmp_path, victim):
    job = tiny_job(tmp_path)
    out, log = tmp_path / "out", tmp_path / "job.log"
    # one rank per node: scheduler on node1, job on node2, worker on node3
    args = ["-N", "3", "--ntasks-per-node=1", "slurm/curate.sbatch", str(job), str(out)]
    job_id = mini.sbatch(f"--output={log}", *args)
    wait_for_line(log, r"stage clean:", job_id, mini)
    ranks = mini.rank_pids(job_id)
    assert sorted(ranks) == [0, 1, 2], ranks
    killed = time.time()
    os.kill(ranks[victim], signal.SIGKILL)
    state = mini.wait(job_id, timeout=LOST_RANK_BOUND + 30)
    took = time.time() - killed
    print(f"rank {victim} killed: job over {took:.1f}s later")
    text = log.read_text()
    assert state["JobState"] == "FAILED" and state["ExitCode"] != "0:0", f"{state}\n{text[-4000:]}"
    assert took < LOST_RANK_BOUND, f"the other ranks took {took:.0f}s to stop\n{text[-4000:]}"
    assert not any(os.path.exists(f"/proc/{pid}") for pid in ranks.values())
    if victim == 0:
        assert "lost the Dask scheduler" in text and "finished with exit code 3" in text, text[-3000:]
    else:
        assert "job rank (MPI rank 1) disconnected" in text and "finished with exit code 137" in text, text[-3000:]
    assert (out / "01-normalize" / "_SUCCESS").exists() and not (out / "02-clean" / "_SUCCESS").exists()

    log2 = tmp_path / "again.log"
    state = mini.wait(mini.sbatch(f"--output={log2}", *args), timeout=600)
    text = log2.read_text()
    assert state["ExitCode"] == "0:0", f"{state}\n{text[-4000:]}"
    assert re.search(r"01-normalize\s+skipped", text) and re.search(r"02-clean\s+ran", text), text[-2000:]
