"""The regex filter against datatrove's RegexFilter: the same documents, the same pattern, one core each.

    .venv/bin/python jobs/bench_regex.py --datatrove-python /tmp/dt-venv/bin/python [--docs 20000] [--repeat 3]

Documents: --docs synthetic pages of about 4 kB (words drawn from a fixed vocabulary, a tenth of them
with a copyright line). curate scores them as its filter stage does (batches of 1,000, ``Texts``);
datatrove calls ``RegexFilter.filter`` per ``Document`` (its own loop). CPU seconds of the scoring alone
(``time.process_time``), curate and datatrove alternated, medians; both must drop the same documents.
datatrove runs from its own virtual environment (--datatrove-python), never imported here.
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

PATTERN = r"(?i)copyright|all rights reserved"
WORDS = ("river town mill century spring water people bank boats walls houses patience children flood "
         "bridge years fields farmers valley rhythm change light stone road market").split()

DATATROVE = r"""
import json, sys, time
from datatrove.data import Document
from datatrove.pipeline.filters import RegexFilter
texts = json.load(open(sys.argv[1]))
flt = RegexFilter(regex_exp=sys.argv[2])
t = time.process_time()
kept = [i for i, x in enumerate(texts) if flt.filter(Document(text=x, id=str(i))) is True]
print(json.dumps({"cpu": time.process_time() - t, "kept": len(kept)}))
"""


def make(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        words = [rng.choice(WORDS) for _ in range(600)]
        if i % 10 == 0:
            words.insert(rng.randrange(600), "Copyright 2024, all rights reserved.")
        out.append(" ".join(words))
    return out


def curate_run(texts: list[str]) -> dict:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from curate.stages.filters import get_filter
    from curate.stages.filters.texts import Texts

    flt = get_filter("regex")(pattern=PATTERN)
    t = time.process_time()
    kept = 0
    for i in range(0, len(texts), 1000):
        scores = flt.score_texts(Texts(texts[i:i + 1000]))
        kept += int(sum(1 for s in scores if flt.keep(s)))
    return {"cpu": time.process_time() - t, "kept": kept}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--docs", type=int, default=20000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--datatrove-python", required=True)
    args = p.parse_args()
    texts = make(args.docs)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(texts, f)
    runs = {"curate": [], "datatrove": []}
    try:
        for _ in range(args.repeat):
            runs["curate"].append(curate_run(texts))
            out = subprocess.run([args.datatrove_python, "-c", DATATROVE, f.name, PATTERN], capture_output=True,
                                 text=True, check=True).stdout
            runs["datatrove"].append(json.loads(out.strip().splitlines()[-1]))
    finally:
        os.unlink(f.name)
    kept = {k: {r["kept"] for r in v} for k, v in runs.items()}
    assert kept["curate"] == kept["datatrove"] and len(kept["curate"]) == 1, kept
    med = {k: statistics.median(r["cpu"] for r in v) for k, v in runs.items()}
    mb = sum(len(t.encode()) for t in texts) / 1e6
    print(f"{args.docs:,} documents ({mb:.0f} MB), pattern {PATTERN!r}, kept {kept['curate'].pop():,}; "
          f"load average {os.getloadavg()[0]:.2f}")
    for k, v in med.items():
        print(f"  {k:9s} {v:6.2f} CPU-s  {mb / v:6.1f} MB/s  (median of {args.repeat})")
    print(f"  curate / datatrove: {med['datatrove'] / med['curate']:.2f}x as fast")
    return 0


if __name__ == "__main__":
    sys.exit(main())
