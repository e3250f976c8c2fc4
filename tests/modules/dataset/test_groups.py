"""Several small input partitions a task (modules/dataset/groups.py): the runs by hand, a brute-force
check of their shape, and the same bytes whichever way the partitions are grouped (the oracle: one
task per partition, as before)."""

import hashlib
import os
import random

import pytest

from curate.stages.dataset import groups
from curate.stages.dataset.groups import TASK_BYTES, task_groups
from tests.conftest import write_jsonl

original = task_groups

KB = 1 << 10


def test_no_partitions_no_tasks():
    assert task_groups([], 4) == []


def test_large_partitions_are_a_task_each():
    assert task_groups([TASK_BYTES] * 5, 1) == [[0], [1], [2], [3], [4]]
    assert task_groups([3 * TASK_BYTES, TASK_BYTES], 1) == [[0], [1]]


def test_small_partitions_share_tasks_by_bytes_but_keep_four_per_thread():
    # the grain: 6,000 pages in 96 files of ~160 kB, 2 worker threads: 8 tasks of 12 files
    assert task_groups([160 * KB] * 96, 2) == [list(range(k, k + 12)) for k in range(0, 96, 12)]
    # the same pages in 24 files: still 8 tasks (the head's work does not follow the file count)
    assert task_groups([640 * KB] * 24, 2) == [list(range(k, k + 3)) for k in range(0, 24, 3)]
    # 6 threads and 24 partitions: one each (a sweep's 6 nodes lose no parallelism)
    assert task_groups([640 * KB] * 24, 6) == [[i] for i in range(24)]
    # fewer partitions than 4 per thread: one each
    assert task_groups([KB] * 3, 8) == [[0], [1], [2]]


def test_bytes_decide_beyond_the_threads():
    # 100 partitions of 8 MiB = 800 MiB: 25 tasks of 32 MiB on one thread (more than 4 per thread)
    runs = task_groups([8 << 20] * 100, 1)
    assert len(runs) == 25 and all(len(r) == 4 for r in runs)


def test_a_large_partition_among_small_ones_is_a_task_of_its_own():
    sizes = [KB] * 10 + [40 << 20] + [KB] * 10
    runs = task_groups(sizes, 1)
    assert [10] in runs
    assert sum(len(r) for r in runs) == 21


def test_unknown_or_empty_sizes_count_alike():
    assert task_groups([0] * 16, 1) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15]]


