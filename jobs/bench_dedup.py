"""Fuzzy dedup benchmarks: accuracy against brute force, MinHash speed per core, a 1M-document run.

    .venv/bin/python jobs/bench_dedup.py accuracy [--docs 3000]
    .venv/bin/python jobs/bench_dedup.py speed [--docs 20000]
    .venv/bin/python jobs/bench_dedup.py scale [--sizes 250000,1000000,4000000] [--giant K] [--workers 2]
    .venv/bin/python jobs/bench_dedup.py giant [--unrelated 18000] [--copies 2000] [--workers 2]
    .venv/bin/python jobs/bench_dedup.py synthetic [--sizes 250000,500000,1000000] [--workers 2]
    .venv/bin/python jobs/bench_dedup.py incremental [--docs 500000] [--fraction 0.1] [--workers 2]
    .venv/bin/python jobs/bench_dedup.py audit [--docs 2000] [--near 0.1] [--copies 0] [--repeat 3]

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
scale (issue 30, as a new user runs it): news-like documents (8 to 25 real sentences of the sample,
  about 1.3 kB), one in ten a near copy of an earlier document (0.5-2% of the words changed; copies of
  copies form chains and trees), optionally --giant K copies of one 620-word page with 1% of the words
  changed (issue 35's giant cluster), as Parquet; then ``curate dedup fuzzy`` through the CLI with
  --workers and --memory-limit (2 and 2GiB) and every other setting at its default, in a subprocess.
  The process tree is sampled every 0.2 s (psutil): wall, CPU seconds of the whole tree (getrusage of
  the reaped children), peak RSS per process, worker restarts (worker processes beyond --workers, and
  the log's restart lines), MB of text per CPU second; from the manifest: rounds, survivors, removed.
  --kind measures another dedup path the same way: fuzzy-no-check, fuzzy-save-index, exact.
giant (issue 35): --copies copies of one 620-word page (1% of the words changed at random: pairwise
  Jaccard 0.7-0.95, a quarter of the pairs below 0.8) among --unrelated unrelated documents, through
  the CLI as scale runs it; reports copies kept, unrelated documents removed, rounds, wall, CPU
  seconds and peak RSS per process. --unrelated 900000 --copies 100000 is the 1M case.
substrings (issue 33): ``curate dedup substrings`` (every setting at its default) on the scale corpus
  (without its giant cluster) at --sizes-mb MB of text, measured as scale is: MB of text per CPU
  second, wall, peak RSS per process, restarts, documents changed, bytes removed, documents dropped.
synthetic (formerly scale): synthetic documents (~1 kB, Zipf words; 10% exact copies and 10% near copies with 1% of the
  words changed), Parquet, through exact_dedup then fuzzy_dedup (defaults; connected components
  forced onto the distributed path) on a LocalCluster of --workers single-threaded workers. Per
  step: wall time; per worker: peak RSS (getrusage of each worker process, fresh per size). The
  partition size (--blocksize) is the same for every size, so the peak should not grow with it.
incremental: what adding a snapshot costs (issue 21: at most a quarter of deduplicating A + B from
  scratch). Snapshot A: --docs synthetic documents as for scale (column snapshot = 1); snapshot B:
  --fraction of A's size (snapshot = 2), a tenth of it exact copies of A's documents, a tenth near
  copies (1% of the words changed), the rest new (with B's own copies, as scale makes them). Per kind
  (exact, fuzzy with the defaults), on one LocalCluster of --workers single-threaded workers: dedup(A)
  with --save-index (the index is made once, not part of the comparison), then dedup(B --against
  index(A)) and the reference dedup(A + B --keep oldest:snapshot) from scratch, alternated --repeat
  times (the best of each); also dedup(B --against --save-index) (a new union index). Prints wall
  times and the ratio against the target 0.25, and checks the contract on the way: both remove the
  same documents of B.
audit (issue 42, point 2): CPU seconds of the accuracy audit (modules/dedup/fuzzy/audit.py) at its default
  sample, in one process, on --docs pages of about 500 words (real paragraphs of the sample, so unrelated
  pages share some), --near of them edited copies of earlier pages (``edit``: substitutions, boilerplate,
  reordered or added paragraphs...), and --copies copies of one page with 1% of the words changed (a
  sampled near-duplicate cloud); the sets are in memory (no reads), no document removed. Best of --repeat
  (process_time: the machine may be busy); prints the close pairs and the comparisons made.
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


#: lines that sites wrap around copied articles (the "boilerplate added" edit)
BOILERPLATE = [
    "Share this article on Facebook Twitter LinkedIn Email",
    "Subscribe to our newsletter to get the latest updates delivered to your inbox every week.",
    "This website uses cookies to improve your experience. By continuing to browse you accept our cookie policy.",
    "Copyright 2024 All rights reserved. Reproduction without permission is prohibited.",
    "Related posts: How to get started, Ten tips for beginners, What we learned this year",
    "Posted by admin in Uncategorized | Leave a comment",
    "Advertisement",
    "Click here to read more stories like this one from our archive.",
    "Home > Blog > Programming > Tutorials",
    "Sign in or create an account to save articles for later.",
]


def paragraphs(path: str) -> list[str]:
    """The distinct paragraphs (8 words or more) of the Rust book pages of the sample."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        pages = [json.loads(line) for line in f]
    seen, out = set(), []
    for d in pages:
        if d["id"].endswith(("-mirror", "-edited")):
            continue
        for p in d["text"].split("\n\n"):
            p = " ".join(p.split())
            if len(p.split()) >= 8 and p not in seen:
                seen.add(p)
                out.append(p)
    return out


