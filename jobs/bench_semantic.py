"""Semantic dedup: our static-model reader vs model2vec, and the whole stage vs SemHash.

    .venv/bin/python jobs/bench_semantic.py embed [--docs 5000]
    .venv/bin/python jobs/bench_semantic.py stage [--docs 2000] [--semhash /tmp/semhash-venv] [--eps 0.01]
    .venv/bin/python jobs/bench_semantic.py scale --docs 1000000 [--files 100] [--workers 2] [--memory-limit 2GiB]

Nothing is downloaded: the model is potion-base-8M-shaped (30,000 tokens x 256, float32) with random
vectors and a WordLevel tokenizer over synthetic words, saved in model2vec's folder format under
--workdir, so both sides read the same files. Documents are ~200 words drawn from a Zipf law.

- ``embed``: documents per CPU-second of ``StaticEncoder.encode`` (curate's reader: safetensors +
  tokenizers + one ``np.add.reduceat``) and of ``model2vec.StaticModel.encode`` (model2vec installed
  in this venv; single-threaded below its multiprocessing threshold of 10,000), and the largest
  difference of the normalised vectors.
- ``stage``: --docs documents of which 10% are near copies (1-3 words changed) and 5% exact copies of
  earlier ones; ``curate dedup semantic`` (threads, defaults but --eps) in this process vs SemHash
  0.5.0's ``self_deduplicate(threshold=1 - eps)`` over the same model in a throwaway venv
  (``python3 -m venv /tmp/semhash-venv && /tmp/semhash-venv/bin/pip install semhash==0.5.0``; its
  ``bin/python`` runs this file's ``_semhash`` part, which imports nothing of curate). Printed: CPU
  seconds of the dedup itself (model loaded, imports done), documents per CPU-second, recall of the
  planted copies (a copy counts when it or its original is removed) and removals below the threshold
  (removed documents with no kept document at cosine >= 1 - eps, brute force over all pairs).
- ``scale``: ``curate dedup semantic`` (defaults) on a local cluster of --workers at --memory-limit over
  --docs documents in --files JSONL files (written once under --workdir), the CLI in a subprocess whose
  process tree is sampled every 0.2 s. Printed: wall, CPU-seconds of the tree, peak RSS per process,
  worker restarts, and the largest worker's peak in each step (embeddings, sample, centroids, clusters,
  duplicates, then the removal and write), a step's samples being those before its "step NAME" log line.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB, DIM = 30_000, 256


def cpu() -> float:
    """CPU-seconds of this process and its waited-for children (model2vec's pool, a sandbox)."""
    return sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                                  resource.getrusage(resource.RUSAGE_CHILDREN)))


