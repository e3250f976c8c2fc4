"""Side by side with the peers: the same inputs and settings, whole processes alternated.

    .venv/bin/python jobs/bench_peers.py pipeline --datatrove VENV [--pages 8000]   (jobs/bench_peers_pipeline.py)
    .venv/bin/python jobs/bench_peers.py [--datatrove VENV] [--rensa VENV] [--nemo VENV]
        [--stages minhash-core,minhash-text,fuzzy,exact] [--docs 100000] [--workers 2] [--repeat 3]
        [--workdir /tmp/curate-bench-peers]

Peers are never dependencies of curate: each runs from a throwaway venv given by its path (the
venv's ``bin/python`` runs this same file, which imports nothing of curate on the peer side), e.g.

    python3 -m venv /tmp/peer-rensa && /tmp/peer-rensa/bin/pip install rensa numpy pyarrow
    python3 -m venv /tmp/peer-datatrove && /tmp/peer-datatrove/bin/pip install "datatrove[processing]" pyarrow spacy
    (NeMo Curator 0.9, CPU parts: see its install notes; only its exact dedup runs on CPU)

Every measurement is a fresh process (``bench_peers.py _one IMPL STAGE ...``), the implementations
of a stage alternate within each repeat, and the median counts. Printed per stage and
implementation: documents, median wall seconds, docs/s per core (documents / (seconds x cores it
was given)), the peak memory of its process tree (sum of RSS of the process and its children,
sampled every 20 ms) and the ratio to curate.

Stages (the inputs are generated once under --workdir and shared):

- ``minhash-core``: MinHash signatures (128 permutations) of the same shingles (word 5-grams of
  ~1 kB synthetic documents, computed once by curate's reference shingler), one core, CPU time of
  the hashing call only. curate gets them as an Arrow list<string> column (what its kernel reads),
  rensa as Python lists (what ``RMinHash.digest_matrix_from_token_sets`` reads); the conversion
  from the stored Parquet is outside the timing for both. A second pair of rows gives both the same
  pre-hashed shingles (``signatures_of_hashes`` vs ``digest_matrix_from_flat_token_hashes``).
- ``minhash-text``: signatures from raw text, one core: curate's ``minhash.signatures`` vs rensa
  driven from Python (lowercase, regex words, 5-grams, then the bulk call).
- ``fuzzy``: the whole near-duplicate removal on --docs synthetic documents (Parquet, 80% unique,
  10% exact and 10% near copies): ``curate dedup fuzzy`` (defaults, --workers N) vs datatrove's four
  MinHash stages (LocalPipelineExecutor, N tasks/workers, the same 5-grams and bands x rows as
  curate's defaults) vs datasketch's ``MinHashLSH`` index build (one process; MinHash of the same
  Python shingles; datasketch's own bands x rows for the threshold).
- ``exact``: exact duplicate removal on the same documents: ``curate dedup exact`` vs datatrove's
  three exact-dedup stages vs NeMo Curator 0.9 ``ExactDuplicates`` (Dask, N workers) + removal.
- ``tokenize-1k``: a small run end to end, what a user iterating on a sample waits for: 1,000
  synthetic ~1 kB documents (JSONL) to Megatron-style token files with the same tokenizer.json
  (cl100k_base converted to a Hugging Face directory), ``curate tokenize`` with its defaults (``--cluster
  auto``) vs datatrove's ``JsonlReader`` -> ``DocumentTokenizer`` (one task). Wall seconds and the CPU
  seconds of the whole process tree.
  ``raw``: the floor, this process reading the JSONL, ``encode_batch_fast`` with the same tokenizer.json
  and the ids written (no index, checks or manifest); "curate / raw loop" is the ratio of medians.
- ``startup``: the same on 10 documents: the fixed cost of a run.
- ``sentences``: C4's rule, every three-sentence span seen in an earlier document removed and documents
  left under 50 words dropped, on --sentence-docs news-like documents (real sentences of the sample,
  1 in 10 a near copy of an earlier one: ``bench_dedup.py``'s scale corpus): ``curate dedup sentences``
  (defaults, --workers N) vs datatrove's three SentenceDedup stages (signatures with N finder
  workers, N finder tasks, the filter; spaCy's English sentence splitter, datatrove's default;
  min_doc_words 50). Compare documents per CPU-second of the whole process tree (the last column).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NUM_PERM = 128
SEED = 42
THRESHOLD = 0.8
STAGES = ("minhash-core", "minhash-text", "fuzzy", "exact", "tokenize-1k", "startup", "sentences")
TOKENIZE_DOCS = {"tokenize-1k": 1000, "startup": 10}


# --------------------------------------------------------------------------- shared by both sides


def python_shingles(text: str, n: int = 5) -> list[str]:
    """The plain Python shingler the peers are driven with: lowercase, \\w+ words, word n-grams."""
    import re

    words = re.findall(r"\w+", text.lower())
    if len(words) < n:
        return [" ".join(words)] if words else []
    return [" ".join(words[i:i + n]) for i in range(len(words) - n + 1)]


def read_parquet_column(path: str, column: str):
    import pyarrow.parquet as pq

    return pq.read_table(path, columns=[column]).column(column).combine_chunks()


def peak_tree_rss(proc, stop, cpu: dict | None = None) -> int:
    """Sample the RSS of ``proc`` and its descendants every 20 ms until ``stop`` is set; the peak sum.
    ``cpu`` gets each process's last seen CPU seconds of its own (a pool's processes that are
    terminated, not waited for, are missing from getrusage's children)."""
    import psutil

    peak = 0
    try:
        root = psutil.Process(proc.pid)
    except psutil.NoSuchProcess:
        return 0
    while not stop.is_set():
        total = 0
        try:
            for p in [root, *root.children(recursive=True)]:
                try:
                    total += p.memory_info().rss
                    if cpu is not None:
                        # each process's own time: with its children's added, a child that was sampled
                        # and then waited for counted twice (curate's command under the _one process:
                        # startup read 1.77 CPU-s for 1.06)
                        t = p.cpu_times()
                        cpu[p.pid] = t.user + t.system
                except psutil.NoSuchProcess:
                    pass
        except psutil.NoSuchProcess:
            break
        peak = max(peak, total)
        stop.wait(0.02)
    return peak


