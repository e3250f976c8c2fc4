#!/usr/bin/env python
"""What checksumming every output file while writing costs (issue: output ownership).

Runs whole ``curate`` processes alternately with and without the XXH3-128 checksum
(``CURATE_BENCH_NO_CHECKSUM=1`` turns the hashing off; it exists for this measurement only) on:

- the sample job (``jobs/sample.yaml``, every stage, ``--force``);
- a tokenize of about ``--mb`` MB of synthetic JSONL with cl100k_base (offline).

Prints the median seconds of each and the overhead in percent. Alternating whole processes in one
run keeps the comparison fair on a busy machine; absolute times are not the point.

    .venv/bin/python jobs/bench_output.py --repeat 3 --mb 100
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def make_input(path: Path, mb: int) -> None:
    rng = random.Random(0)
    words = [w for w in (ROOT / "README.md").read_text().split() if w.isalpha()] or ["word"]
    with open(path, "w", encoding="utf-8") as f:
        size, i = 0, 0
        while size < mb * 1_000_000:
            text = " ".join(rng.choice(words) for _ in range(rng.randint(200, 2000)))
            line = json.dumps({"id": f"d{i}", "text": text}) + "\n"
            f.write(line)
            size += len(line)
            i += 1


def run(args: list[str], checksum: bool) -> float:
    env = {**os.environ}
    if not checksum:
        env["CURATE_BENCH_NO_CHECKSUM"] = "1"
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "curate", *args], cwd=ROOT, env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--mb", type=int, default=100)
    p.add_argument("--workers", type=int, default=2)
    a = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="curate-bench-output-") as tmp:
        tmp = Path(tmp)
        make_input(tmp / "in.jsonl", a.mb)
        cases = {
            "sample job": ["run", "jobs/sample.yaml", "--output", str(tmp / "sample"), "--force",
                           "--workers", str(a.workers)],
            f"tokenize {a.mb} MB": ["tokenize", "--input", str(tmp / "in.jsonl"), "--output", str(tmp / "tok"),
                                    "--tokenizer", "tiktoken:cl100k_base", "--force", "--blocksize", "16MiB",
                                    "--workers", str(a.workers)],
        }
        for name, args in cases.items():
            run(args, True)  # warm the page cache and any first-use cost
            times = {True: [], False: []}
            for _ in range(a.repeat):
                for checksum in (False, True):
                    times[checksum].append(run(args, checksum))
            on, off = statistics.median(times[True]), statistics.median(times[False])
            print(f"{name}: with checksums {on:.2f} s, without {off:.2f} s, overhead {100 * (on - off) / off:+.1f}% "
                  f"(medians of {a.repeat}, alternated)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
