"""What each stage of a run used, for ``curate plan``: CPU-seconds, peak memory per worker, bytes moved
between workers, and the scheduler's share.

The runner snapshots every worker process (``client.run``) and the scheduler (``run_on_scheduler``)
before and after each stage; without a cluster (``--cluster threads``) it snapshots this process, which
then did all the work. The differences go to ``<job output>/_reports/resources.json``, one entry per
stage folder, where ``curate bench record`` (:func:`curate.app.bench.record_rows`) reads them. Output
and ``_work`` bytes are not measured here: the stage manifests list every file with its size.

- CPU-seconds: user + system time of each worker process, of its children that ended (extraction
  sandboxes, reaped) and of its children still running (from /proc), summed over workers.
- Peak memory: each worker's VmHWM (peak resident set), reset before the stage by writing 5 to
  /proc/self/clear_refs (Linux >= 4.0); the largest over the workers counts. Before the reset the
  worker hands back what its allocators hold free (Arrow's pool, glibc's ``malloc_trim``): otherwise a
  stage starts at what the last one left resident (at 1M pages tokenize "peaked" at 771 MiB, most of it
  fuzzy dedup's free heap) and the worker keeps it for the rest of the run.
- Shuffle bytes: what workers sent each other: task results fetched by another worker
  (``transfer_outgoing_bytes_total``) plus P2P shuffle shards (the shuffle's comms digests; these
  include each worker's shards to itself, 1/workers of them on a balanced shuffle).
- Dask tasks: the scheduler's count of tasks it sent to workers.
- The head's CPU, children never counted (a local cluster's workers are this process's children):
  ``client_cpu_seconds``, the CPU of the thread that plans the stage (curate's own code: graphs,
  steps, manifests), and ``scheduler_cpu_seconds``, the scheduler's process's own CPU, less that
  thread's when the scheduler lives in this process (a local cluster: then it is the event loop's
  threads, the client's comms included). ``curate plan`` takes both as the serial part.

Measuring never fails a run: a snapshot that cannot be taken is logged and the stage has no entry.
"""

from __future__ import annotations

import json
import logging
import os
import time

log = logging.getLogger("curate.resources")

#: under the job output's ``_reports/`` (curate's own folder in any output: never part of a stage's data)
RESOURCES = "resources.json"


# --------------------------------------------------------------------------- one process


def release_free_memory() -> None:
    """Give the operating system back the memory this process's allocators hold free: Arrow's pool
    (when Arrow is loaded) and glibc's heap (``malloc_trim``, where the C library has it).

    No ``gc.collect()`` first: a full collection walks every object of every imported module, 0.04 to
    0.15 CPU-s of a worker at each stage boundary (0.5 of the 4.3 CPU-s a worker cost over an empty
    partition), and on the scaling job at 2,000 pages it found 20 to 155 objects and left the resident
    set unchanged at every boundary: the stages' frames are freed by reference counting."""
    import ctypes
    import sys

    if "pyarrow" in sys.modules:
        sys.modules["pyarrow"].default_memory_pool().release_unused()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: its heap stays as it is
        pass


def reset_peak_rss() -> None:
    """Start a new VmHWM measurement for this process (Linux >= 4.0: write 5 to clear_refs)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:  # not Linux, or not allowed: the peak then covers the process's life (an upper bound)
        pass


def peak_rss() -> int:
    """This process's peak resident set since the last reset (VmHWM), in bytes; 0 where unknown."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _live_children_cpu(pid: int) -> float:
    """CPU-seconds of ``pid``'s descendants still running (utime + stime + their reaped children)."""
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, list[tuple[int, float]]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return 0.0
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:  # ended meanwhile
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) ": the comm may hold spaces
        # fields[1] is ppid; fields[11..14] are utime, stime, cutime, cstime (stat fields 14-17)
        cpu = sum(int(v) for v in fields[11:15]) / tick
        parents.setdefault(int(fields[1]), []).append((int(name), cpu))
    total, todo = 0.0, [pid]
    while todo:
        for child, cpu in parents.get(todo.pop(), ()):
            total += cpu
            todo.append(child)
    return total


def own_cpu() -> float:
    """CPU-seconds of this process alone, no child counted."""
    t = os.times()
    return t.user + t.system


