"""Make a larger input for benchmarks from the bundled sample (run from the repo root).

    python jobs/data/make_bench_input.py --copies 100 --files 8 --output out/bench-input

Each copy of a page gets its own id and a copy number in the text (so copies are near, not exact,
duplicates); the documents are spread round-robin over --files gzip'd JSONL files (one partition each).
"""

import argparse
import gzip
import json
import os


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--copies", type=int, default=100)
    p.add_argument("--files", type=int, default=8)
    p.add_argument("--output", default="out/bench-input")
    args = p.parse_args()
    with gzip.open("jobs/data/sample.jsonl.gz", "rt", encoding="utf-8") as f:
        docs = [json.loads(line) for line in f]
    os.makedirs(args.output, exist_ok=True)
    outs = [gzip.open(os.path.join(args.output, f"docs-{i:03d}.jsonl.gz"), "wt", encoding="utf-8", compresslevel=1)
            for i in range(args.files)]
    n = 0
    for c in range(args.copies):
        for d in docs:
            rec = {**d, "id": f"{d['id']}-{c:05d}", "text": f"{d['text']}\n\nCopy {c}."}
            outs[n % args.files].write(json.dumps(rec, ensure_ascii=False) + "\n")
            n += 1
    for f in outs:
        f.close()
    print(f"{n} documents in {args.files} files under {args.output}")


if __name__ == "__main__":
    main()
