"""Benchmark of HTML text extraction: documents per second per core, for each algorithm, on the same WARCs.

    .venv/bin/python jobs/bench_extract.py [WARC ...] [--algorithms resiliparse,justext,trafilatura]
                                           [--repeat 5] [--processes 1]

Two figures per algorithm, both in documents per second per core:

- ``full``: what the ``extract_warc`` stage does per file (read and inflate the WARC, parse records,
  decode the charset, remove boilerplate, identify the language), timed on the process's CPU
  clock, so other load on the machine barely moves it;
- ``extract``: the boilerplate removal alone, on pages decoded beforehand.

Each is the best of ``--repeat`` runs after a warm-up (imports, the language model). With
``--processes N`` the ``full`` pass also runs in N processes at once (started together) and
reports each process's documents per wall-clock second, averaged: what parallel workers keep per
core (on a shared machine, other load lowers it).
Default input: jobs/data/rust-book.warc.gz (124 real pages). Target: resiliparse >= 200 docs/s/core.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from curate.stages.extract import RawFile  # noqa: E402
from curate.stages.extract.html import ALGORITHMS, decode_html, extract_text  # noqa: E402
from curate.stages.extract.warc import ExtractWarcSettings, extract_warc_file  # noqa: E402

DEFAULT_INPUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "rust-book.warc.gz")
TARGET = 200.0


def full_pass(files: list[str], algorithm: str) -> tuple[int, float]:
    """(documents kept, CPU seconds) for the extract_warc per-file function over ``files``."""
    settings = ExtractWarcSettings(algorithm=algorithm)
    start = time.process_time()
    docs = 0
    for path in files:
        df = extract_warc_file(RawFile(path, os.path.basename(path)), settings, "raise")
        docs += int(df["_reason"].isna().sum())
    return docs, time.process_time() - start


def load_pages(files: list[str]) -> list[str]:
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    pages = []
    for path in files:
        with open(path, "rb") as f:
            for rec in ArchiveIterator(f, record_types=WarcRecordType.response):
                if (rec.http_content_type or "").lower() in ("text/html", "application/xhtml+xml"):
                    pages.append(decode_html(rec.reader.read(), rec.http_charset)[0])
    return pages


def extract_pass(pages: list[str], algorithm: str) -> tuple[int, float]:
    start = time.process_time()
    for html in pages:
        extract_text(html, algorithm)
    return len(pages), time.process_time() - start


def _parallel_worker(files, algorithm, repeat, barrier, results) -> None:
    full_pass(files, algorithm)  # warm-up: imports and the language model, in this process
    best = 0.0
    for _ in range(repeat):
        barrier.wait()  # every process starts each timed run together
        start = time.perf_counter()
        docs, _ = full_pass(files, algorithm)
        best = max(best, docs / (time.perf_counter() - start))
    results.put(best)


def parallel_pass(files: list[str], algorithm: str, processes: int, repeat: int) -> float:
    """Documents/s per process (wall clock) while ``processes`` processes extract ``files`` at once."""
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(processes), ctx.Queue()
    procs = [ctx.Process(target=_parallel_worker, args=(files, algorithm, repeat, barrier, results))
             for _ in range(processes)]
    for p in procs:
        p.start()
    rates = [results.get() for _ in procs]
    for p in procs:
        p.join()
    return sum(rates) / len(rates)


def best_rate(fn, *args, repeat: int) -> tuple[int, float]:
    fn(*args)  # warm-up
    runs = [fn(*args) for _ in range(repeat)]
    docs = runs[0][0]
    return docs, docs / min(s for _, s in runs)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("warcs", nargs="*", default=[DEFAULT_INPUT], help="WARC files (default: the Rust book)")
    p.add_argument("--algorithms", default=",".join(ALGORITHMS), help="comma-separated (default: all)")
    p.add_argument("--repeat", type=int, default=5, help="timed runs per figure; the best counts (default 5)")
    p.add_argument("--processes", type=int, default=1, help="also run the full pass in N processes at once")
    args = p.parse_args(argv)
    algorithms = [a.strip() for a in args.algorithms.split(",") if a.strip()]
    unknown = [a for a in algorithms if a not in ALGORITHMS]
    if unknown:
        p.error(f"unknown algorithm {unknown[0]!r} (known: {', '.join(ALGORITHMS)})")

    pages = load_pages(args.warcs)
    print(f"input: {', '.join(args.warcs)}: {len(pages)} HTML pages, "
          f"{sum(len(h) for h in pages) / len(pages) / 1024:.1f} KiB of HTML per page on average")
    header = f"{'algorithm':<12} {'docs kept':>9} {'full docs/s/core':>17} {'extract docs/s/core':>20}"
    if args.processes > 1:
        header += f" {f'full x{args.processes} procs':>16}"
    print(header)
    rows = {}
    for algorithm in algorithms:
        docs, full = best_rate(full_pass, args.warcs, algorithm, repeat=args.repeat)
        _, extract = best_rate(extract_pass, pages, algorithm, repeat=args.repeat)
        line = f"{algorithm:<12} {docs:>9} {full:>17.0f} {extract:>20.0f}"
        if args.processes > 1:
            line += f" {parallel_pass(args.warcs, algorithm, args.processes, args.repeat):>16.0f}"
        print(line, flush=True)
        rows[algorithm] = full
    if "resiliparse" in rows:
        base = rows["resiliparse"]
        print("relative to resiliparse (full): " + ", ".join(f"{a} {r / base:.2f}x" for a, r in rows.items()))
        verdict = "meets" if base >= TARGET else "MISSES"
        print(f"resiliparse {base:.0f} docs/s/core {verdict} the target of {TARGET:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
