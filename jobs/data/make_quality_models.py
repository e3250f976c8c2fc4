"""Two small fastText quality classifiers for jobs/quality_buckets.yaml, trained on the bundled sample.

    .venv/bin/python jobs/data/make_quality_models.py [--output jobs/models]

A demonstration of the mechanics, not a good classifier: ``prose.bin`` tells the Rust book's
paragraphs (positives, from jobs/data/sample.jsonl.gz) from shuffled word salad of the same words;
``tutorial.bin`` tells paragraphs that explain (they mention "we", "you", "let's") from the others.
Both are written with ``curate train-classifier`` (seeded, one thread: the same bytes every time), into
``--output`` (default jobs/models, which git ignores).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def paragraphs() -> list[str]:
    import gzip

    out = []
    with gzip.open(os.path.join(HERE, "sample.jsonl.gz"), "rt", encoding="utf-8") as f:
        for line in f:
            out += [p.strip() for p in json.loads(line)["text"].split("\n\n") if len(p.split()) >= 12]
    return out


def write(path: str, texts: list[str]) -> str:
    with open(path, "w", encoding="utf-8") as f:
        for i, t in enumerate(texts):
            f.write(json.dumps({"id": f"t{i}", "text": t}) + "\n")
    return path


def train(positive: list[str], negative: list[str], output: str, work: str) -> None:
    name = os.path.splitext(os.path.basename(output))[0]
    pos, neg = write(os.path.join(work, f"{name}-pos.jsonl"), positive), write(os.path.join(work, f"{name}-neg.jsonl"), negative)
    subprocess.run([sys.executable, "-m", "curate", "--log-level", "WARNING", "train-classifier", "--positive", pos,
                    "--negative", neg, "--output", output, "--dim", "16", "--bucket", "20000", "--epoch", "10"],
                   cwd=ROOT, check=True, stdout=subprocess.DEVNULL)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--output", default=os.path.join(ROOT, "jobs", "models"))
    args = p.parse_args()
    os.makedirs(args.output, exist_ok=True)
    rng = random.Random(0)
    paras = paragraphs()
    words = [w for t in paras for w in t.split()]
    salad = [" ".join(rng.choice(words) for _ in range(len(t.split()))) for t in paras]
    explain = [t for t in paras if any(w in t.lower().split() for w in ("we", "you", "let's"))]
    other = [t for t in paras if t not in set(explain)]
    with tempfile.TemporaryDirectory() as work:
        train(paras, salad, os.path.join(args.output, "prose.bin"), work)
        train(explain, other, os.path.join(args.output, "tutorial.bin"), work)
    print(f"models in {args.output}: prose.bin, tutorial.bin")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
