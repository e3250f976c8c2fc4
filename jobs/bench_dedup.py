"""Fuzzy dedup benchmarks: accuracy against brute force, MinHash speed per core, a 1M-document run.

    .venv/bin/python jobs/bench_dedup.py accuracy [--docs 3000]
    .venv/bin/python jobs/bench_dedup.py speed [--docs 20000]
    .venv/bin/python jobs/bench_dedup.py scale [--sizes 250000,500000,1000000] [--workers 2]

accuracy: a labelled set built from the Rust book sentences of jobs/data/sample.jsonl.gz: base
  documents of 10 random sentences and variants of earlier documents (variants of variants too)
  with word substitutions, deletions, insertions or a replaced sentence. The true Jaccard similarity
  of every pair (word 5-gram shingles) is computed by brute force (sparse matrix product). Truth:
  the connected components of the pairs with Jaccard >= threshold; each keeps its smallest id and
  the rest are duplicates. Reported for fuzzy_dedup (with and without --false-positive-check) and,
  side by side, for datasketch's MinHashLSH (same threshold and num_perm, so the same bands x rows;
  MinHash of the same shingles; candidates from querying every document; components by
  union-find; optionally the same true-Jaccard check on candidate pairs):
    precision / recall of the removed documents against the truth's duplicates,
    "far removals": removed documents whose best Jaccard to any kept document is below threshold-0.2,
    pair recall: share of true pairs >= threshold + 0.1 that end in one component (one cluster).
speed: MinHash signatures per second per core (one process, Arrow limited to one thread) of ours
  (from raw text: normalise, shingle, hash, 128 permutations) against a loop of
  datasketch.MinHash(128, seed, hashfunc=xxhash.xxh32_intdigest).update_batch per document over the
  same shingles, precomputed (its most favourable case); and the same loop including a plain Python
  shingler (lower, regex, split, join).
scale: synthetic documents (~1 kB, Zipf words; 10% exact copies and 10% near copies with 1% of the
  words changed), Parquet, through exact_dedup then fuzzy_dedup (defaults; connected components
  forced onto the distributed path) on a LocalCluster of --workers single-threaded workers. Per
  step: wall time; per worker: peak RSS (getrusage of each worker process, fresh per size). The
  partition size (--blocksize) is the same for every size, so the peak should not grow with it.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

THRESHOLD = 0.8
NUM_PERM = 128
SEED = 42
#: words per synthetic document: about 1 kB of text
WORDS = 100


# --------------------------------------------------------------------------- data


def sentences(path: str) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        pages = [json.loads(line) for line in f]
    seen, out = set(), []
    for d in pages:
        if d["id"].endswith(("-mirror", "-edited")):
            continue
        for s in re.split(r"(?<=[.!?])\s+", d["text"]):
            s = " ".join(s.split())
            if 6 <= len(s.split()) <= 60 and s not in seen:
                seen.add(s)
                out.append(s)
    return out


def labelled_set(pool: list[str], n_docs: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    vocab = sorted({w for s in pool for w in s.split()})
    n_base = int(n_docs * 0.4)
    docs = [" ".join(rng.sample(pool, 10)) for _ in range(n_base)]
    while len(docs) < n_docs:
        words = rng.choice(docs).split()
        kind = rng.choice(["substitute", "delete", "insert", "sentence"])
        if kind == "sentence":
            text = " ".join(words).replace(rng.choice(pool), "", 1) + " " + rng.choice(pool)
        else:
            for _ in range(int(len(words) * rng.choice([0, 0.005, 0.01, 0.02, 0.04, 0.08]))):
                i = rng.randrange(len(words))
                if kind == "substitute":
                    words[i] = rng.choice(vocab)
                elif kind == "delete" and len(words) > 10:
                    del words[i]
                else:
                    words.insert(i, rng.choice(vocab))
            text = " ".join(words)
        docs.append(text)
    order = list(range(len(docs)))
    rng.shuffle(order)
    return [{"id": f"doc-{k:05d}", "text": docs[i]} for k, i in enumerate(order)]


def brute_force_jaccard(shingle_sets: list[set]):
    import numpy as np
    import scipy.sparse as sp

    vocab: dict[str, int] = {}
    rows, cols = [], []
    for i, s in enumerate(shingle_sets):
        for sh in s:
            rows.append(i)
            cols.append(vocab.setdefault(sh, len(vocab)))
    x = sp.csr_matrix((np.ones(len(rows), dtype=np.int32), (rows, cols)), shape=(len(shingle_sets), len(vocab)))
    inter = (x @ x.T).toarray().astype(np.float64)
    size = np.diag(inter)
    union = size[:, None] + size[None, :] - inter
    with np.errstate(invalid="ignore", divide="ignore"):
        jac = np.where(union > 0, inter / union, 0.0)
    return jac


def components(n: int, pairs) -> list[int]:
    """Union-find labels (smallest index of the component) for n nodes."""
    parent = list(range(n))

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in pairs:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return [find(i) for i in range(n)]


def removed_by_components(ids: list[str], labels: list[int]) -> set[int]:
    best: dict[int, int] = {}
    for i, lab in enumerate(labels):
        if lab not in best or ids[i] < ids[best[lab]]:
            best[lab] = i
    return {i for i, lab in enumerate(labels) if best[lab] != i}


# --------------------------------------------------------------------------- accuracy


def bench_accuracy(args) -> None:
    import dask
    import numpy as np
    import pandas as pd
    import xxhash
    from datasketch import MinHash, MinHashLSH

    from app.runner import run_stage
    from modules.dedup import minhash
    from modules.dedup.fuzzy import FuzzyDedupSettings
    from modules.stage import IOSettings, settings_from_mapping

    pool = sentences(args.data)
    records = labelled_set(pool, args.docs)
    ids = [r["id"] for r in records]
    n = len(records)
    t = time.perf_counter()
    shingle_lists = [minhash.shingles(r["text"]) for r in records]
    jac = brute_force_jaccard([set(s) for s in shingle_lists])
    print(f"{n} documents ({len(pool)} source sentences); brute-force Jaccard of {n * (n - 1) // 2:,} pairs "
          f"in {time.perf_counter() - t:.1f}s")
    upper = np.triu(np.ones((n, n), dtype=bool), k=1)
    true_pairs = np.argwhere(upper & (jac >= THRESHOLD))
    truth_removed = removed_by_components(ids, components(n, true_pairs.tolist()))
    strong = np.argwhere(upper & (jac >= THRESHOLD + 0.1))
    hist = np.histogram(jac[upper & (jac > 0.2)], bins=[0.2, 0.4, 0.6, 0.7, 0.8, 0.9, 1.01])[0]
    print(f"pairs by Jaccard 0.2-0.4/0.4-0.6/0.6-0.7/0.7-0.8/0.8-0.9/0.9-1: {'/'.join(map(str, hist))}; "
          f"true duplicates to remove: {len(truth_removed)}\n")

    def score(name, removed: set[int], same_component, seconds):
        kept = np.array([i not in removed for i in range(n)])
        tp = len(removed & truth_removed)
        precision = tp / len(removed) if removed else 1.0
        recall = tp / len(truth_removed) if truth_removed else 1.0
        far = sum(1 for i in removed if jac[i, kept].max(initial=0.0) < THRESHOLD - 0.2)
        pair_recall = np.mean([same_component(i, j) for i, j in strong]) if len(strong) else 1.0
        return (name, len(removed), f"{precision:.3f}", f"{recall:.3f}", str(far), f"{pair_recall:.4f}",
                f"{seconds:.1f}")

    rows = []
    with dask.config.set(scheduler="synchronous"):
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "in.jsonl")
            with open(src, "w", encoding="utf-8") as f:
                for r in records:
                    f.write(json.dumps(r) + "\n")
            for check in (False, True):
                out = os.path.join(tmp, f"out-{check}")
                settings = settings_from_mapping(FuzzyDedupSettings, {"threshold": THRESHOLD, "num_perm": NUM_PERM,
                                                                      "false_positive_check": check}, "bench")
                t = time.perf_counter()
                run_stage("fuzzy_dedup", settings, (src,), out, IOSettings(blocksize="256KiB"))
                seconds = time.perf_counter() - t
                audit = pd.read_parquet(os.path.join(out, "_duplicates"))
                comp = dict(zip(audit["id"], audit["component"]))
                index = {d: i for i, d in enumerate(ids)}
                removed = {index[d] for d in audit.loc[audit["removed"], "id"]}
                labels = [comp.get(d, ("alone", d)) for d in ids]
                rows.append(score(f"curate fuzzy_dedup{' --false-positive-check' if check else ''}", removed,
                                  lambda i, j, labels=labels: labels[i] == labels[j], seconds))

    bands, rows_per_band = FuzzyDedupSettings().lsh_params()
    for check in (False, True):
        t = time.perf_counter()
        lsh = MinHashLSH(threshold=THRESHOLD, num_perm=NUM_PERM)
        sigs = []
        for i, sh in enumerate(shingle_lists):
            m = MinHash(NUM_PERM, SEED, hashfunc=xxhash.xxh32_intdigest)
            m.update_batch([s.encode("utf-8") for s in sh])
            sigs.append(m)
            if sh:
                lsh.insert(i, m)
        pairs = set()
        for i, m in enumerate(sigs):
            if shingle_lists[i]:
                pairs.update((min(i, j), max(i, j)) for j in lsh.query(m) if j != i)
        if check:
            pairs = {(i, j) for i, j in pairs if jac[i, j] >= THRESHOLD}
        labels = components(n, pairs)
        seconds = time.perf_counter() - t
        assert (lsh.b, lsh.r) == (bands, rows_per_band)
        rows.append(score(f"datasketch MinHashLSH{' + Jaccard check' if check else ''}",
                          removed_by_components(ids, labels), lambda i, j, labels=labels: labels[i] == labels[j],
                          seconds))

    header = ("method", "removed", "precision", "recall", f"far (<{THRESHOLD - 0.2:.1f})",
              f"pair recall (>={THRESHOLD + 0.1:.1f})", "seconds")
    print(f"threshold {THRESHOLD}, num_perm {NUM_PERM}, bands x rows {bands} x {rows_per_band}, word 5-grams\n")
    table([header, *rows])
    print("\nseconds: curate runs the whole stage (Parquet steps, synchronous scheduler); datasketch the "
          "MinHash + index + queries in memory. The truth chains (A~B~C removes C for A); with the check, "
          "curate never removes a document for one it is not itself similar to, hence fewer removals.")


def table(rows) -> None:
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    for k, r in enumerate(rows):
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip())
        if k == 0:
            print("  ".join("-" * w for w in widths))


# --------------------------------------------------------------------------- speed


def synthetic_texts(n: int, seed: int = 0, words_per_doc: int = WORDS) -> list[str]:
    import numpy as np

    rng = np.random.default_rng(seed)
    pool = sentences(os.path.join(ROOT, "jobs/data/sample.jsonl.gz"))
    vocab = np.array(sorted({w.strip(".,;:()!?\"'").lower() for s in pool for w in s.split()} - {""}))
    weights = 1.0 / np.arange(1, len(vocab) + 1) ** 1.1
    weights /= weights.sum()
    idx = rng.choice(len(vocab), size=(n, words_per_doc), p=weights)
    return [" ".join(row) for row in vocab[idx]]


def bench_speed(args) -> None:
    import pyarrow as pa
    import xxhash
    from datasketch import MinHash

    from modules.dedup import minhash

    pa.set_cpu_count(1)
    texts = synthetic_texts(args.docs, seed=1)
    real = [json.loads(line)["text"] for line in gzip.open(args.data, "rt", encoding="utf-8")]
    for label, docs in (("synthetic ~1 kB documents", texts), ("Rust book pages (~10 kB)", real * 8)):
        arr = minhash.as_large_strings(docs)
        minhash.signatures(arr[:10], NUM_PERM, SEED)  # compile / load the kernels
        times = []
        for _ in range(3):
            t = time.process_time()
            minhash.signatures(arr, NUM_PERM, SEED)
            times.append(time.process_time() - t)
        ours = len(docs) / min(times)
        k = min(len(docs), args.datasketch_docs)
        shingles = [[s.encode("utf-8") for s in minhash.shingles(x)] for x in docs[:k]]
        t = time.process_time()
        for sh in shingles:
            MinHash(NUM_PERM, SEED, hashfunc=xxhash.xxh32_intdigest).update_batch(sh)
        ds = k / (time.process_time() - t)
        t = time.process_time()
        for x in docs[:k]:
            words = re.sub(r"[^\w\s]+", " ", x.lower()).split()
            sh = [" ".join(words[i:i + 5]).encode("utf-8") for i in range(max(1, len(words) - 4))]
            MinHash(NUM_PERM, SEED, hashfunc=xxhash.xxh32_intdigest).update_batch(sh)
        ds_shingling = k / (time.process_time() - t)
        size = sum(map(len, docs)) / len(docs) / 1e3
        print(f"{label}: {len(docs)} documents, {size:.1f} k characters each, {NUM_PERM} permutations, one core")
        table([("method", "documents/s/core", "ours is x faster"),
               ("curate minhash.signatures (from raw text)", f"{ours:,.0f}", "1.0"),
               ("datasketch update_batch, shingles given", f"{ds:,.0f}", f"{ours / ds:.1f}"),
               ("datasketch update_batch + Python shingling", f"{ds_shingling:,.0f}", f"{ours / ds_shingling:.1f}")])
        print()


# --------------------------------------------------------------------------- scale


def make_synthetic(folder: str, n: int, seed: int = 0, per_file: int = 100_000, row_group: int = 10_000) -> None:
    """n documents as Parquet: 80% unique, 10% exact copies, 10% near copies (1% of words changed)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    done = os.path.join(folder, "_DONE")
    if os.path.exists(done):
        return
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(seed)
    pool = sentences(os.path.join(ROOT, "jobs/data/sample.jsonl.gz"))
    vocab = np.array(sorted({w.strip(".,;:()!?\"'").lower() for s in pool for w in s.split()} - {""}))
    weights = 1.0 / np.arange(1, len(vocab) + 1) ** 1.1
    weights /= weights.sum()
    text_bytes = 0
    for f, start in enumerate(range(0, n, per_file)):
        m = min(per_file, n - start)
        n_unique = int(m * 0.8)
        words = rng.choice(len(vocab), size=(m, WORDS), p=weights)
        src = rng.integers(0, n_unique, m - n_unique)
        words[n_unique:] = words[src]
        near = np.arange(n_unique + (m - n_unique) // 2, m)
        change = rng.random((len(near), WORDS)) < 0.01
        words[near] = np.where(change, rng.integers(0, len(vocab), (len(near), WORDS)), words[near])
        order = rng.permutation(m)
        texts = [" ".join(row) for row in vocab[words[order]]]
        ids = [f"s{start + i:08d}" for i in range(m)]
        table_ = pa.table({"id": ids, "text": texts})
        pq.write_table(table_, os.path.join(folder, f"synthetic-{f:04d}.parquet"), row_group_size=row_group)
        text_bytes += sum(len(t.encode()) for t in texts)
    with open(done, "w") as f:
        json.dump({"documents": n, "text_bytes": text_bytes}, f)


def reset_peak_rss() -> None:
    """Start a new VmHWM measurement for this process (Linux >= 4.0: write 5 to clear_refs)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def peak_rss() -> int:
    """This process's peak resident set (VmHWM: per address space, so not inherited from the parent
    the worker was spawned from, unlike getrusage's ru_maxrss)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def bench_scale(args) -> None:
    from distributed import Client, LocalCluster

    from app.runner import make_compute, run_stage
    from modules.dedup.exact import ExactDedupSettings
    from modules.dedup.fuzzy import FuzzyDedupSettings
    from modules.stage import IOSettings

    sizes = [int(s) for s in args.sizes.split(",")]
    results = []
    for n in sizes:
        data = os.path.join(args.workdir, f"data-{n}")
        t = time.perf_counter()
        make_synthetic(data, n)
        gen = time.perf_counter() - t
        with open(os.path.join(data, "_DONE")) as f:
            size_gb = json.load(f)["text_bytes"] / 1e9
        print(f"\n{n:,} documents: {size_gb:.2f} GB of text (generated in {gen:.0f}s)", flush=True)
        io = IOSettings(blocksize=args.blocksize)
        out = os.path.join(args.workdir, f"out-{n}")
        with LocalCluster(n_workers=args.workers, threads_per_worker=1, memory_limit=args.memory_limit,
                          dashboard_address=None, local_directory=os.path.join(args.workdir, "dask")) as cluster, \
                Client(cluster) as client:
            compute = make_compute(client, show_progress=False)
            client.run(reset_peak_rss)
            t = time.perf_counter()
            exact = run_stage("exact_dedup", ExactDedupSettings(), (os.path.join(data, "*.parquet"),),
                              os.path.join(out, "exact"), io, compute=compute, force=True)
            t_exact = time.perf_counter() - t
            peaks_exact = client.run(peak_rss)
            client.run(reset_peak_rss)
            t = time.perf_counter()
            fuzzy = run_stage("fuzzy_dedup", FuzzyDedupSettings(in_memory_edges=0), (os.path.join(out, "exact"),),
                              os.path.join(out, "fuzzy"), io, compute=compute, force=True)
            t_fuzzy = time.perf_counter() - t
            peaks = client.run(peak_rss)
        m = fuzzy.manifest
        steps = {k: v["seconds"] for k, v in m["steps"].items()}
        rounds = [k for k in steps if "/round-" in k]
        cc_rounds = sum(steps.pop(k) for k in rounds if k.startswith("components/"))
        steps = {("components (" + str(m["dedup"]["connected_components"]["rounds"]) + " rounds)"
                  if k == "components" else k): (v + cc_rounds if k == "components" else v) for k, v in steps.items()}
        steps["write dataset"] = m["timings"]["seconds"]
        print(f"exact_dedup: {exact.manifest['counts']['in']:,} in, removed "
              f"{exact.manifest['counts']['dropped'].get('exact_duplicate', 0):,} in {t_exact:.1f}s "
              f"(hashes {exact.manifest['steps']['hashes']['seconds']:.1f}s, duplicates "
              f"{exact.manifest['steps']['duplicates']['seconds']:.1f}s, write {exact.manifest['timings']['seconds']:.1f}s)")
        d = m["dedup"]
        print(f"fuzzy_dedup: {m['counts']['in']:,} in, removed {d['removed']:,} ({d['components']:,} components, "
              f"{d['edges']:,} edges, bands x rows {d['bands']} x {d['rows']}) in {t_fuzzy:.1f}s; "
              f"{m['partitions']} partitions of {args.blocksize}")
        table([("step", "seconds"), *[(k, f"{v:.1f}") for k, v in steps.items()]])
        peak = {w: v / 2**20 for w, v in peaks.items()}
        peak_exact = {w: v / 2**20 for w, v in peaks_exact.items()}
        print("peak RSS per worker: exact_dedup " + ", ".join(f"{v:,.0f} MiB" for v in peak_exact.values())
              + "; fuzzy_dedup " + ", ".join(f"{v:,.0f} MiB" for v in peak.values()), flush=True)
        results.append((n, size_gb, m["partitions"], t_exact, t_fuzzy, max(peak_exact.values()), max(peak.values())))
    print()
    table([("documents", "GB of text", "partitions", "exact_dedup s", "fuzzy_dedup s",
            "peak RSS/worker exact MiB", "peak RSS/worker fuzzy MiB"),
           *[(f"{n:,}", f"{gb:.2f}", p, f"{te:.0f}", f"{tf:.0f}", f"{pe:,.0f}", f"{pf:,.0f}")
             for n, gb, p, te, tf, pe, pf in results]])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="part", required=True)
    a = sub.add_parser("accuracy")
    a.add_argument("--docs", type=int, default=3000)
    a.add_argument("--data", default=os.path.join(ROOT, "jobs/data/sample.jsonl.gz"))
    s = sub.add_parser("speed")
    s.add_argument("--docs", type=int, default=20000)
    s.add_argument("--datasketch-docs", type=int, default=3000)
    s.add_argument("--data", default=os.path.join(ROOT, "jobs/data/sample.jsonl.gz"))
    c = sub.add_parser("scale")
    c.add_argument("--sizes", default="250000,500000,1000000")
    c.add_argument("--workers", type=int, default=2)
    c.add_argument("--memory-limit", default="8GiB")
    c.add_argument("--blocksize", default="64MiB")
    c.add_argument("--workdir", default="/tmp/curate-bench-dedup")
    args = p.parse_args()
    {"accuracy": bench_accuracy, "speed": bench_speed, "scale": bench_scale}[args.part](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