# --------------------------------------------------------------------------- one measured process


def one_curate(stage: str, work: str, workers: int) -> dict:
    sys.path.insert(0, ROOT)
    if stage == "minhash-core":
        import numpy as np
        import pyarrow as pa

        pa.set_cpu_count(1)
        from curate.stages.dedup import minhash

        lists = read_parquet_column(os.path.join(work, "shingles.parquet"), "shingles")
        minhash.signatures_of_shingles(lists[:10], NUM_PERM, SEED)  # compile / load the kernels
        t = time.process_time()
        minhash.signatures_of_shingles(lists, NUM_PERM, SEED)
        strings = time.process_time() - t
        hashes = np.load(os.path.join(work, "shingle-hashes.npy"))
        offsets = np.asarray(lists.offsets, dtype=np.int64)
        t = time.process_time()
        minhash.signatures_of_hashes(hashes.astype(np.uint32), offsets, NUM_PERM, SEED)
        hashed = time.process_time() - t
        return {"docs": len(lists), "cpu": strings, "cores": 1, "extra": {"pre-hashed": hashed}}
    if stage == "minhash-text":
        import pyarrow as pa

        pa.set_cpu_count(1)
        from curate.stages.dedup import minhash

        texts = read_parquet_column(os.path.join(work, "texts.parquet"), "text")
        minhash.signatures(texts[:10], NUM_PERM, SEED)
        t = time.process_time()
        minhash.signatures(texts, NUM_PERM, SEED)
        return {"docs": len(texts), "cpu": time.process_time() - t, "cores": 1}
    if stage in TOKENIZE_DOCS:
        out = os.path.join(work, f"out-curate-{stage}")
        shutil.rmtree(out, ignore_errors=True)
        curate = os.path.join(os.path.dirname(sys.executable), "curate")
        subprocess.run([curate, "--log-level", "WARNING", "tokenize", "--input", os.path.join(work, stage, "docs.jsonl"),
                        "--output", out, "--tokenizer", os.path.join(work, "tokenizer")], check=True,
                       stdout=subprocess.DEVNULL)
        return {"docs": TOKENIZE_DOCS[stage], "cores": 1}
    cmd = {"fuzzy": ["dedup", "fuzzy"], "exact": ["dedup", "exact"], "sentences": ["dedup", "sentences"]}[stage]
    out = os.path.join(work, f"out-curate-{stage}")
    shutil.rmtree(out, ignore_errors=True)
    curate = os.path.join(os.path.dirname(sys.executable), "curate")
    data = os.path.join(work, "news" if stage == "sentences" else "docs", "*.parquet")
    subprocess.run([curate, "--log-level", "WARNING", *cmd, "--input", data, "--output", out, "--workers", str(workers),
                    "--dashboard-address", "127.0.0.1:0"], check=True,
                   stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "_manifest.json")) as f:
        manifest = json.load(f)
    counts = manifest.get("counts", {})
    return {"docs": counts.get("in"), "removed": sum(counts.get("dropped", {}).values()), "cores": workers}


