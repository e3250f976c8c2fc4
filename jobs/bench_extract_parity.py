"""Agreement of curate's HTML extraction with NeMo Curator 0.9's, on the same WARC records.

    # NeMo Curator 0.9's CPU parts in a throwaway venv (never a dependency of curate):
    python3 -m venv /tmp/nemo && /tmp/nemo/bin/pip install --no-deps -r nemo-curator-0.9-cpu.txt
    .venv/bin/python jobs/bench_extract_parity.py --nemo-python /tmp/nemo/bin/python \
        [--before-rev 727a86d] [--algorithms justext,resiliparse] WARC [WARC ...]

For each algorithm the script extracts every HTML response record three ways, each in its own
process: NeMo's ``CommonCrawlWARCExtractor`` (``JusTextExtractor`` / ``ResiliparseExtractor`` with
their defaults: cld2 on the page picks the stop list, pages in languages without one are dropped),
curate's ``extract_warc_file`` as it is now (defaults), and (``--before-rev``) curate at an earlier
commit, checked out with ``git archive`` under /tmp. It prints, per algorithm and curate version:
pages, pages where both keep nothing or both keep the same text ("exact-equal": the same non-blank
lines, each stripped of surrounding spaces; NeMo joins lines with blank lines, curate keeps the
page's own breaks), and the mean word-level similarity (difflib ratio; 1 when both are empty).

The per-implementation outputs are also written as JSON lines (``--workdir``), so differences can
be read page by page.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# --------------------------------------------------------------------------- runs (in subprocesses)


def dump_curate(warcs: list[str], algorithm: str, out: str) -> None:
    import pandas as pd

    from curate.stages.extract import RawFile
    from curate.stages.extract.warc import ExtractWarcSettings, extract_warc_file

    with open(out, "w") as f:
        for path in warcs:
            df = extract_warc_file(RawFile(path, os.path.basename(path)), ExtractWarcSettings(algorithm=algorithm),
                                   "skip")
            for url, text, reason in zip(df["url"], df["text"], df["_reason"]):
                if pd.isna(url):
                    continue
                f.write(json.dumps({"url": url, "text": text if pd.isna(reason) else ""}) + "\n")


def dump_nemo(warcs: list[str], algorithm: str, out: str) -> None:
    import warnings

    from nemo_curator.download.commoncrawl import (
        CommonCrawlWARCExtractor,
        CommonCrawlWARCIterator,
        JusTextExtractor,
        ResiliparseExtractor,
    )

    warnings.simplefilter("ignore")
    extractor = CommonCrawlWARCExtractor(
        algorithm=JusTextExtractor() if algorithm == "justext" else ResiliparseExtractor())
    with open(out, "w") as f:
        for path in warcs:
            for meta, content in CommonCrawlWARCIterator().iterate(path):
                result = extractor.extract(content)
                f.write(json.dumps({"url": meta["url"], "text": (result or {}).get("text") or ""}) + "\n")


# --------------------------------------------------------------------------- comparison


def lines(text: str) -> list[str]:
    return [line.strip() for line in text.split("\n") if line.strip()]


def similarity(a: str, b: str) -> float:
    if not a.strip() and not b.strip():
        return 1.0
    return difflib.SequenceMatcher(None, a.split(), b.split(), autojunk=False).ratio()


def compare(nemo: dict[str, str], ours: dict[str, str]) -> dict:
    urls = sorted(set(nemo) | set(ours))
    equal = sum(lines(nemo.get(u, "")) == lines(ours.get(u, "")) for u in urls)
    sims = [similarity("\n".join(lines(nemo.get(u, ""))), "\n".join(lines(ours.get(u, "")))) for u in urls]
    return {"pages": len(urls), "exact_equal": equal, "mean_similarity": sum(sims) / len(sims),
            "kept_nemo": sum(bool(nemo.get(u)) for u in urls), "kept_curate": sum(bool(ours.get(u)) for u in urls),
            "chars_nemo": sum(len(nemo.get(u, "")) for u in urls),
            "chars_curate": sum(len(ours.get(u, "")) for u in urls)}


def load(path: str) -> dict[str, str]:
    with open(path) as f:
        return {r["url"]: r["text"] for r in map(json.loads, f)}


def run(python: str, repo: str, kind: str, warcs: list[str], algorithm: str, out: str) -> None:
    env = {**os.environ, "PYTHONPATH": repo, "PYTHONWARNINGS": "ignore"}
    cmd = [python, os.path.abspath(__file__), "--dump", kind, "--algorithms", algorithm, "--out", out, *warcs]
    subprocess.run(cmd, check=True, env=env, cwd=repo, stdout=subprocess.DEVNULL)


def checkout(rev: str, workdir: str) -> str:
    """``rev``'s modules/ under workdir (git archive: the working tree is not touched)."""
    dest = os.path.join(workdir, f"curate-{rev}")
    if not os.path.isdir(dest):
        os.makedirs(dest)
        archive = subprocess.run(["git", "-C", REPO, "archive", rev, "modules"], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", dest], input=archive, check=True)
    return dest


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("warcs", nargs="+")
    p.add_argument("--algorithms", default="justext,resiliparse")
    p.add_argument("--nemo-python", help="python of a venv with NeMo Curator 0.9 (see the docstring)")
    p.add_argument("--before-rev", help="also measure curate at this git revision")
    p.add_argument("--workdir", default=None, help="where the outputs go (default: a temporary folder)")
    p.add_argument("--reuse-nemo", action="store_true", help="reuse NeMo's outputs already in --workdir")
    p.add_argument("--dump", choices=("curate", "nemo"), help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    warcs = [os.path.abspath(w) for w in args.warcs]
    algorithms = [a for a in args.algorithms.split(",") if a]
    if args.dump:
        (dump_curate if args.dump == "curate" else dump_nemo)(warcs, algorithms[0], args.out)
        return 0
    if not args.nemo_python:
        p.error("--nemo-python is required (a throwaway venv with NeMo Curator 0.9, see --help)")
    workdir = os.path.abspath(args.workdir or tempfile.mkdtemp(prefix="curate-parity-"))
    os.makedirs(workdir, exist_ok=True)
    versions = {"now": REPO}
    if args.before_rev:
        versions = {f"before ({args.before_rev})": checkout(args.before_rev, workdir), **versions}
    print(f"{'algorithm':<12} {'curate':<18} {'pages':>5} {'exact-equal':>11} {'mean similarity':>15} "
          f"{'kept nemo/curate':>16} {'chars curate/nemo':>17}")
    results = {}
    for algorithm in algorithms:
        nemo_out = os.path.join(workdir, f"nemo-{algorithm}.jsonl")
        if not (args.reuse_nemo and os.path.exists(nemo_out)):
            run(args.nemo_python, REPO, "nemo", warcs, algorithm, nemo_out)
        nemo = load(nemo_out)
        for label, repo in versions.items():
            out = os.path.join(workdir, f"curate-{label.split()[0]}-{algorithm}.jsonl")
            run(sys.executable, repo, "curate", warcs, algorithm, out)
            r = compare(nemo, load(out))
            results[f"{algorithm} {label}"] = r
            print(f"{algorithm:<12} {label:<18} {r['pages']:>5} {r['exact_equal']:>11} {r['mean_similarity']:>15.3f} "
                  f"{r['kept_nemo']:>7}/{r['kept_curate']:<8} {r['chars_curate'] / max(r['chars_nemo'], 1):>17.2f}",
                  flush=True)
    with open(os.path.join(workdir, "parity.json"), "w") as f:
        json.dump(results, f, indent=1)
    print(f"outputs in {workdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
