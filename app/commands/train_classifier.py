"""``curate train-classifier``: train a fastText quality model on local data.

    curate train-classifier --positive good/ --negative crawl/ --output quality.bin

Positive and negative examples are document datasets (JSONL or Parquet files, directories or
globs, as every stage reads them). Texts are prepared exactly as the ``classifier`` filter prepares
them (one line, case kept as NeMo Curator does), labelled ``__label__hq`` / ``__label__lq``, shuffled with ``--seed``,
and a ``--valid-fraction`` is held out to report precision and recall. The model is written
atomically (temp file, then rename). Use it in a chain::

    - {filter: classifier, model: quality.bin, min: 0.5}
"""

from __future__ import annotations

import logging
import math
import os
import tempfile

from curate.stages.errors import DataError, SettingsError

log = logging.getLogger(__name__)

HELP = "train a fastText quality classifier from positive and negative documents"


def add_arguments(p) -> None:
    p.add_argument("--positive", nargs="+", required=True, metavar="PATH", help="good documents (files, dirs, globs)")
    p.add_argument("--negative", nargs="+", required=True, metavar="PATH", help="bad documents (files, dirs, globs)")
    p.add_argument("--output", required=True, metavar="MODEL.bin", help="where to write the model")
    p.add_argument("--text-field", default="text", help="input field with the text (default: text)")
    p.add_argument("--max-docs", type=int, default=None, metavar="N", help="at most N documents per class")
    p.add_argument("--valid-fraction", type=float, default=0.1, help="held out for validation (default 0.1)")
    p.add_argument("--epoch", type=int, default=5, help="training epochs (default 5)")
    p.add_argument("--lr", type=float, default=0.1, help="learning rate (default 0.1)")
    p.add_argument("--word-ngrams", type=int, default=2, help="word n-gram features (default 2)")
    p.add_argument("--dim", type=int, default=64, help="vector size (default 64)")
    p.add_argument("--bucket", type=int, default=200_000, help="hash buckets for n-grams (default 200000)")
    p.add_argument("--min-count", type=int, default=1, help="minimal word count (default 1)")
    p.add_argument("--threads", type=int, default=1, help="training threads; 1 is reproducible (default 1)")
    p.add_argument("--seed", type=int, default=42, help="shuffle and training seed (default 42)")
    p.add_argument("--positive-label", default="__label__hq")
    p.add_argument("--negative-label", default="__label__lq")


def read_texts(specs, text_field: str, max_docs: int | None, what: str) -> list[str]:
    """Non-blank texts of a dataset, partition by partition, up to ``max_docs``."""
    import dask

    from curate.stages.dataset import read_dataset
    from curate.stages.stage import IOSettings

    ddf = read_dataset(list(specs), IOSettings(text_field=text_field))
    out: list[str] = []
    for part in ddf.to_delayed():
        df = dask.compute(part, scheduler="synchronous")[0]
        texts = df["text"].dropna()
        out.extend(t for t in texts.tolist() if t.strip())
        if max_docs is not None and len(out) >= max_docs:
            return out[:max_docs]
    if not out:
        raise DataError(f"{what} {' '.join(map(str, specs))}: no documents with text")
    return out


#: fastText training runs in a child process. The fastText build we use (fasttext-numpy2-wheel
#: 0.9.2, from fastText master) keeps the input matrix in an uninitialised aligned buffer and its
#: DenseMatrix::uniform fills only `thread` of 10 blocks, so most rows start as whatever the heap
#: held: in a busy process that is sometimes NaN ("Encountered NaN", found with valgrind). glibc's
#: malloc perturb byte 255 makes every allocation start zeroed, which is what upstream fastText's
#: std::vector gives; a child process is the only place that setting can be made.
_FIT = """
import json, sys
import fasttext
p = json.loads(sys.argv[1])
model = fasttext.train_supervised(**p["args"])
out = {"labels": list(model.get_labels())}
if p["valid"]:
    n, precision, recall = model.test(p["valid"])
    out.update(precision=precision, recall=recall)
model.save_model(p["output"])
print(json.dumps(out))
"""