def one_datasketch(stage: str, work: str, workers: int) -> dict:
    import xxhash
    from datasketch import MinHash, MinHashLSH

    texts = read_parquet_column(os.path.join(work, "texts-all.parquet"), "text").to_pylist()
    ids = read_parquet_column(os.path.join(work, "texts-all.parquet"), "id").to_pylist()
    lsh = MinHashLSH(threshold=THRESHOLD, num_perm=NUM_PERM)
    removed = 0
    for doc_id, text in zip(ids, texts):
        m = MinHash(NUM_PERM, SEED, hashfunc=xxhash.xxh32_intdigest)
        m.update_batch([s.encode("utf-8") for s in python_shingles(text)])
        if lsh.query(m):  # keep the first of each near-duplicate group, as a streaming index build does
            removed += 1
        else:
            lsh.insert(doc_id, m)
    return {"docs": len(texts), "removed": removed, "cores": 1}


def one_rensa(stage: str, work: str, workers: int) -> dict:
    os.environ.setdefault("RAYON_NUM_THREADS", "1")
    import numpy as np
    from rensa import RMinHash

    if stage == "minhash-core":
        lists = read_parquet_column(os.path.join(work, "shingles.parquet"), "shingles")
        py = lists.to_pylist()
        RMinHash.digest_matrix_from_token_sets(py[:10], NUM_PERM, SEED)
        t = time.process_time()
        RMinHash.digest_matrix_from_token_sets(py, NUM_PERM, SEED)
        strings = time.process_time() - t
        hashes = np.load(os.path.join(work, "shingle-hashes.npy"))
        offsets = np.asarray(lists.offsets, dtype=np.uint64)
        t = time.process_time()
        RMinHash.digest_matrix_from_flat_token_hashes(hashes, offsets, NUM_PERM, SEED)
        hashed = time.process_time() - t
        return {"docs": len(py), "cpu": strings, "cores": 1, "extra": {"pre-hashed": hashed}}
    texts = read_parquet_column(os.path.join(work, "texts.parquet"), "text").to_pylist()
    t = time.process_time()
    RMinHash.digest_matrix_from_token_sets([python_shingles(x) for x in texts], NUM_PERM, SEED)
    return {"docs": len(texts), "cpu": time.process_time() - t, "cores": 1}