def edit(doc: list[str], rng: random.Random, pool: list[str], vocab: list[str]) -> list[str]:
    """An edited copy of ``doc`` (a list of paragraphs): one to three edits of the kinds a crawl
    holds (word substitutions, deletions or insertions at a random rate, reordered paragraphs, a
    paragraph dropped or added, boilerplate around the text, case and punctuation changes)."""
    doc = list(doc)
    for kind in rng.sample(["substitute", "delete", "insert", "reorder", "paragraph", "boilerplate", "case"],
                           rng.choice([1, 1, 2, 3])):
        if kind in ("substitute", "delete", "insert"):
            rate = rng.choice([0.002, 0.005, 0.01, 0.02, 0.04, 0.08, 0.15])
            out = []
            for p in doc:
                words = p.split()
                for _ in range(sum(rng.random() < rate for _ in words)):
                    i = rng.randrange(len(words))
                    if kind == "substitute":
                        words[i] = rng.choice(vocab)
                    elif kind == "delete" and len(words) > 3:
                        del words[i]
                    else:
                        words.insert(i, rng.choice(vocab))
                out.append(" ".join(words))
            doc = out
        elif kind == "reorder" and len(doc) > 1:
            if rng.random() < 0.5:
                i, j = rng.sample(range(len(doc)), 2)
                doc[i], doc[j] = doc[j], doc[i]
            else:
                rng.shuffle(doc)
        elif kind == "paragraph":
            if len(doc) > 2 and rng.random() < 0.5:
                del doc[rng.randrange(len(doc))]
            else:
                doc.insert(rng.randrange(len(doc) + 1), rng.choice(pool))
        elif kind == "boilerplate":
            head = rng.sample(BOILERPLATE, rng.randint(0, 2))
            tail = rng.sample(BOILERPLATE, rng.randint(1, 3))
            doc = head + doc + tail
        elif kind == "case":
            doc = [p.upper() if rng.random() < 0.3 else p.replace(",", " ,").replace(". ", "! ") for p in doc]
    return doc