@pytest.mark.parametrize("seed", range(30))
def test_runs_are_consecutive_cover_every_partition_and_stay_within_bounds(seed):
    """Brute force over random sizes and thread counts: the runs are consecutive and in order, cover
    each partition once, are at most the target count, and none but a single partition holds more
    than twice a run's share of the bytes."""
    rng = random.Random(seed)
    n = rng.randint(1, 300)
    sizes = [rng.choice([0, KB, 100 * KB, 4 << 20, 40 << 20]) for _ in range(n)]
    slots = rng.randint(1, 16)
    runs = task_groups(sizes, slots)
    assert [i for r in runs for i in r] == list(range(n))
    assert all(r for r in runs)
    total = sum(sizes) or n
    want = min(n, max(1, -(-total // TASK_BYTES), 4 * slots))
    assert len(runs) <= want
    if want == n:
        assert len(runs) == n
    share = total / want
    weights = sizes if sum(sizes) else [1] * n
    for r in runs:
        assert len(r) == 1 or sum(weights[i] for i in r) <= 2 * share + max(weights[i] for i in r)


def test_piece_bytes_share_a_file_among_its_pieces(tmp_path):
    from curate.stages.dataset.pieces import Piece

    f = tmp_path / "a.parquet"
    f.write_bytes(b"x" * 900)
    pieces = [Piece(str(f), "a", "parquet", row_groups=(0,)), Piece(str(f), "a", "parquet", row_groups=(1, 2)),
              Piece(str(tmp_path / "b.jsonl"), "b", "jsonl", 100, 350), Piece("s3://bucket/c.parquet", "c", "parquet")]
    assert groups.piece_bytes(pieces) == [450, 450, 250, TASK_BYTES]


def _digests(root):
    out = {}
    for d, _, files in os.walk(root):
        for name in files:
            if name.endswith((".parquet", ".bin", ".idx")):
                path = os.path.join(d, name)
                out[os.path.relpath(path, root)] = hashlib.md5(open(path, "rb").read()).hexdigest()
    return out


def _counts(root):
    import json

    out = {}
    for stage in sorted(os.listdir(root)):
        path = os.path.join(root, stage, "_manifest.json")
        if os.path.exists(path):
            m = json.load(open(path))
            out[stage] = (m.get("counts"), m.get("partitions"), m.get("score_sample"), m.get("totals"))
    return out


@pytest.mark.slow  # a five-stage job, three times
def test_the_same_bytes_whichever_way_partitions_are_grouped(tmp_path, monkeypatch):
    """12 JSONL partitions (one empty, one with exact and near copies across files) through clean,
    filter, exact and fuzzy dedup and tokens: grouped in 2 tasks by bytes, 12 a task, and one task per partition
    (the former way) write the same files, counts and score samples."""
    from curate.app import runner

    rng = random.Random(3)
    words = "river bread library valley stone water flour yeast member quiet study far near old".split()
    base = [" ".join(rng.choice(words) for _ in range(50)) for _ in range(30)]
    for f in range(12):
        docs = [] if f == 5 else [{"id": f"d{f:02d}-{i:02d}", "text": base[(f * 7 + i) % len(base)] +
                                   (" changed" if i % 4 == 0 else "")} for i in range(15)]
        write_jsonl(tmp_path / "in" / f"{f:02d}.jsonl", docs)
    (tmp_path / "f.yaml").write_text("filters:\n  - {filter: word_count, min: 5}\n")
    (tmp_path / "job.yaml").write_text(
        f"input: {tmp_path}/in/*.jsonl\nstages:\n  - clean: {{}}\n  - filter: {{config: {tmp_path}/f.yaml}}\n"
        "  - exact_dedup: {}\n  - fuzzy_dedup: {}\n  - tokenize: {tokenizer: 'tiktoken:cl100k_base'}\n")
    job = runner.load_job(str(tmp_path / "job.yaml"))
    seen, largest = {}, {}
    for name, task_bytes, per_slot in (("two", TASK_BYTES, 1), ("one", TASK_BYTES, 0), ("each", 1, 1)):
        runs_seen = []

        def grouping(sizes, slots, task_bytes=task_bytes, per_slot=per_slot, runs_seen=runs_seen):
            runs_seen.append(original(sizes, 2, task_bytes, per_slot))
            return runs_seen[-1]

        monkeypatch.setattr(groups, "task_groups", grouping)
        runner.run_job(job, str(tmp_path / name), compute=runner.make_compute(None, show_progress=False))
        seen[name] = (_digests(tmp_path / name), _counts(tmp_path / name))
        largest[name] = max(len(r) for runs in runs_seen for r in runs)
    assert largest["each"] == 1 and 1 < largest["two"] < 12 and largest["one"] == 12
    assert len(seen["each"][0]) > 24
    assert seen["two"] == seen["each"] and seen["one"] == seen["each"]


class _Out:
    """As much of a stage output as write_partition uses: nothing is written."""

    def intend(self, key, names):
        pass

    def write_frame(self, name, df, fmt):
        return {"path": name, "rows": len(df)}

    def record_done(self, key, run, files, stats):
        pass


def test_a_group_combines_its_own_sides_so_a_collecting_task_merges_one_per_group():
    """1M pages: 64 groups of 7 partitions reached one collecting task as 450 score samples (a 1.2 GB
    worker in the filter stage); a group's sides are combined in its own task, so a collecting task
    merges FAN_IN sides whatever the groups' size."""
    import pandas as pd

    from curate.stages.dataset.write import FAN_IN, _collect, _make_and_write_group

    calls = []

    def combine(sides):
        calls.append(len(sides))
        return {"docs": sum(s["docs"] for s in sides)}

    def make(n):
        return pd.DataFrame({"id": [f"d{n}-{i}" for i in range(n)], "text": ["x"] * n})

    def prepare(df):
        return df, {"docs": len(df)}

    group = _make_and_write_group(make, [(n,) for n in range(1, 8)], list(range(7)), _Out(), "parquet", None, "r",
                                  (), prepare, combine)
    assert calls == [7] and group["side"] == {"docs": 28}
    assert [s["partition"] for s in group["stats"]] == list(range(7)) and "side" not in group["stats"][0]
    top = _collect([group] * FAN_IN, combine)
    assert calls[-1] == FAN_IN and top["side"] == {"docs": 28 * FAN_IN} and len(top["stats"]) == 7 * FAN_IN
    # without a side to combine a group is its partitions' results, as before
    plain = _make_and_write_group(make, [(1,), (2,)], [0, 1], _Out(), "parquet", None, "r", (), None)
    assert [s["partition"] for s in plain] == [0, 1]