def one_raw(stage: str, work: str, workers: int) -> dict:
    """The floor of a small tokenize: this process reads the JSONL, encodes with ``tokenizers``'
    ``encode_batch_fast`` (the same tokenizer.json, batches of 1,000 as curate's default) and writes the
    ids with an end-of-document id after each document; no index, no checks, no manifest."""
    import numpy as np
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(os.path.join(work, "tokenizer", "tokenizer.json"))
    eod = tok.token_to_id("<|endoftext|>")
    with open(os.path.join(work, stage, "docs.jsonl"), encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f if line.strip()]
    out = os.path.join(work, f"out-raw-{stage}")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "tokens.bin"), "wb") as f:
        for i in range(0, len(texts), 1000):
            for e in tok.encode_batch_fast(texts[i:i + 1000], add_special_tokens=False):
                f.write(np.asarray([*e.ids, eod], dtype=np.uint32).tobytes())
    return {"docs": len(texts), "cores": 1}


def one_datatrove(stage: str, work: str, workers: int) -> dict:
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.readers import ParquetReader
    from datatrove.pipeline.writers import ParquetWriter

    base = os.path.join(work, f"out-datatrove-{stage}")
    shutil.rmtree(base, ignore_errors=True)
    if stage in TOKENIZE_DOCS:
        from datatrove.pipeline.readers import JsonlReader
        from datatrove.pipeline.tokens import DocumentTokenizer

        LocalPipelineExecutor(pipeline=[
            JsonlReader(os.path.join(work, stage), glob_pattern="*.jsonl"),
            DocumentTokenizer(output_folder=f"{base}/out", local_working_dir=f"{base}/tmp",
                              tokenizer_name_or_path=os.path.join(work, "tokenizer", "tokenizer.json"),
                              eos_token="<|endoftext|>", shuffle_documents=False, save_filename="tokens"),
        ], tasks=1, workers=1, logging_dir=os.path.join(base, "logs")).run()
        return {"docs": TOKENIZE_DOCS[stage], "cores": 1}
    data = os.path.join(work, "news" if stage == "sentences" else "docs")
    files = len([f for f in os.listdir(data) if f.endswith(".parquet")])
    tasks = max(workers, files)

    def reader():
        return ParquetReader(data, glob_pattern="*.parquet", id_key="id", text_key="text")

    def run(pipeline, name, n_tasks):
        LocalPipelineExecutor(pipeline=pipeline, tasks=n_tasks, workers=min(workers, n_tasks),
                              logging_dir=os.path.join(base, "logs", name)).run()

    if stage == "fuzzy":
        from datatrove.pipeline.dedup import (
            MinhashDedupBuckets,
            MinhashDedupCluster,
            MinhashDedupFilter,
            MinhashDedupSignature,
        )
        from datatrove.pipeline.dedup.minhash import MinhashConfig

        bands, rows = json.loads(os.environ["BENCH_BANDS_ROWS"])
        cfg = MinhashConfig(n_grams=5, num_buckets=bands, hashes_per_bucket=rows)
        run([reader(), MinhashDedupSignature(output_folder=f"{base}/signatures", config=cfg)], "sig", tasks)
        run([MinhashDedupBuckets(input_folder=f"{base}/signatures", output_folder=f"{base}/buckets", config=cfg)],
            "buckets", bands)
        run([MinhashDedupCluster(input_folder=f"{base}/buckets", output_folder=f"{base}/remove_ids", config=cfg)],
            "cluster", 1)
        run([reader(), MinhashDedupFilter(input_folder=f"{base}/remove_ids"), ParquetWriter(f"{base}/out")],
            "filter", tasks)
    elif stage == "sentences":
        from datatrove.pipeline.dedup.sentence_dedup import (
            SentDedupConfig,
            SentenceDedupFilter,
            SentenceDedupSignature,
            SentenceFindDedups,
        )

        cfg = SentDedupConfig(n_sentences=3, min_doc_words=50)
        run([reader(), SentenceDedupSignature(output_folder=f"{base}/sigs", config=cfg, finder_workers=workers)],
            "sig", tasks)
        run([SentenceFindDedups(data_folder=f"{base}/sigs", output_folder=f"{base}/dups", config=cfg)], "find", workers)
        run([reader(), SentenceDedupFilter(data_folder=f"{base}/dups", config=cfg), ParquetWriter(f"{base}/out")],
            "filter", tasks)
    else:
        from datatrove.pipeline.dedup.exact_dedup import (
            ExactDedupConfig,
            ExactDedupFilter,
            ExactDedupSignature,
            ExactFindDedups,
        )

        cfg = ExactDedupConfig(content_getter=lambda doc: doc.text)
        run([reader(), ExactDedupSignature(output_folder=f"{base}/sigs", config=cfg, finder_workers=workers)],
            "sig", tasks)
        run([ExactFindDedups(data_folder=f"{base}/sigs", output_folder=f"{base}/dups", config=cfg)], "find", workers)
        run([reader(), ExactDedupFilter(data_folder=f"{base}/dups", config=cfg), ParquetWriter(f"{base}/out")],
            "filter", tasks)
    import pyarrow.parquet as pq

    kept = sum(pq.ParquetFile(os.path.join(r, f)).metadata.num_rows
               for r, _, fs in os.walk(f"{base}/out") for f in fs if f.endswith(".parquet"))
    total = sum(pq.ParquetFile(os.path.join(data, f)).metadata.num_rows for f in os.listdir(data)
                if f.endswith(".parquet"))
    return {"docs": total, "removed": total - kept, "cores": workers}