def edited_corpus(pool: list[str], n_docs: int, seed: int = 0) -> list[dict]:
    """Half base documents (2 to 12 real paragraphs, so unrelated documents share some), half
    edited copies of earlier documents (copies of copies too), in random order."""
    rng = random.Random(seed)
    vocab = sorted({w for p in pool for w in p.split()})
    docs = [rng.sample(pool, rng.randint(2, 12)) for _ in range(n_docs // 2)]
    while len(docs) < n_docs:
        docs.append(edit(rng.choice(docs), rng, pool, vocab))
    order = list(range(len(docs)))
    rng.shuffle(order)
    return [{"id": f"doc-{k:06d}", "text": "\n\n".join(docs[i])} for k, i in enumerate(order)]


def similar_pairs(shingle_sets: list[set], floor: float):
    """(i, j, Jaccard) for every pair i < j of Jaccard >= floor, by brute force: the exact
    intersection size of every pair of shingle sets (a sparse matrix product)."""
    import numpy as np
    import scipy.sparse as sp

    vocab: dict[str, int] = {}
    rows, cols = [], []
    for i, s in enumerate(shingle_sets):
        for sh in s:
            rows.append(i)
            cols.append(vocab.setdefault(sh, len(vocab)))
    x = sp.csr_matrix((np.ones(len(rows), dtype=np.int32), (rows, cols)),
                      shape=(len(shingle_sets), max(len(vocab), 1)))
    inter = sp.triu(x @ x.T, k=1).tocoo()
    size = np.array([len(s) for s in shingle_sets], dtype=np.float64)
    jac = inter.data / (size[inter.row] + size[inter.col] - inter.data)
    keep = jac >= floor
    return inter.row[keep].astype(np.int64), inter.col[keep].astype(np.int64), jac[keep]


# --------------------------------------------------------------------------- accuracy


class Truth:
    """The brute-force answer for one corpus, and the issue's two measures of a dedup result."""

    def __init__(self, records: list[dict], threshold: float):
        import numpy as np

        from curate.stages.dedup import minhash

        self.n = len(records)
        self.threshold = threshold
        sets = [set(minhash.shingles(r["text"])) for r in records]
        i, j, jac = similar_pairs(sets, threshold - 0.1)
        self.i, self.j, self.jac = i, j, jac
        strong = jac >= threshold + 0.05
        self.strong = (i[strong], j[strong])
        self.hist = np.histogram(jac, bins=[threshold - 0.1, threshold, threshold + 0.05, threshold + 0.1, 1.01])[0]

    def score(self, removed, labels) -> tuple[float, float, int]:
        """(recall, precision, far removals).

        recall: share of the pairs of Jaccard >= threshold + 0.05 whose two documents end in one
        component (``labels``: a component label per document, None when in none);
        precision: share of the removed documents whose best Jaccard to a kept document is at
        least threshold - 0.1 (far removals are the others)."""
        import numpy as np

        a, b = self.strong
        same = [labels[x] is not None and labels[x] == labels[y] for x, y in zip(a.tolist(), b.tolist())]
        recall = float(np.mean(same)) if same else 1.0
        removed_mask = np.zeros(self.n, dtype=bool)
        removed_mask[list(removed)] = True
        # the best Jaccard of each removed document to a kept one, over pairs >= threshold - 0.1
        close = np.zeros(self.n, dtype=bool)
        for x, y in ((self.i, self.j), (self.j, self.i)):
            ok = removed_mask[x] & ~removed_mask[y]
            close[x[ok]] = True
        far = int((removed_mask & ~close).sum())
        precision = 1.0 - far / removed_mask.sum() if removed_mask.any() else 1.0
        return recall, precision, far


def run_curate(records: list[dict], tmp: str, settings: dict) -> tuple[set[int], list, float, dict]:
    """Run the fuzzy_dedup stage (synchronous scheduler) on the records; (removed, labels, seconds, manifest)."""
    import dask
    import pandas as pd

    from curate.app.runner import run_stage
    from curate.stages.dedup.fuzzy import FuzzyDedupSettings
    from curate.stages.stage import IOSettings, settings_from_mapping

    src = os.path.join(tmp, "in.jsonl")
    if not os.path.exists(src):
        with open(src, "w", encoding="utf-8") as f:
            for r in records:
                f.write(json.dumps(r) + "\n")
    out = os.path.join(tmp, "out-" + "-".join(f"{k}={v}" for k, v in sorted(settings.items())))
    config = settings_from_mapping(FuzzyDedupSettings, settings, "bench")
    with dask.config.set(scheduler="synchronous"):
        t = time.process_time()  # CPU time: one process, so load from other jobs does not count
        outcome = run_stage("fuzzy_dedup", config, (src,), out, IOSettings(blocksize="256KiB"), force=True)
        seconds = time.process_time() - t
    audit = pd.read_parquet(os.path.join(f"{out}.side", "_duplicates"))  # the stage's side folder
    index = {r["id"]: k for k, r in enumerate(records)}
    comp = dict(zip(audit["id"], audit["component"]))
    removed = {index[d] for d in audit.loc[audit["removed"], "id"]}
    labels = [comp.get(r["id"]) for r in records]
    return removed, labels, seconds, outcome.manifest


#: bands x rows compared by ``accuracy`` (128 permutations; 14 x 8 is datatrove's default, 9 x 13
#: datasketch's optimal-parameter rule at 0.8)
GRID = [(9, 13), (14, 8), (16, 8), (18, 7), (21, 6), (25, 5), (32, 4)]


def bench_accuracy(args) -> None:
    import tempfile

    from curate.stages.dedup.fuzzy import FuzzyDedupSettings

    pool = paragraphs(args.data)
    threshold = args.threshold
    default = FuzzyDedupSettings(threshold=threshold)
    d_bands, d_rows = default.lsh_params()
    configs = [("default", {"threshold": threshold})]
    if not args.defaults_only:
        configs.append(("default without --false-positive-check", {"threshold": threshold, "false_positive_check": False}))
        for b, r in GRID:
            if (b, r) != (d_bands, d_rows):
                configs.append((f"{b} x {r}", {"threshold": threshold, "bands": b, "rows": r,
                                               "false_positive_check": True}))
    print(f"threshold {threshold}; defaults: {d_bands} bands x {d_rows} rows of {default.num_perm}, "
          f"{default.shingle} {default.ngram}-grams, false-positive check "
          f"{'on' if default.false_positive_check else 'off'}\n")
    with tempfile.TemporaryDirectory() as tmp:  # warm up: compile the kernels outside the timings
        run_curate(edited_corpus(pool, 50, seed=1), tmp, {"threshold": threshold})
    summary = []
    for n in [int(s) for s in args.sizes.split(",")]:
        records = edited_corpus(pool, n, seed=args.seed)
        t = time.perf_counter()
        truth = Truth(records, threshold)
        h = truth.hist
        print(f"{n:,} documents ({len(pool):,} source paragraphs): brute-force Jaccard in {time.perf_counter() - t:.1f}s; "
              f"pairs {threshold - 0.1:.2f}-{threshold:.2f}: {h[0]:,}, {threshold:.2f}-{threshold + 0.05:.2f}: {h[1]:,}, "
              f">= {threshold + 0.05:.2f} (recall counts these): {h[2] + h[3]:,}")
        rows = [("settings", "removed", "recall", "precision", f"far (<{threshold - 0.1:.2f})", "candidate edges",
                 "CPU seconds")]
        with tempfile.TemporaryDirectory() as tmp:
            for label, settings in configs:
                removed, labels, seconds, manifest = run_curate(records, tmp, settings)
                recall, precision, far = truth.score(removed, labels)
                d = manifest["dedup"]
                rows.append((f"{label} ({d['bands']} x {d['rows']})" if label.startswith("default") else label,
                             f"{len(removed):,}", f"{recall:.4f}", f"{precision:.4f}", str(far),
                             f"{d['edges']:,}", f"{seconds:.1f}"))
                summary.append((f"{n:,}", rows[-1][0], *rows[-1][2:4], rows[-1][6]))
        table(rows)
        print(flush=True)
    print("recall: share of pairs of true Jaccard >= threshold + 0.05 that end in one component; precision: share of "
          "removed documents whose best true Jaccard to a kept document is >= threshold - 0.1; CPU seconds: the "
          "whole stage (Parquet steps, synchronous scheduler, one process).")


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

    from curate.stages.dedup import minhash

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


def bench_synthetic(args) -> None:
    from distributed import Client, LocalCluster

    from curate.app.runner import make_compute, run_stage
    from curate.stages.dedup.exact import ExactDedupSettings
    from curate.stages.dedup.fuzzy import FuzzyDedupSettings
    from curate.stages.stage import IOSettings

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


# --------------------------------------------------------------------------- scale and giant (issues 30 and 35)

#: words of the giant cluster's page (issue 35's case)
GIANT_WORDS = 620


def news_corpus(folder: str, n: int, near: float = 0.1, giant: int = 0, seed: int = 0, per_file: int = 100_000) -> dict:
    """``n`` news-like documents (8 to 25 sentences of the sample) as Parquet, ``near`` of them near copies
    of an earlier one (0.5-2% of the words changed: copies of copies form chains), and ``giant`` copies
    of one GIANT_WORDS-word page with 1% of the words changed (ids ``giant-*``), in random order. Made
    once per folder; returns its summary (documents, text bytes)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    done = os.path.join(folder, "_DONE")
    if os.path.exists(done):
        with open(done) as f:
            return json.load(f)
    os.makedirs(folder, exist_ok=True)
    if n > STREAM_ABOVE and not giant:
        return _news_streamed(folder, n, near, seed, per_file, done)
    rng = random.Random(seed)
    pool = sentences(os.path.join(ROOT, "jobs/data/sample.jsonl.gz"))
    vocab = sorted({w for s in pool for w in s.split()})
    texts: list[str] = []
    for _ in range(n):
        if texts and rng.random() < near:
            words = rng.choice(texts).split()
            rate = rng.choice((0.005, 0.01, 0.02))
            texts.append(" ".join(rng.choice(vocab) if rng.random() < rate else w for w in words))
        else:
            texts.append(" ".join(rng.sample(pool, rng.randint(8, 25))))
    ids = [f"n{k:08d}" for k in range(n)]
    if giant:
        page = []
        while len(page) < GIANT_WORDS:
            page += rng.choice(pool).split()
        page = page[:GIANT_WORDS]
        texts += [" ".join(rng.choice(vocab) if rng.random() < 0.01 else w for w in page) for _ in range(giant)]
        ids += [f"giant-{k:07d}" for k in range(giant)]
    order = list(range(len(texts)))
    rng.shuffle(order)
    text_bytes = 0
    for f, start in enumerate(range(0, len(order), per_file)):
        part = order[start:start + per_file]
        chunk = [texts[i] for i in part]
        text_bytes += sum(len(t.encode()) for t in chunk)
        pq.write_table(pa.table({"id": [ids[i] for i in part], "text": chunk}),
                       os.path.join(folder, f"news-{f:04d}.parquet"), row_group_size=10_000)
    info = {"documents": len(texts), "text_bytes": text_bytes, "giant": giant}
    with open(done, "w") as f:
        json.dump(info, f)
    return info


#: above this many documents the corpus is made in blocks (the whole corpus as Python strings would take
#: ~5 bytes per byte of text: 20 GiB at 4M documents); near copies then copy one of the last WINDOW
#: documents (below it, any earlier one), and the order is shuffled within each block of a file's size
STREAM_ABOVE, WINDOW = 1_000_000, 1_000_000


def _news_streamed(folder: str, n: int, near: float, seed: int, per_file: int, done: str) -> dict:
    import collections

    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = random.Random(seed)
    pool = sentences(os.path.join(ROOT, "jobs/data/sample.jsonl.gz"))
    vocab = sorted({w for s in pool for w in s.split()})
    recent: collections.deque = collections.deque(maxlen=WINDOW)
    text_bytes, block, f = 0, [], 0
    for k in range(n):
        if recent and rng.random() < near:
            words = recent[rng.randrange(len(recent))].split()
            rate = rng.choice((0.005, 0.01, 0.02))
            text = " ".join(rng.choice(vocab) if rng.random() < rate else w for w in words)
        else:
            text = " ".join(rng.sample(pool, rng.randint(8, 25)))
        recent.append(text)
        block.append((f"n{k:08d}", text))
        if len(block) == per_file or k == n - 1:
            rng.shuffle(block)
            text_bytes += sum(len(t.encode()) for _, t in block)
            pq.write_table(pa.table({"id": [i for i, _ in block], "text": [t for _, t in block]}),
                           os.path.join(folder, f"news-{f:04d}.parquet"), row_group_size=10_000)
            block, f = [], f + 1
    info = {"documents": n, "text_bytes": text_bytes, "giant": 0, "window": WINDOW}
    with open(done, "w") as fh:
        json.dump(info, fh)
    return info


def run_cli_measured(args_list: list[str], workers: int) -> dict:
    """Run ``curate ARGS`` in a subprocess and sample its process tree every 0.2 s: wall, CPU seconds of
    the tree, peak RSS per process, worker restarts (and the log's restart lines), exit code."""
    import resource
    import subprocess

    import psutil

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    # CURATE_BENCH_CWD: another checkout's curate (its own venv's python runs this script), for side by side
    proc = subprocess.Popen([sys.executable, "-m", "curate", *args_list], cwd=os.environ.get("CURATE_BENCH_CWD", ROOT),
                            stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    peaks: dict[int, tuple[str, int]] = {}
    cpu: dict[int, float] = {}
    workers_seen: set[int] = set()
    root = psutil.Process(proc.pid)
    import threading

    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    while proc.poll() is None:
        try:
            tree = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            break
        for q in tree:
            try:
                with q.oneshot():
                    rss = q.memory_info().rss
                    times = q.cpu_times()
                    cmd = " ".join(q.cmdline())
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            kind = "main" if q.pid == proc.pid else ("worker" if "spawn_main" in cmd or "forkserver" in cmd else "other")
            if kind == "worker" and "resource_tracker" not in cmd:
                workers_seen.add(q.pid)
            peaks[q.pid] = (kind, max(rss, peaks.get(q.pid, (kind, 0))[1]))
            cpu[q.pid] = times.user + times.system
        time.sleep(0.2)
    wall = time.perf_counter() - t
    reader.join(timeout=5)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    tree_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    restart_lines = [x for x in lines if re.search(r"[Rr]estart|was killed|exceeded .*memory|KilledWorker", x)]
    return {"exit": proc.returncode, "wall": wall, "cpu": max(tree_cpu, sum(cpu.values())),
            "main_cpu": cpu.get(proc.pid, 0.0),  # the curate process alone (the client; a local cluster's scheduler)
            "peaks": sorted(((k, v) for k, v in peaks.values()), key=lambda kv: -kv[1]),
            # each process's CPU-s as last sampled (a worker's whole life, when it ended after the last sample)
            "cpu_by_process": sorted(((peaks[pid][0], c) for pid, c in cpu.items()), key=lambda kc: -kc[1]),
            "restarts": max(0, len(workers_seen) - workers), "restart_lines": len(restart_lines),
            "log_tail": "".join(lines[-15:])}


#: ``scale --kind``: the dedup path measured (issue 30 asks for every one)
KINDS = {"fuzzy": ["dedup", "fuzzy"], "fuzzy-no-check": ["dedup", "fuzzy", "--no-false-positive-check"],
         "fuzzy-save-index": ["dedup", "fuzzy", "--save-index", "{out}-index"], "exact": ["dedup", "exact"]}


def fuzzy_cli(data: str, out: str, args) -> dict:
    kind = [a.format(out=out) for a in KINDS[getattr(args, "kind", "fuzzy")]]
    if "--save-index" in kind:
        import shutil

        shutil.rmtree(f"{out}-index", ignore_errors=True)
    run = run_cli_measured(["--log-level", "WARNING", *kind, "--input", os.path.join(data, "*.parquet"),
                            "--output", out, "--workers", str(args.workers), "--memory-limit", args.memory_limit,
                            "--force", *(["--blocksize", args.blocksize] if args.blocksize else [])], args.workers)
    manifest = {}
    if run["exit"] == 0:
        name = "_manifest.json" if os.path.exists(os.path.join(out, "_manifest.json")) else "manifest.json"
        with open(os.path.join(out, name)) as f:  # an earlier curate's name, when comparing with one
            manifest = json.load(f)
    else:
        print(f"curate exited {run['exit']}:\n{run['log_tail']}", flush=True)
    return {**run, "manifest": manifest}


def _peaks(run) -> str:
    return ", ".join(f"{kind} {rss / 2**20:,.0f}" for kind, rss in run["peaks"][:1 + 2 * 2] if rss > 50 * 2**20)


def _kept_ids(out: str, prefix: str) -> int:
    import pyarrow.parquet as pq

    return sum(sum(1 for i in pq.read_table(os.path.join(out, f), columns=["id"]).column("id").to_pylist()
                   if i.startswith(prefix)) for f in os.listdir(out) if f.startswith("part-"))


def bench_scale(args) -> None:
    rows = [("documents", "GB", "wall s", "CPU s", "MB/CPU-s", "peak RSS MiB (largest processes)", "restarts",
             "rounds", "removed", "kept", *(["giant copies kept"] if args.giant else []))]
    for n in [int(x) for x in args.sizes.split(",")]:
        data = os.path.join(args.workdir, f"news-{n}-giant{args.giant}")
        t = time.perf_counter()
        info = news_corpus(data, n, giant=args.giant)
        print(f"\n{info['documents']:,} documents, {info['text_bytes'] / 1e9:.2f} GB of text "
              f"(made in {time.perf_counter() - t:.0f}s)", flush=True)
        out = os.path.join(args.workdir, f"out-news-{n}-giant{args.giant}" + ("" if args.kind == "fuzzy" else f"-{args.kind}"))
        run = fuzzy_cli(data, out, args)
        d = run["manifest"].get("dedup", {})
        counts = run["manifest"].get("counts", {})
        rows.append((f"{info['documents']:,}", f"{info['text_bytes'] / 1e9:.2f}", f"{run['wall']:.0f}",
                     f"{run['cpu']:.0f}", f"{info['text_bytes'] / 1e6 / max(run['cpu'], 1e-9):.2f}", _peaks(run),
                     f"{run['restarts']} ({run['restart_lines']} log lines)", d.get("refine_rounds", "-"),
                     f"{d.get('removed', 0):,}", f"{counts.get('out', 0):,}",
                     *([f"{_kept_ids(out, 'giant-'):,} of {args.giant:,}"] if args.giant and run["exit"] == 0 else
                       (["-"] if args.giant else []))))
        table(rows[:1] + rows[-1:])
    print()
    table(rows)
    print(f"\n{' '.join(KINDS[args.kind])}, {args.workers} workers, --memory-limit {args.memory_limit}, every other "
          f"setting at its default; CPU: the whole process tree. Load average now: {os.getloadavg()[0]:.2f}")


def bench_giant(args) -> None:
    data = os.path.join(args.workdir, f"giant-{args.unrelated}-{args.copies}")
    info = news_corpus(data, args.unrelated, near=0.0, giant=args.copies)
    out = os.path.join(args.workdir, f"out-giant-{args.unrelated}-{args.copies}")
    print(f"{info['documents']:,} documents ({args.copies:,} copies of one {GIANT_WORDS}-word page, 1% of the words "
          f"changed; {args.unrelated:,} unrelated), {info['text_bytes'] / 1e9:.3f} GB", flush=True)
    run = fuzzy_cli(data, out, args)
    if run["exit"] != 0:
        return
    d = run["manifest"]["dedup"]
    kept_copies = _kept_ids(out, "giant-")
    kept_other = _kept_ids(out, "n")
    table([("copies kept", "unrelated removed", "rounds", "loose edges", "wall s", "CPU s",
             "peak RSS MiB", "restarts"),
           (f"{kept_copies:,} of {args.copies:,} ({kept_copies / max(args.copies, 1):.2%})",
            f"{args.unrelated - kept_other:,}", d["refine_rounds"], d.get("loose_edges"),
            f"{run['wall']:.0f}", f"{run['cpu']:.0f}", _peaks(run), f"{run['restarts']} ({run['restart_lines']} log lines)")])
    print(f"load average now: {os.getloadavg()[0]:.2f}")


def audit_pages(n: int, near: float, copies: int, seed: int = 0) -> list[str]:
    """``n`` pages of about 500 words (real paragraphs), ``near`` of them edited copies of earlier ones,
    and ``copies`` copies of one page with 1% of the words changed (see the module doc: audit)."""
    rng = random.Random(seed)
    pool = paragraphs(os.path.join(ROOT, "jobs/data/sample.jsonl.gz"))
    vocab = sorted({w for p in pool for w in p.split()})
    pages: list[list[str]] = []
    while len(pages) < n:
        if pages and rng.random() < near:
            pages.append(edit(rng.choice(pages), rng, pool, vocab))
            continue
        page: list[str] = []
        while sum(len(p.split()) for p in page) < 500:
            page.append(rng.choice(pool))
        pages.append(page)
    texts = ["\n\n".join(p) for p in pages]
    if copies:
        words = texts[0].split()
        texts += [" ".join(rng.choice(vocab) if rng.random() < 0.01 else w for w in words) for _ in range(copies)]
    rng.shuffle(texts)
    return texts


class MemorySets:
    """A stand-in for a fuzzy run's SetStore: documents 0..n-1 of partition 0, their sets in memory."""

    def __init__(self, values, offsets):
        self.values, self.offsets = values, offsets

    def table(self, p):
        import numpy as np

        counts = np.diff(self.offsets)
        return np.arange(len(counts), dtype=np.int64), self.offsets[:-1], counts, "memory"

    def read(self, p, docs, table=None):
        import numpy as np

        docs = np.asarray(docs, dtype=np.int64)
        counts = self.offsets[docs + 1] - self.offsets[docs]
        offsets = np.zeros(len(docs) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        take = np.repeat(self.offsets[docs] - offsets[:-1], counts) + np.arange(int(offsets[-1]))
        return self.values[take], offsets


def bench_audit(args) -> None:
    import numpy as np

    from curate.stages.dedup import minhash
    from curate.stages.dedup.fuzzy import audit

    texts = audit_pages(args.docs, args.near, args.copies)
    sets = minhash.shingle_sets(texts)
    values = sets.values.to_numpy().astype(np.uint64)
    offsets = sets.offsets.to_numpy().astype(np.int64)
    store = MemorySets(values, offsets)
    nothing = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, bool))
    print(f"{len(texts):,} pages, {np.diff(offsets).mean():.0f} shingles each on average; sample {args.sample:,}; "
          f"threshold {args.threshold}", flush=True)
    audit.audit(store, range(1), nothing, args.threshold, args.sample)  # numba compiles (cached) once
    times, entry = [], None
    for _ in range(args.repeat):
        t0 = time.process_time()
        entry = audit.audit(store, range(1), nothing, args.threshold, args.sample)
        times.append(time.process_time() - t0)
    print(f"audit: {min(times):.3f} CPU s (best of {args.repeat}: {', '.join(f'{t:.3f}' for t in times)}); "
          f"{entry['true_pairs']:,} close pairs of {entry['pairs']:,}")
    print(f"load average now: {os.getloadavg()[0]:.2f}")


def bench_substrings(args) -> None:
    """Exact-substring dedup (issue 33) on the scale corpus at --sizes-mb of text: MB per CPU-second,
    wall, peak per process, bytes removed."""
    rows = [("text MB", "documents", "wall s", "CPU s", "MB/CPU-s", "peak RSS MiB (largest processes)", "restarts",
             "documents changed", "bytes removed", "dropped")]
    for mb in [int(x) for x in args.sizes_mb.split(",")]:
        n = int(mb * 1e6 / NEWS_BYTES_PER_DOC)
        data = os.path.join(args.workdir, f"news-{n}-giant0")
        info = news_corpus(data, n)
        out = os.path.join(args.workdir, f"out-substrings-{n}")
        run = run_cli_measured(["--log-level", "WARNING", "dedup", "substrings", "--input", os.path.join(data, "*.parquet"),
                                "--output", out, "--workers", str(args.workers), "--memory-limit", args.memory_limit,
                                "--force", *(["--blocksize", args.blocksize] if args.blocksize else [])], args.workers)
        if run["exit"] != 0:
            print(f"curate exited {run['exit']}:\n{run['log_tail']}", flush=True)
            rows.append((f"{info['text_bytes'] / 1e6:,.0f}", f"{n:,}", "failed", "", "", "", "", "", "", ""))
            continue
        import pyarrow.parquet as pq

        dup = pq.read_table(os.path.join(f"{out}.side", "_duplicates"), columns=["removed_bytes"]).column("removed_bytes")
        with open(os.path.join(out, "_manifest.json")) as f:
            counts = json.load(f).get("counts", {})
        rows.append((f"{info['text_bytes'] / 1e6:,.0f}", f"{n:,}", f"{run['wall']:.0f}", f"{run['cpu']:.0f}",
                     f"{info['text_bytes'] / 1e6 / max(run['cpu'], 1e-9):.2f}", _peaks(run),
                     f"{run['restarts']} ({run['restart_lines']} log lines)", f"{len(dup):,}",
                     f"{sum(dup.to_pylist()):,}", f"{sum(counts.get('dropped', {}).values()):,}"))
        table(rows[:1] + rows[-1:])
    print()
    table(rows)
    print(f"\n{args.workers} workers, --memory-limit {args.memory_limit}, every other setting at its default; "
          f"load average now: {os.getloadavg()[0]:.2f}")


#: text bytes per document of the scale corpus (measured: 2.18 GB for 1M documents)
NEWS_BYTES_PER_DOC = 2184


# --------------------------------------------------------------------------- incremental


def make_snapshot_b(folder: str, a_folder: str, n: int, seed: int = 1) -> None:
    """Snapshot B as Parquet: n documents, 10% exact copies of A's first file, 10% near copies of it
    (1% of the words changed), 80% new (made as make_synthetic makes a corpus); column snapshot = 2."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    done = os.path.join(folder, "_DONE")
    if os.path.exists(done):
        return
    os.makedirs(folder, exist_ok=True)
    fresh = os.path.join(folder, "fresh")
    make_synthetic(fresh, n - 2 * (n // 10), seed=seed)
    rng = np.random.default_rng(seed)
    a_files = sorted(f for f in os.listdir(a_folder) if f.endswith(".parquet"))
    a_first = pq.read_table(os.path.join(a_folder, a_files[0]), columns=["text"]).column("text").to_pylist()
    copies = [a_first[k] for k in rng.integers(0, len(a_first), n // 10)]
    near = []
    for k in rng.integers(0, len(a_first), n // 10):
        words = a_first[k].split()
        for j in np.flatnonzero(rng.random(len(words)) < 0.01):
            words[j] = words[(j + 1) % len(words)]
        near.append(" ".join(words))
    texts = [t for f in sorted(os.listdir(fresh)) if f.endswith(".parquet")
             for t in pq.read_table(os.path.join(fresh, f), columns=["text"]).column("text").to_pylist()]
    texts += copies + near
    order = rng.permutation(len(texts))
    table_ = pa.table({"id": [f"b{i:08d}" for i in range(len(texts))], "text": [texts[i] for i in order],
                       "snapshot": np.full(len(texts), 2, dtype=np.int64)})
    pq.write_table(table_, os.path.join(folder, "snapshot-b.parquet"), row_group_size=10_000)
    with open(done, "w") as f:
        json.dump({"documents": len(texts)}, f)


def with_snapshot_column(folder: str, value: int) -> str:
    """A copy of the synthetic corpus in ``folder`` with a column snapshot = value (once)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = folder + f"-snapshot{value}"
    if not os.path.exists(os.path.join(out, "_DONE")):
        os.makedirs(out, exist_ok=True)
        for f in sorted(os.listdir(folder)):
            if f.endswith(".parquet"):
                t = pq.read_table(os.path.join(folder, f))
                t = t.append_column("snapshot", pa.array(np.full(t.num_rows, value, dtype=np.int64)))
                pq.write_table(t, os.path.join(out, f), row_group_size=10_000)
        open(os.path.join(out, "_DONE"), "w").close()
    return out


def bench_incremental(args) -> None:
    import pandas as pd
    from distributed import Client, LocalCluster

    from curate.app.runner import make_compute, run_stage
    from curate.stages.dedup.exact import ExactDedupSettings
    from curate.stages.dedup.fuzzy import FuzzyDedupSettings
    from curate.stages.stage import IOSettings

    work = args.workdir
    a_plain = os.path.join(work, f"data-{args.docs}")
    make_synthetic(a_plain, args.docs)
    a_data = with_snapshot_column(a_plain, 1)
    n_b = int(args.docs * args.fraction)
    b_data = os.path.join(work, f"snapshot-b-{args.docs}-{n_b}")
    make_snapshot_b(b_data, a_plain, n_b)
    a_in, b_in = (os.path.join(a_data, "*.parquet"),), (os.path.join(b_data, "*.parquet"),)
    io = IOSettings(blocksize=args.blocksize)
    kinds = {"exact": ("exact_dedup", ExactDedupSettings), "fuzzy": ("fuzzy_dedup", FuzzyDedupSettings)}
    rows = [("kind", "index(A) s", "B against index(A) s", "A + B from scratch s", "ratio (target <= 0.25)",
             "B against + save union s", "removed from B")]
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, memory_limit=args.memory_limit,
                      dashboard_address=None, local_directory=os.path.join(work, "dask")) as cluster, \
            Client(cluster) as client:
        compute = make_compute(client, show_progress=False)

        def timed(stage, settings, inputs, out):
            t = time.perf_counter()
            run_stage(stage, settings, inputs, out, io, compute=compute, force=True)
            return time.perf_counter() - t

        for kind, (stage, Settings) in kinds.items():
            out = os.path.join(work, f"incremental-{kind}")
            idx_a = os.path.join(out, "index-a")
            t_index = timed(stage, Settings(save_index=idx_a), a_in, os.path.join(out, "a"))
            against, scratch = [], []
            for _ in range(args.repeat):  # alternated: load from elsewhere falls on both
                against.append(timed(stage, Settings(against=(idx_a,)), b_in, os.path.join(out, "b")))
                scratch.append(timed(stage, Settings(keep="oldest:snapshot"), a_in + b_in, os.path.join(out, "ab")))
            t_union = timed(stage, Settings(against=(idx_a,), save_index=os.path.join(out, "index-ab")), b_in,
                            os.path.join(out, "b-union"))
            removed_b = set(pd.read_parquet(os.path.join(out, "b.side", "_rejects"), columns=["id"])["id"])
            joint = pd.read_parquet(os.path.join(out, "ab.side", "_rejects"), columns=["id"])["id"]
            joint_b = {i for i in joint if i.startswith("b")}
            if removed_b != joint_b:
                print(f"{kind}: CONTRACT BROKEN: {len(removed_b ^ joint_b)} documents of B differ", flush=True)
            rows.append((kind, f"{t_index:.1f}", f"{min(against):.1f}", f"{min(scratch):.1f}",
                         f"{min(against) / min(scratch):.3f}", f"{t_union:.1f}", f"{len(removed_b):,}"))
            print(f"{kind}: done", flush=True)
    print(f"\nA: {args.docs:,} documents, B: {n_b:,} ({args.fraction:.0%} of A); {args.workers} workers, "
          f"{args.blocksize} partitions; best of {args.repeat}")
    table(rows)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="part", required=True)
    a = sub.add_parser("accuracy")
    a.add_argument("--sizes", default="1000,3000,10000", help="corpus sizes (documents)")
    a.add_argument("--threshold", type=float, default=THRESHOLD)
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--defaults-only", action="store_true", help="only the default settings, not the grid")
    a.add_argument("--data", default=os.path.join(ROOT, "jobs/data/sample.jsonl.gz"))
    s = sub.add_parser("speed")
    s.add_argument("--docs", type=int, default=20000)
    s.add_argument("--datasketch-docs", type=int, default=3000)
    s.add_argument("--data", default=os.path.join(ROOT, "jobs/data/sample.jsonl.gz"))
    c = sub.add_parser("synthetic")
    c.add_argument("--sizes", default="250000,500000,1000000")
    c.add_argument("--workers", type=int, default=2)
    c.add_argument("--memory-limit", default="8GiB")
    c.add_argument("--blocksize", default="64MiB")
    c.add_argument("--workdir", default="/tmp/curate-bench-dedup")
    for name, help_ in (("scale", "news-like corpus through the CLI, bounded memory (issue 30)"),
                        ("giant", "one giant cluster of near-threshold copies (issue 35)")):
        g = sub.add_parser(name, help=help_)
        if name == "scale":
            g.add_argument("--sizes", default="250000,1000000,4000000")
            g.add_argument("--giant", type=int, default=0, help="add this many copies (1%% changed) of one page")
            g.add_argument("--kind", choices=sorted(KINDS), default="fuzzy", help="the dedup path measured")
        else:
            g.add_argument("--unrelated", type=int, default=18_000)
            g.add_argument("--copies", type=int, default=2_000)
        g.add_argument("--workers", type=int, default=2)
        g.add_argument("--memory-limit", default="2GiB")
        g.add_argument("--blocksize", default=None, help="default: curate's")
        g.add_argument("--workdir", default="/tmp/curate-bench-dedup")
    b = sub.add_parser("substrings", help="exact-substring dedup on the scale corpus (issue 33)")
    b.add_argument("--sizes-mb", default="100,1000", help="MB of text")
    b.add_argument("--workers", type=int, default=2)
    b.add_argument("--memory-limit", default="2GiB")
    b.add_argument("--blocksize", default=None, help="default: curate's")
    b.add_argument("--workdir", default="/tmp/curate-bench-dedup")
    i = sub.add_parser("incremental")
    i.add_argument("--docs", type=int, default=500_000, help="documents of snapshot A")
    i.add_argument("--fraction", type=float, default=0.1, help="size of snapshot B as a share of A's")
    i.add_argument("--repeat", type=int, default=2)
    i.add_argument("--workers", type=int, default=2)
    i.add_argument("--memory-limit", default="8GiB")
    i.add_argument("--blocksize", default="64MiB")
    i.add_argument("--workdir", default="/tmp/curate-bench-dedup")
    u = sub.add_parser("audit", help="CPU seconds of the accuracy audit at its default sample (issue 42)")
    u.add_argument("--docs", type=int, default=2000, help="pages (besides --copies)")
    u.add_argument("--near", type=float, default=0.1, help="share of the pages that are edited copies")
    u.add_argument("--copies", type=int, default=0, help="add this many copies (1%% changed) of one page")
    u.add_argument("--sample", type=int, default=2000, help="--audit-sample")
    u.add_argument("--threshold", type=float, default=THRESHOLD)
    u.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    {"accuracy": bench_accuracy, "speed": bench_speed, "scale": bench_scale, "giant": bench_giant,
     "synthetic": bench_synthetic, "incremental": bench_incremental, "substrings": bench_substrings,
     "audit": bench_audit}[args.part](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