def make_model(folder: str) -> str:
    from safetensors.numpy import save_file
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    if os.path.isfile(os.path.join(folder, "model.safetensors")):
        return folder
    os.makedirs(folder, exist_ok=True)
    vocab = {"[UNK]": 0, "[PAD]": 1, **{f"w{i}": i + 2 for i in range(VOCAB - 2)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(os.path.join(folder, "tokenizer.json"))
    vectors = np.random.default_rng(0).standard_normal((VOCAB, DIM)).astype(np.float32)
    save_file({"embeddings": vectors}, os.path.join(folder, "model.safetensors"))
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({"model_type": "model2vec", "architectures": ["StaticModel"], "normalize": True,
                   "hidden_dim": DIM}, f)
    return folder


def make_docs(n: int, seed: int = 0):
    """(texts, planted): planted[i] = the original a near or exact copy i was made from, else -1."""
    rng = np.random.default_rng(seed)
    words = np.minimum(rng.zipf(1.2, size=(n, 200)), VOCAB - 3)
    texts, planted = [], np.full(n, -1)
    for i in range(n):
        r = rng.random()
        if i > 10 and r < 0.15:
            j = int(rng.integers(0, i))
            w = texts[j].split()
            if r < 0.10:
                for _ in range(int(rng.integers(1, 4))):
                    w[int(rng.integers(len(w)))] = f"w{int(rng.integers(VOCAB - 2))}"
            texts.append(" ".join(w))
            planted[i] = j
        else:
            texts.append(" ".join(f"w{k}" for k in words[i]))
    return texts, planted


def bench_embed(args) -> None:
    sys.path.insert(0, ROOT)
    from curate.stages.dedup.semantic.encoders import StaticEncoder

    model = make_model(os.path.join(args.workdir, "potion-shaped"))
    texts, _ = make_docs(args.docs)
    rows = []
    ours = StaticEncoder(model, 512)
    ours.encode(texts[:100])
    t = cpu()
    a = ours.encode(texts)
    rows.append(("curate StaticEncoder", cpu() - t))
    try:
        from model2vec import StaticModel
    except ImportError:
        b = None
    else:
        theirs = StaticModel.from_pretrained(model)
        theirs.encode(texts[:100])
        t = cpu()
        b = theirs.encode(texts, use_multiprocessing=False)
        rows.append(("model2vec StaticModel.encode", cpu() - t))
    for name, seconds in rows:
        print(f"{name:32s} {args.docs:7d} docs {seconds:7.2f} CPU-s {args.docs / seconds:10.0f} docs/CPU-s")
    if b is not None:
        b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-32)
        print(f"largest difference of the normalised vectors: {np.abs(a - b).max():.2e}")


def truth(vectors: np.ndarray, removed: np.ndarray, planted: np.ndarray, t: float, block: int = 4096) -> dict:
    """Removals, recall of the planted copies and removals below the threshold (brute force over every
    removed x kept pair, ``block`` removed rows at a time: never an n x n matrix)."""
    kept = vectors[~removed]
    gone = vectors[removed]
    below = 0
    for s in range(0, len(gone), block):
        best = np.full(min(block, len(gone) - s), -np.inf, dtype=np.float32)
        for c in range(0, len(kept), 65536):
            best = np.maximum(best, (gone[s:s + block] @ kept[c:c + 65536].T).max(1))
        below += int((best < t).sum())
    pairs = np.flatnonzero(planted >= 0)
    caught = int(sum(1 for i in pairs if removed[i] or removed[planted[i]]))
    return {"removed": int(removed.sum()), "recall": caught / max(1, len(pairs)), "below_threshold": below}


def bench_stage(args) -> None:
    sys.path.insert(0, ROOT)
    import pandas as pd

    import curate
    from curate.stages.dedup.semantic.encoders import StaticEncoder

    model = make_model(os.path.join(args.workdir, "potion-shaped"))
    texts, planted = make_docs(args.docs, seed=1)
    data = os.path.join(args.workdir, f"docs-{args.docs}.jsonl")
    pd.DataFrame({"id": [f"d{i:07d}" for i in range(len(texts))], "text": texts}).to_json(
        data, orient="records", lines=True)
    out = os.path.join(args.workdir, f"out-{args.docs}")
    import shutil

    shutil.rmtree(out, ignore_errors=True)
    pipeline = curate.Pipeline([curate.Step("semantic_dedup", model=model, eps=args.eps)], name="bench-semantic")
    t, w = cpu(), time.perf_counter()
    pipeline.run(data, out, cluster="threads")
    ours = {"cpu": cpu() - t, "wall": time.perf_counter() - w}
    kept = set(pd.read_parquet(out + "/01-semantic_dedup", columns=["id"])["id"]) if os.path.isdir(
        out + "/01-semantic_dedup") else set(curate_output_ids(out))
    ids = [f"d{i:07d}" for i in range(len(texts))]
    vectors = StaticEncoder(model, 512).encode(texts)
    thr = float(np.float32(1 - args.eps))
    results = {"curate semantic_dedup": {**ours, **truth(vectors, np.array([i not in kept for i in ids]), planted, thr)}}
    if args.semhash and os.path.isfile(os.path.join(args.semhash, "bin", "python")):
        proc = subprocess.run([os.path.join(args.semhash, "bin", "python"), __file__, "_semhash", model, data,
                               str(1 - args.eps)], capture_output=True, text=True, check=True)
        got = json.loads(proc.stdout.strip().splitlines()[-1])
        keep = set(got.pop("kept"))
        results["SemHash 0.5.0"] = {**got, **truth(vectors, np.array([i not in keep for i in ids]), planted, thr)}
    print(f"{args.docs} documents, {int((planted >= 0).sum())} planted copies, eps {args.eps}")
    for name, r in results.items():
        print(f"{name:24s} {r['cpu']:7.2f} CPU-s {r['wall']:7.2f} wall-s {args.docs / r['cpu']:8.0f} docs/CPU-s "
              f"removed {r['removed']:5d} recall {r['recall']:.4f} below threshold {r['below_threshold']}")


def write_scale_input(folder: str, docs: int, files: int) -> str:
    """--docs documents in --files JSONL files (10% near and 5% exact copies within a file), once."""
    import pandas as pd

    stamp = os.path.join(folder, "params.json")
    want = {"docs": docs, "files": files}
    if os.path.isfile(stamp) and json.load(open(stamp)) == want:
        return folder
    os.makedirs(folder, exist_ok=True)
    per = -(-docs // files)
    for f in range(files):
        n = min(per, docs - f * per)
        texts, _ = make_docs(n, seed=100 + f)
        pd.DataFrame({"id": [f"d{f * per + i:08d}" for i in range(n)], "text": texts}).to_json(
            os.path.join(folder, f"docs-{f:04d}.jsonl"), orient="records", lines=True)
    with open(stamp, "w") as fh:
        json.dump(want, fh)
    return folder


def bench_scale(args) -> None:
    import re
    import shutil
    import threading

    import psutil

    model = make_model(os.path.join(args.workdir, "potion-shaped"))
    data = write_scale_input(os.path.join(args.workdir, f"scale-{args.docs}-{args.files}"), args.docs, args.files)
    out = os.path.join(args.workdir, f"scale-out-{args.docs}")
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(out + ".side", ignore_errors=True)
    cmd = [sys.executable, "-m", "curate", "--log-level", "INFO", "dedup", "semantic", "--input", data,
           "--output", out, "--model", model, "--cluster", "local", "--workers", str(args.workers),
           "--memory-limit", args.memory_limit]
    load = os.getloadavg()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    marks: list[tuple[float, str]] = []  # (time, step) as each step's line arrives
    lines: list[str] = []

    def read():
        for line in proc.stdout:
            lines.append(line)
            m = re.search(r"step (\w+): \d+ rows", line)
            if m:
                marks.append((time.perf_counter(), m.group(1)))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    root = psutil.Process(proc.pid)
    samples: list[tuple[float, int]] = []  # (time, largest worker RSS)
    peaks: dict[int, tuple[str, int]] = {}
    workers: set[int] = set()
    while proc.poll() is None:
        try:
            tree = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            break
        largest = 0
        for q in tree:
            try:
                rss, cmdline = q.memory_info().rss, " ".join(q.cmdline())
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            kind = "main" if q.pid == proc.pid else ("worker" if "spawn_main" in cmdline else "other")
            if kind == "worker" and "resource_tracker" not in cmdline:
                workers.add(q.pid)
                largest = max(largest, rss)
            peaks[q.pid] = (kind, max(rss, peaks.get(q.pid, (kind, 0))[1]))
        samples.append((time.perf_counter(), largest))
        time.sleep(0.2)
    wall = time.perf_counter() - t0
    reader.join(timeout=5)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    tree_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode:
        raise SystemExit("".join(lines[-20:]))
    steps, start = [], t0
    for end, name in marks + [(time.perf_counter(), "removal+write")]:
        inside = [rss for ts, rss in samples if start <= ts <= end]
        steps.append((name, round(end - start, 1), max(inside, default=0) >> 20))
        start = end
    restarts = max(0, len(workers) - args.workers)
    print(f"{args.docs} documents in {args.files} files, {args.workers} workers at {args.memory_limit}; "
          f"load before {load[0]:.2f} {load[1]:.2f}, after {os.getloadavg()[0]:.2f}")
    print(f"wall {wall:.1f} s, CPU {tree_cpu:.1f} s ({args.docs / tree_cpu:.0f} docs/CPU-s), restarts {restarts}")
    print("peaks MiB:", sorted(((k, v >> 20) for k, v in peaks.values()), key=lambda kv: -kv[1]))
    for name, seconds, peak in steps:
        print(f"  {name:14s} {seconds:8.1f} s   largest worker {peak:6d} MiB")
    with open(out + ".bench.json", "w") as fh:
        json.dump({"docs": args.docs, "files": args.files, "wall": wall, "cpu": tree_cpu, "restarts": restarts,
                   "peaks_mib": sorted(((k, v >> 20) for k, v in peaks.values()), key=lambda kv: -kv[1]),
                   "steps": steps, "load_before": load, "load_after": os.getloadavg()}, fh)


def curate_output_ids(out: str):
    import glob

    import pandas as pd

    for path in glob.glob(os.path.join(out, "*", "part-*.parquet")):
        yield from pd.read_parquet(path, columns=["id"])["id"]


def _semhash(model: str, data: str, threshold: str) -> None:
    """Runs in SemHash's venv: nothing of curate is imported."""
    from model2vec import StaticModel
    from semhash import SemHash

    with open(data, encoding="utf-8") as f:
        records = [{"id": r["id"], "text": r["text"]} for r in map(json.loads, f)]
    encoder = StaticModel.from_pretrained(model)
    t, w = cpu(), time.perf_counter()
    sh = SemHash.from_records(records=records, columns=["text"], model=encoder)
    result = sh.self_deduplicate(threshold=float(threshold))
    seconds, wall = cpu() - t, time.perf_counter() - w
    print(json.dumps({"cpu": seconds, "wall": wall, "kept": [r["id"] for r in result.selected]}))


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "_semhash":
        _semhash(*sys.argv[2:5])
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workdir", default="/tmp/curate-bench-semantic")
    sub = p.add_subparsers(dest="what", required=True)
    e = sub.add_parser("embed")
    e.add_argument("--docs", type=int, default=5000)
    s = sub.add_parser("stage")
    s.add_argument("--docs", type=int, default=2000)
    s.add_argument("--eps", type=float, default=0.01)
    s.add_argument("--semhash", default="/tmp/semhash-venv")
    c = sub.add_parser("scale")
    c.add_argument("--docs", type=int, default=250_000)
    c.add_argument("--files", type=int, default=100)
    c.add_argument("--workers", type=int, default=2)
    c.add_argument("--memory-limit", default="2GiB")
    args = p.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    {"embed": bench_embed, "stage": bench_stage, "scale": bench_scale}[args.what](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