def one_nemo_exact(stage: str, work: str, workers: int) -> dict:
    from dask.distributed import Client, LocalCluster
    from nemo_curator import ExactDuplicates
    from nemo_curator.datasets import DocumentDataset

    with LocalCluster(n_workers=workers, threads_per_worker=1, dashboard_address=None) as cluster, \
            Client(cluster):
        data = os.path.join(work, "docs")
        ds = DocumentDataset.read_parquet([os.path.join(data, f) for f in sorted(os.listdir(data))
                                           if f.endswith(".parquet")], backend="pandas")
        dedup = ExactDuplicates(id_field="id", text_field="text", hash_method="md5", perform_removal=True,
                                cache_dir=os.path.join(work, "out-nemo-cache"))
        shutil.rmtree(os.path.join(work, "out-nemo-cache"), ignore_errors=True)
        result = dedup(ds)
        out = os.path.join(work, "out-nemo-exact")
        shutil.rmtree(out, ignore_errors=True)
        result.to_parquet(out)
        kept = len(result.df)
        total = len(ds.df)
    return {"docs": total, "removed": total - kept, "cores": workers}


ONE = {"curate": one_curate, "datasketch": one_datasketch, "rensa": one_rensa, "datatrove": one_datatrove,
       "nemo": one_nemo_exact, "raw": one_raw}


# --------------------------------------------------------------------------- inputs (curate side)


