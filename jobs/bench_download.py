"""Benchmark of download -> extract: streaming (what ``curate download`` does) against
download-then-extract (every raw file landed first, then ``curate extract warc``), on the same files.

    .venv/bin/python jobs/bench_download.py [--files 8] [--copies 4] [--workers 2] [--repeat 1]

A local mirror (an HTTP server on 127.0.0.1, :mod:`tests.httpserver`) serves ``--files`` WARC
files, each ``--copies`` copies of the records of jobs/data/rust-book.warc.gz (124 real pages).
Both modes run the CLI in a subprocess with a local cluster of ``--workers`` workers:

- ``stream``: ``curate download urls --list LIST --output OUT`` (one task per file, the bytes go from
  the socket into the extractor);
- ``download+extract``: the files downloaded with curate's downloader (``curate.stages.download.http``,
  workers x 4 at once) into a raw folder, then ``curate extract warc --input RAW --output OUT``.

Reported per mode: documents kept, wall seconds, documents per second, and the peak size of the raw
folder (sampled every 20 ms; for ``stream`` the output's ``_raw`` and any ``.part`` file count).
With ``--repeat`` the modes alternate and the best run of each is kept.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from curate.stages.download.http import DownloadOptions, download  # noqa: E402
from tests.httpserver import FileServer  # noqa: E402

SOURCE = os.path.join(ROOT, "jobs", "data", "rust-book.warc.gz")
CURATE = [sys.executable, "-m", "curate"]


def make_mirror(folder: str, files: int, copies: int) -> list[str]:
    """``files`` WARC files of ``copies`` x the source's gzip members (records keep their ids: fine
    for a throughput benchmark, dedup is not involved)."""
    data = open(SOURCE, "rb").read()
    names = []
    for i in range(files):
        name = f"CC-BENCH-{i:05d}.warc.gz"
        with open(os.path.join(folder, name), "wb") as f:
            for _ in range(copies):
                f.write(data)
        names.append(name)
    return names


class DiskPeak:
    """Peak bytes under ``paths`` (files whose name passes ``want``), sampled in a thread."""

    def __init__(self, folder: str, want):
        self.folder, self.want, self.peak = folder, want, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _size(self) -> int:
        total = 0
        for root, _, names in os.walk(self.folder):
            for n in names:
                p = os.path.join(root, n)
                if self.want(os.path.relpath(p, self.folder)):
                    try:
                        total += os.path.getsize(p)
                    except OSError:
                        pass
        return total

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self._size())
            time.sleep(0.02)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._size())


def cli(*args) -> None:
    proc = subprocess.run([*CURATE, *args], cwd=ROOT, capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"curate {' '.join(args)} failed:\n{proc.stderr[-3000:]}")


def kept(out: str) -> int:
    with open(os.path.join(out, "_manifest.json")) as f:
        return json.load(f)["counts"]["out"]


def run_stream(server, names, work, workers) -> dict:
    lst = os.path.join(work, "urls.txt")
    with open(lst, "w") as f:
        f.write("".join(server.url(n) + "\n" for n in names))
    out = os.path.join(work, "stream-out")
    t = time.perf_counter()
    with DiskPeak(work, lambda rel: rel.startswith("stream-out/_raw") or rel.endswith(".part")) as disk:
        cli("download", "urls", "--list", lst, "--output", out, "--workers", str(workers), "--force")
    seconds = time.perf_counter() - t
    return {"docs": kept(out), "seconds": seconds, "raw_peak": disk.peak}


def run_download_then_extract(server, names, work, workers) -> dict:
    raw = os.path.join(work, "raw")
    os.makedirs(raw, exist_ok=True)
    out = os.path.join(work, "dte-out")
    options = DownloadOptions(max_inflight=4 * workers)
    t = time.perf_counter()
    with DiskPeak(work, lambda rel: rel.startswith("raw/")) as disk:
        with ThreadPoolExecutor(4 * workers) as pool:
            list(pool.map(lambda n: download(server.url(n), os.path.join(raw, n), options), names))
        cli("extract", "warc", "--input", raw, "--output", out, "--workers", str(workers), "--force")
    seconds = time.perf_counter() - t
    return {"docs": kept(out), "seconds": seconds, "raw_peak": disk.peak}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--copies", type=int, default=4, help="copies of the 124 source pages per WARC file")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args(argv)
    with gzip.open(SOURCE) as f:  # fail early on a missing source
        f.read(1)
    results: dict[str, list[dict]] = {"stream": [], "download+extract": []}
    with tempfile.TemporaryDirectory(prefix="bench-download-") as tmp:
        www = os.path.join(tmp, "www")
        os.makedirs(www)
        names = make_mirror(www, args.files, args.copies)
        size = sum(os.path.getsize(os.path.join(www, n)) for n in names)
        print(f"mirror: {args.files} WARC files, {size / 1e6:.1f} MB, on 127.0.0.1; {args.workers} workers")
        with FileServer(www) as server:
            for r in range(args.repeat):
                for mode, fn in (("stream", run_stream), ("download+extract", run_download_then_extract)):
                    work = os.path.join(tmp, f"{mode}-{r}".replace("+", "-"))
                    os.makedirs(work)
                    results[mode].append(fn(server, names, work, args.workers))
                    shutil.rmtree(work)
    print(f"{'mode':<18} {'docs':>7} {'seconds':>8} {'docs/s':>8} {'peak raw disk':>14}")
    for mode, runs in results.items():
        best = min(runs, key=lambda x: x["seconds"])
        print(f"{mode:<18} {best['docs']:>7} {best['seconds']:>8.2f} {best['docs'] / best['seconds']:>8.1f} "
              f"{best['raw_peak'] / 1e6:>11.1f} MB")
    s, d = (min(results[m], key=lambda x: x["seconds"]) for m in ("stream", "download+extract"))
    print(f"stream / download+extract docs/s: {(s['docs'] / s['seconds']) / (d['docs'] / d['seconds']):.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