def process_cpu() -> float:
    """CPU-seconds of this process and all its children, ended or running."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system + _live_children_cpu(os.getpid())


def snapshot(dask_worker=None, reset: bool = False) -> dict:
    """This process's counters (run in each worker by ``client.run``, which passes ``dask_worker``).
    ``reset``: start a new peak-memory measurement afterwards."""
    shuffle = 0
    if dask_worker is not None:
        shuffle = int(getattr(dask_worker, "transfer_outgoing_bytes_total", 0))
        for key, value in getattr(dask_worker, "digests_total", {}).items():
            # ("p2p", span, "background-comms", "process", "bytes"): shards the shuffle sent
            if isinstance(key, tuple) and key[:1] == ("p2p",) and "background-comms" in key \
                    and key[-2:] == ("process", "bytes"):
                shuffle += int(value)
    snap = {"pid": os.getpid(), "host": os.uname().nodename, "cpu": process_cpu(), "peak": peak_rss(),
            "shuffle": shuffle}
    if reset:
        release_free_memory()
        reset_peak_rss()
    return snap


def scheduler_snapshot(dask_scheduler=None) -> dict:
    """The scheduler's counters and its workers' threads (one round trip for both)."""
    workers = getattr(dask_scheduler, "workers", {}) or {}
    return {"tasks": int(getattr(dask_scheduler, "n_tasks", 0)), "cpu": own_cpu(), "pid": os.getpid(),
            "host": os.uname().nodename, "threads": sum(int(getattr(w, "nthreads", 0)) for w in workers.values())}


def client_snapshot() -> dict:
    """This process (the client) and its planning thread (the one measuring: the runner's)."""
    import time

    return {"cpu": own_cpu(), "thread": time.thread_time(), "pid": os.getpid(), "host": os.uname().nodename}


# --------------------------------------------------------------------------- a stage


class Meter:
    """Snapshots around each stage of a run on ``client`` (None: this process does the work)."""

    def __init__(self, client, input_bytes: int | None = None):
        self.client = client
        self.input_bytes = input_bytes

    def record(self, output: str, folder: str, before: dict | None, seconds: float, then: bool = False) -> dict | None:
        """The stage that ran since ``before`` into the job output's record. ``then``: another stage
        follows, and the snapshot taken here also starts it (returned): counters are read before the
        peak is reset, so one snapshot ends a stage and begins the next. A snapshot is two round trips
        to every worker; at 6 quarter-core nodes each boundary between stages took 0.3-0.7 s."""
        if before is None:
            return self.before() if then else None
        try:
            now = self._take(reset=then)
        except Exception as e:
            log.warning("resources: no snapshot after the stage (%s: %s); it is not measured", type(e).__name__, e)
            return self.before() if then else None
        record(output, folder, measured(before, now, seconds), self.input_bytes)
        return now if then else None

    def before(self) -> dict | None:
        try:
            return self._take(reset=True)
        except Exception as e:  # measuring is a courtesy: the run goes on without it
            log.warning("resources: no snapshot before the stage (%s: %s); it is not measured", type(e).__name__, e)
            return None

    def _take(self, reset: bool) -> dict:
        if self.client is None:
            import dask

            threads = dask.config.get("num_workers", None) or os.cpu_count() or 1
            return {"workers": {"here": snapshot(reset=reset)}, "threads": threads, "scheduler": None,
                    "client": None}
        scheduler = self.client.run_on_scheduler(scheduler_snapshot)  # with the workers' threads
        return {"workers": self.client.run(snapshot, reset=reset), "threads": scheduler.pop("threads"),
                "scheduler": scheduler, "client": client_snapshot()}


def measured(before: dict, after: dict, seconds: float) -> dict:
    """The stage's resources from two snapshots. A worker that joined during the stage counts from
    zero; one that left is not counted (its counters left with it). Workers that share a process
    (threads in one process) count once."""
    cpu = shuffle = peak = 0
    seen = set()
    for address, now in after["workers"].items():
        if (now["host"], now["pid"]) in seen:
            continue
        seen.add((now["host"], now["pid"]))
        then = before["workers"].get(address)
        if then is not None and then["pid"] != now["pid"]:  # restarted: new counters
            then = None
        cpu += now["cpu"] - (then["cpu"] if then else 0.0)
        shuffle += now["shuffle"] - (then["shuffle"] if then else 0)
        peak = max(peak, now["peak"])
    result = {"seconds": round(seconds, 3), "workers": len(seen), "cores": after["threads"],
              "cpu_seconds": round(cpu, 3), "peak_worker_bytes": int(peak), "shuffle_bytes": int(shuffle)}
    if after.get("scheduler") and before.get("scheduler"):
        result["dask_tasks"] = after["scheduler"]["tasks"] - before["scheduler"]["tasks"]
        result["scheduler_cpu_seconds"] = round(after["scheduler"]["cpu"] - before["scheduler"]["cpu"], 3)
        c0, c1, s1 = before.get("client"), after.get("client"), after["scheduler"]
        if c0 and c1:
            thread = max(0.0, c1["thread"] - c0["thread"])
            result["client_cpu_seconds"] = round(thread, 3)
            if (s1.get("host"), s1.get("pid")) == (c1["host"], c1["pid"]):  # the scheduler runs in this process
                result["scheduler_cpu_seconds"] = round(max(0.0, result["scheduler_cpu_seconds"] - thread), 3)
                result["scheduler_in_client"] = True
    return result


# --------------------------------------------------------------------------- the record


def path_of(output: str) -> str:
    return os.path.join(output, "_reports", RESOURCES)


def load(output: str) -> dict:
    """The job output's record: ``{"input_bytes": ..., "stages": {stage folder: resources}}``;
    empty when none was written."""
    try:
        with open(path_of(output), encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return {}
    if not isinstance(doc, dict) or not isinstance(doc.get("stages"), dict):
        return {}
    return doc


def record(output: str, folder: str, resources: dict | None, input_bytes: int | None = None) -> None:
    """Add (or replace) stage folder ``folder``'s entry in the job output's record; ``input_bytes``: the
    job's input on disk (what a plan scales from). A stage skipped as up to date keeps the entry of the
    run that computed it."""
    if not resources or "://" in output:  # unmeasured; a remote output has no local _reports/
        return
    from curate.stages.dataset import write_json
    from curate.stages.output import refuse_link

    try:
        path = path_of(output)
        refuse_link(output, path)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        doc = load(output) or {"stages": {}}
        if input_bytes is not None:
            doc["input_bytes"] = int(input_bytes)
        doc["stages"][folder] = {**resources, "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        write_json(path, doc)
    except Exception as e:
        log.warning("resources: %s not recorded (%s: %s)", folder, type(e).__name__, e)
