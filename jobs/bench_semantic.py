"""Semantic dedup: our static-model reader vs model2vec, and the whole stage vs SemHash.

    .venv/bin/python jobs/bench_semantic.py embed [--docs 5000]
    .venv/bin/python jobs/bench_semantic.py stage [--docs 2000] [--semhash /tmp/semhash-venv] [--eps 0.01]

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
    args = p.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    (bench_embed if args.what == "embed" else bench_stage)(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