def prepare(work: str, docs: int, core_docs: int, sentence_docs: int = 0) -> None:
    sys.path.insert(0, ROOT)
    sys.path.insert(0, os.path.join(ROOT, "jobs"))
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    from bench_dedup import make_synthetic, synthetic_texts

    from curate.stages.dedup import minhash

    os.makedirs(work, exist_ok=True)
    for stage, n in TOKENIZE_DOCS.items():
        path = os.path.join(work, stage, "docs.jsonl")
        if not os.path.exists(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                for i, text in enumerate(synthetic_texts(n, seed=7)):
                    f.write(json.dumps({"id": f"d{i}", "text": text}) + "\n")
    if not os.path.exists(os.path.join(work, "tokenizer", "tokenizer.json")):
        from tests.modules.tokenize.helpers import make_cl100k_hf_dir

        make_cl100k_hf_dir(os.path.join(work, "tokenizer"))
    make_synthetic(os.path.join(work, "docs"), docs, per_file=max(docs // 8, 1000))
    if sentence_docs:
        from bench_dedup import news_corpus

        news_corpus(os.path.join(work, "news"), sentence_docs, per_file=max(sentence_docs // 8, 1000))
    if not os.path.exists(os.path.join(work, "texts-all.parquet")):
        import glob

        tables = [pq.read_table(f, columns=["id", "text"]) for f in sorted(glob.glob(os.path.join(work, "docs", "*.parquet")))]
        pq.write_table(pa.concat_tables(tables), os.path.join(work, "texts-all.parquet"))
    if not os.path.exists(os.path.join(work, "shingle-hashes.npy")):
        texts = synthetic_texts(core_docs, seed=1)
        pq.write_table(pa.table({"text": texts}), os.path.join(work, "texts.parquet"))
        lists = pa.array([minhash.shingles(t) for t in texts], type=pa.large_list(pa.large_string()))
        pq.write_table(pa.table({"shingles": lists}), os.path.join(work, "shingles.parquet"))
        # the same pre-hashed shingles for both: curate's fmix32(xxh32(shingle)), widened to uint64
        flat = minhash.as_large_strings(lists.values)
        data, offsets = minhash._buffers(flat)
        hv = np.empty(len(flat), dtype=np.uint32)
        minhash._hash_strings(data, offsets, hv)
        np.save(os.path.join(work, "shingle-hashes.npy"), hv.astype(np.uint64))


# --------------------------------------------------------------------------- driver


def measure(python: str, impl: str, stage: str, work: str, workers: int, env: dict) -> dict:
    import resource
    import threading

    cmd = [python, os.path.abspath(__file__), "_one", impl, stage, work, str(workers)]
    stop = threading.Event()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **env})
    peak: list[int] = []
    sampled: dict[int, float] = {}
    sampler = threading.Thread(target=lambda: peak.append(peak_tree_rss(proc, stop, sampled)))
    sampler.start()
    out, err = proc.communicate()
    wall = time.perf_counter() - t
    stop.set()
    sampler.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the process and every child it waited for
    tree_cpu = max((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), sum(sampled.values()))
    if proc.returncode != 0:
        last = (err.strip().splitlines() or ["?"])[-1]
        return {"error": f"exit {proc.returncode}: {last[:160]}"}
    result = json.loads(out.strip().splitlines()[-1])
    result["wall"] = wall
    result["tree_cpu"] = tree_cpu
    result["peak"] = peak[0] if peak else 0
    return result


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--datatrove", help="a venv with datatrove (its bin/python runs the datatrove side)")
    p.add_argument("--rensa", help="a venv with rensa")
    p.add_argument("--nemo", help="a venv with NeMo Curator 0.9's CPU parts")
    p.add_argument("--stages", default=",".join(STAGES))
    p.add_argument("--docs", type=int, default=100_000, help="documents for fuzzy and exact")
    p.add_argument("--core-docs", type=int, default=20_000, help="documents for the MinHash rows")
    p.add_argument("--sentence-docs", type=int, default=50_000, help="documents for sentences")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--workdir", default="/tmp/curate-bench-peers")
    args = p.parse_args()

    sys.path.insert(0, ROOT)
    from curate.stages.dedup.fuzzy import FuzzyDedupSettings

    prepare(args.workdir, args.docs, args.core_docs, args.sentence_docs if "sentences" in args.stages else 0)
    env = {"BENCH_BANDS_ROWS": json.dumps(FuzzyDedupSettings().lsh_params())}
    peers = {"datatrove": args.datatrove, "rensa": args.rensa, "nemo": args.nemo}
    impls = {"minhash-core": ["curate", "rensa"], "minhash-text": ["curate", "rensa"],
             "fuzzy": ["curate", "datatrove", "datasketch"], "exact": ["curate", "datatrove", "nemo"],
             "tokenize-1k": ["curate", "datatrove", "raw"], "startup": ["curate", "datatrove", "raw"],
             "sentences": ["curate", "datatrove"]}
    print(f"{os.cpu_count()} cores; {args.workers} workers/tasks for fuzzy and exact; median of {args.repeat} "
          "alternated whole processes\n")
    for stage in args.stages.split(","):
        runs: dict[str, list[dict]] = {}
        for _ in range(args.repeat):
            for impl in impls[stage]:
                python = sys.executable if impl in ("curate", "datasketch", "raw") else (
                    os.path.join(peers[impl], "bin", "python") if peers[impl] else None)
                if python is None:
                    continue
                runs.setdefault(impl, []).append(measure(python, impl, stage, args.workdir, args.workers, env))
        rows = [("implementation", "docs", "removed", "seconds", "docs/s/core", "peak MiB", "curate is x faster",
                 "tree CPU-s", "docs/CPU-s")]
        rate = {}
        for impl, results in runs.items():
            ok = [r for r in results if "error" not in r]
            if not ok:
                rows.append((impl, "-", "-", results[0]["error"], "", "", "", "", ""))
                continue
            timed = "cpu" if "cpu" in ok[0] else "wall"
            seconds = statistics.median(r[timed] for r in ok)
            rate[impl] = ok[0]["docs"] / seconds / ok[0]["cores"]
            rows.append((impl, f"{ok[0]['docs']:,}", f"{ok[0].get('removed', '-')}", f"{seconds:.2f}",
                         f"{rate[impl]:,.0f}", f"{max(r['peak'] for r in ok) / 2**20:,.0f}", "",
                         f"{statistics.median(r['tree_cpu'] for r in ok):.2f}",
                         f"{ok[0]['docs'] / max(statistics.median(r['tree_cpu'] for r in ok), 1e-9):,.0f}"))
            if "extra" in ok[0]:
                for key in ok[0]["extra"]:
                    s = statistics.median(r["extra"][key] for r in ok)
                    rate[f"{impl} {key}"] = ok[0]["docs"] / s
                    rows.append((f"{impl} {key}", f"{ok[0]['docs']:,}", "-", f"{s:.2f}",
                                 f"{rate[f'{impl} {key}']:,.0f}", "", "", "", ""))
        for k, r in enumerate(rows[1:], start=1):
            name = r[0]
            base = "curate" + name[len(name.split(" ")[0]):] if " " in name else "curate"
            if name in rate and base in rate:
                rows[k] = (*r[:6], f"{rate[base] / rate[name]:.2f}", *r[7:])
        print(f"{stage}:")
        table(rows)
        ok = {impl: [r for r in results if "error" not in r] for impl, results in runs.items()}
        if ok.get("curate") and ok.get("raw"):  # issue 42's target: a small tokenize within 2.5x of the raw loop
            wall, cpu = ({impl: statistics.median(r[k] for r in ok[impl]) for impl in ("curate", "raw")}
                         for k in ("wall", "tree_cpu"))
            print(f"curate / raw loop: {wall['curate'] / wall['raw']:.2f}x wall, {cpu['curate'] / cpu['raw']:.2f}x CPU")
        print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
        print(flush=True)
    return 0


def table(rows) -> None:
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    for k, r in enumerate(rows):
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip())
        if k == 0:
            print("  ".join("-" * w for w in widths))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "pipeline":  # the whole pipeline: its own module
        sys.path.insert(0, os.path.join(ROOT, "jobs"))
        from bench_peers_pipeline import main as pipeline

        sys.exit(pipeline(sys.argv[2:]))
    if len(sys.argv) > 1 and sys.argv[1] == "_one":
        impl, stage, work, workers = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
        print(json.dumps(ONE[impl](stage, work, workers)))
        sys.exit(0)
    sys.exit(main())