def _fit(args: dict, valid: str | None, output: str) -> dict:
    import json
    import subprocess
    import sys

    tunables = [t for t in os.environ.get("GLIBC_TUNABLES", "").split(":") if t]
    env = {**os.environ, "GLIBC_TUNABLES": ":".join([*tunables, "glibc.malloc.perturb=255"])}
    proc = subprocess.run([sys.executable, "-c", _FIT, json.dumps({"args": args, "valid": valid, "output": output})],
                          env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no message"])[-1]
        raise DataError(f"fastText training failed: {last}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def train(positive: list[str], negative: list[str], output: str, *, valid_fraction: float = 0.1, epoch: int = 5,
          lr: float = 0.1, word_ngrams: int = 2, dim: int = 64, bucket: int = 200_000, min_count: int = 1,
          threads: int = 1, seed: int = 42, positive_label: str = "__label__hq",
          negative_label: str = "__label__lq") -> dict:
    """Train and save a model; return the counts and validation metrics."""
    import numpy as np

    from curate.stages.filters.classifier import fasttext_lines

    lines = [f"{positive_label} {t}" for t in fasttext_lines(positive) if t]
    lines += [f"{negative_label} {t}" for t in fasttext_lines(negative) if t]
    order = np.random.default_rng(seed).permutation(len(lines))
    lines = [lines[i] for i in order]
    n_valid = int(len(lines) * valid_fraction)
    valid, training = lines[:n_valid], lines[n_valid:]
    folder = os.path.dirname(os.path.abspath(output))
    with tempfile.TemporaryDirectory(dir=folder, prefix=".train-classifier-") as tmp:
        train_file = os.path.join(tmp, "train.txt")
        with open(train_file, "w", encoding="utf-8") as f:
            f.write("\n".join(training) + "\n")
        valid_file = None
        if valid:
            valid_file = os.path.join(tmp, "valid.txt")
            with open(valid_file, "w", encoding="utf-8") as f:
                f.write("\n".join(valid) + "\n")
        args = {"input": train_file, "epoch": epoch, "lr": lr, "wordNgrams": word_ngrams, "dim": dim,
                "bucket": bucket, "minCount": min_count, "thread": threads, "seed": seed, "verbose": 0,
                "loss": "softmax"}
        tmp_model = os.path.join(tmp, "model.bin")
        result = _fit(args, valid_file, tmp_model)
        os.replace(tmp_model, output)
    return {"positive": len(positive), "negative": len(negative), "train": len(training), "valid": len(valid),
            **result}


def check_arguments(args) -> None:
    """Every usage error before any data is read (SettingsError: one line, exit 2)."""
    for name in ("epoch", "dim", "bucket", "threads", "word_ngrams", "min_count"):
        if getattr(args, name) <= 0:
            raise SettingsError(f"--{name.replace('_', '-')} must be positive; got {getattr(args, name)}")
    if not (math.isfinite(args.lr) and args.lr > 0):
        raise SettingsError(f"--lr must be a positive number; got {args.lr}")
    if not 0 <= args.valid_fraction < 1:  # NaN fails this too
        raise SettingsError(f"--valid-fraction must be in [0, 1); got {args.valid_fraction}")
    if not 0 <= args.seed < 2**31:  # fastText keeps its seed in a C int
        raise SettingsError(f"--seed must be in [0, 2**31); got {args.seed}")
    if args.max_docs is not None and args.max_docs <= 0:
        raise SettingsError(f"--max-docs must be positive; got {args.max_docs}")
    if args.positive_label == args.negative_label:
        raise SettingsError("--positive-label and --negative-label must differ")
    folder = os.path.dirname(os.path.abspath(args.output))
    if not os.path.isdir(folder):
        raise SettingsError(f"--output {args.output}: folder {folder} does not exist")


def main(args) -> int:
    check_arguments(args)
    if args.max_docs is None:
        log.warning("train-classifier: no --max-docs: every document of --positive and --negative is read into "
                    "memory on this machine (--max-docs N reads only the first N of each)")
    positive = read_texts(args.positive, args.text_field, args.max_docs, "--positive")
    negative = read_texts(args.negative, args.text_field, args.max_docs, "--negative")
    r = train(positive, negative, args.output, valid_fraction=args.valid_fraction, epoch=args.epoch, lr=args.lr,
              word_ngrams=args.word_ngrams, dim=args.dim, bucket=args.bucket, min_count=args.min_count,
              threads=args.threads, seed=args.seed, positive_label=args.positive_label,
              negative_label=args.negative_label)
    metrics = (f"; validation on {r['valid']} documents: precision@1 {r['precision']:.3f}, "
               f"recall@1 {r['recall']:.3f}"
               if "precision" in r else "")
    print(f"curate train-classifier: {r['positive']} positive, {r['negative']} negative documents{metrics}")
    print(f"curate train-classifier: model in {os.path.abspath(args.output)} "
          f"({os.path.getsize(args.output) / 1e6:.1f} MB); labels {', '.join(r['labels'])}")
    return 0
