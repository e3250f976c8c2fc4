"""WARC extraction speed against the raw libraries and against datatrove, on the same files.

    .venv/bin/python jobs/bench_extract_peers.py inputs --output out/bench-peers   # synthetic + real WARCs
    .venv/bin/python jobs/bench_extract_peers.py raw out/bench-peers/synthetic/*.warc.gz [--repeat 5]
    # datatrove in a throwaway venv (never a dependency of curate):
    python3 -m venv /tmp/dt && /tmp/dt/bin/pip install datatrove==0.10.1 warcio resiliparse faust-cchardet \\
        python-magic orjson psutil
    .venv/bin/python jobs/bench_extract_peers.py datatrove out/bench-peers/synthetic \\
        --datatrove-python /tmp/dt/bin/python [--repeat 3] [--workers 2]

``inputs`` writes two sets of 4 gzip'd WARC files: ``synthetic`` (8,000 ~4 kB pages of
generated English prose, jobs/data/make_bench_input.py) and ``real`` (the Rust book, its mirrors
and the parity pages of jobs/data/make_parity_warc.py if present under out/, each copied 4 times
with new record ids, dealt round-robin).

``raw``: pages per CPU-second in one process (the sandbox's child counted: its CPU time is read from
/proc, as jobs/bench_sandbox.py does), runs alternated, the median of ``--repeat`` (the best too), curate
both sandboxed (its default, ``--extract-timeout 5``) and in process (``--extract-timeout 0``):

- ``raw``: a FastWARC loop (response records, HTML content type, UTF-8 decoding) calling resiliparse's
  ``extract_plain_text`` with curate's arguments, against curate's ``extract_warc_file`` doing the
  same work (``--language-id none --min-stopword-density 0``): the stage's overhead over the library;
- ``raw+nemo``: the same loop plus NeMo Curator's steps written by hand (CLD2 on the page, the stop
  list of its language, the stop-word line filter), against curate's defaults (which do that too).

``datatrove``: whole processes, ``--workers`` worker processes each, alternated: datatrove's
``WarcReader`` -> a ``BaseExtractor`` calling the same ``extract_plain_text`` -> ``JsonlWriter``
(``LocalPipelineExecutor``, one task per file), against ``curate extract warc --algorithm resiliparse
--language-id none --min-stopword-density 0`` (datatrove has no language id without downloading a
fastText model; neither side runs one). Reported: documents per second per worker (wall clock: noisy
on a shared machine), documents per CPU-second (user + system time of the whole process tree: what
a core delivers, whatever else the machine runs) and the peak memory of the process tree, sampled
every 50 ms, as summed RSS and summed PSS.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

RESILIPARSE_ARGS = dict(main_content=True, alt_texts=False, links=False, form_fields=False, noscript=False,
                        comments=True)


# --------------------------------------------------------------------------- inputs


def _members(path: str):
    """(header, block) of every record of a gzip'd WARC (one record per member)."""
    from curate.stages.extract.archive import open_stream
    from curate.stages.extract.warcreader import WarcReader

    for item in WarcReader(open_stream(path), 1 << 30, None):
        if item.kind == "record":
            yield item.headers, item.block


def _record(headers: dict, block: bytes) -> bytes:
    head = "WARC/1.0\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items() if k != "Content-Length")
    head += f"Content-Length: {len(block)}\r\n\r\n"
    return gzip.compress(head.encode() + block + b"\r\n\r\n", compresslevel=6, mtime=0)


def make_inputs(output: str, files: int = 4) -> None:
    sys.path.insert(0, os.path.join(REPO, "jobs", "data"))
    synth = os.path.join(output, "synthetic")
    subprocess.run([sys.executable, os.path.join(REPO, "jobs", "data", "make_bench_input.py"), "--docs", "8000",
                    "--files", str(files), "--output", synth, "--format", "warc"], check=True)
    real = os.path.join(output, "real")
    os.makedirs(real, exist_ok=True)
    sources = [os.path.join(REPO, "jobs", "data", "rust-book.warc.gz"), os.path.join(REPO, "jobs", "data",
                                                                                      "mirrors.warc.gz")]
    sources += [p for p in [os.path.join(REPO, "out", "parity.warc.gz")] if os.path.exists(p)]
    records = [(h, b) for s in sources for h, b in _members(s) if h.get("WARC-Type") == "response"]
    outs = [open(os.path.join(real, f"real-{i:03d}.warc.gz"), "wb") for i in range(files)]
    rng = random.Random(0)
    k = 0
    for _copy in range(4):
        for headers, block in records:
            headers = {**headers, "WARC-Record-ID": f"<urn:uuid:{uuid.UUID(int=rng.getrandbits(128))}>"}
            outs[k % files].write(_record(headers, block))
            k += 1
    for f in outs:
        f.close()
    print(f"{synth}: 8000 synthetic pages; {real}: {k} real pages ({len(records)} distinct) in {files} files")


# --------------------------------------------------------------------------- in-process: curate vs the raw loop


def raw_pages(files: list[str]):
    """The decoded HTML of every 200 text/html response of the files, read by FastWARC: the raw loop's
    input (here and in ``bench_peers_pipeline.py --floor``)."""
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    for path in files:
        with open(path, "rb") as f:
            for rec in ArchiveIterator(f, record_types=WarcRecordType.response, parse_http=True):
                if rec.http_headers is None or rec.http_headers.status_code != 200:
                    continue
                if (rec.http_content_type or "").lower() not in ("text/html", "application/xhtml+xml"):
                    continue
                yield rec.reader.read().decode(rec.http_charset or "utf-8", "replace")


def raw_loop(files: list[str], nemo: bool) -> int:
    from resiliparse.extract.html2text import extract_plain_text

    if nemo:
        from curate.stages.extract.html import stoplists
        from curate.stages.extract.language import detect

        lists = stoplists()
    docs = 0
    for html in raw_pages(files):
        if nemo:
            name = detect(html, html=True)[0]
        text = extract_plain_text(html, **RESILIPARSE_ARGS)
        if nemo and text.strip():
            stop = lists.get(name)
            if stop is None:
                continue
            kept = []
            for line in text.split("\n"):
                words = line.split()
                if words and sum(w in stop for w in words) / len(words) >= 0.32:
                    kept.append(line)
            text = "\n\n".join(kept)
        docs += bool(text.strip())
    return docs


def curate_loop(files: list[str], defaults: bool, timeout: float = 5.0) -> int:
    from curate.stages.extract import RawFile
    from curate.stages.extract.warc import ExtractWarcSettings, extract_warc_file

    kwargs = {} if defaults else dict(language_id="none", min_stopword_density=0)
    settings = ExtractWarcSettings(extract_timeout=timeout, **kwargs)
    docs = 0
    for path in files:
        df = extract_warc_file(RawFile(path, os.path.basename(path)), settings, "raise")
        docs += int(df["_reason"].isna().sum())
    return docs


def cpu_seconds() -> float:
    """CPU seconds of this process and of the sandbox children it keeps (they outlive each call, so
    RUSAGE_CHILDREN never sees them: read from /proc); process_time alone would leave the pages out."""
    sys.path.insert(0, os.path.join(REPO, "jobs"))
    from bench_sandbox import cpu

    return cpu()


def bench_raw(files: list[str], repeat: int) -> dict:
    import statistics

    pairs = {"extraction only": (lambda: raw_loop(files, False), False),
             "with NeMo's language id + stop-word filter": (lambda: raw_loop(files, True), True)}
    results = {}
    for label, (raw, defaults) in pairs.items():
        runs = {"raw": raw, "curate": lambda d=defaults: curate_loop(files, d),
                "curate in process": lambda d=defaults: curate_loop(files, d, 0.0)}
        for fn in runs.values():
            fn()  # warm-up: imports, models, the sandbox's child
        times: dict[str, list[float]] = {name: [] for name in runs}
        docs = {}
        for r in range(repeat):
            order = list(runs) if r % 2 == 0 else list(runs)[::-1]
            for name in order:
                start = cpu_seconds()
                docs[name] = runs[name]()
                times[name].append(cpu_seconds() - start)
        pages = _pages(files)
        med = {name: statistics.median(t) for name, t in times.items()}
        best = {name: min(t) for name, t in times.items()}
        r = results[label] = {"pages": pages, "docs": docs, "median_cpu_s": med, "best_cpu_s": best,
                              "ratio": med["raw"] / med["curate"],
                              "ratio_in_process": med["raw"] / med["curate in process"],
                              "load_average": os.getloadavg()[0]}
        print(f"{label:<44} pages per CPU-second, median of {repeat} (best): raw {pages / med['raw']:6.0f} "
              f"({pages / best['raw']:.0f}), curate {pages / med['curate']:6.0f} ({pages / best['curate']:.0f}), "
              f"in process {pages / med['curate in process']:6.0f} ({pages / best['curate in process']:.0f}); "
              f"curate/raw {r['ratio']:.2f}x (in process {r['ratio_in_process']:.2f}x); docs kept "
              f"{' / '.join(str(docs[n]) for n in runs)}; load average {r['load_average']:.2f}", flush=True)
    return results


def _pages(files: list[str]) -> int:
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    n = 0
    for path in files:
        with open(path, "rb") as f:
            n += sum(1 for _ in ArchiveIterator(f, record_types=WarcRecordType.response))
    return n


# --------------------------------------------------------------------------- whole processes: curate vs datatrove

#: datatrove's side of the extraction (0.10.1 ships no resiliparse extractor): a BaseExtractor calling
#: the same extract_plain_text as curate, with the same arguments (bench_peers_pipeline.py uses it too)
DATATROVE_EXTRACTOR = '''
from datatrove.pipeline.extractors.base import BaseExtractor


class Resiliparse(BaseExtractor):
    name = "resiliparse"

    def __init__(self):
        super().__init__(timeout=60)

    def extract(self, text):
        from resiliparse.extract.html2text import extract_plain_text
        return extract_plain_text(text, **ARGS)
'''.replace("ARGS", repr(RESILIPARSE_ARGS))

DATATROVE_SCRIPT = '''
import sys
from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.readers import WarcReader
from datatrove.pipeline.writers import JsonlWriter
''' + DATATROVE_EXTRACTOR + '''

if __name__ == "__main__":
    src, out, logs, tasks, workers = sys.argv[1:6]
    LocalPipelineExecutor(pipeline=[WarcReader(src, glob_pattern="*.warc.gz"), Resiliparse(), JsonlWriter(out)],
                          tasks=int(tasks), workers=int(workers), logging_dir=logs).run()
'''


def run_tree(cmd: list[str], env=None) -> dict:
    """Wall seconds, CPU seconds (user + system of the command and each descendant, as last sampled)
    and peak memory of the process tree: RSS summed (shared libraries counted once per process)
    and PSS summed (shared pages split between the processes that map them)."""
    import psutil

    cpu_by_pid: dict[int, float] = {}
    start = time.perf_counter()
    # stderr to a file, not a pipe: read only at the end, a pipe fills (64 KiB) and the command blocks
    # on its next log line (datatrove's workers at 32,000 pages did, forever)
    errors = tempfile.TemporaryFile()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=errors, env=env)
    root = psutil.Process(proc.pid)
    peak_rss = peak_pss = 0
    tree: dict[int, str] = {}
    while proc.poll() is None:
        rss = pss = 0
        try:
            procs = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            break
        for p in procs:
            try:
                info = p.memory_full_info()
                times = p.cpu_times()
                tree.setdefault(p.pid, " ".join(p.cmdline()[:3])[-60:])
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            cpu_by_pid[p.pid] = times.user + times.system
            rss += info.rss
            pss += info.pss
        peak_rss, peak_pss = max(peak_rss, rss), max(peak_pss, pss)
        time.sleep(0.05)
    wall = time.perf_counter() - start
    errors.seek(0)
    err = errors.read().decode(errors="replace")
    errors.close()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:3])} failed ({proc.returncode}): {err[-2000:]}")
    cpu = sum(cpu_by_pid.values())  # each process's last sample: at most 50 ms short per process
    return {"wall": wall, "cpu": cpu, "rss": peak_rss, "pss": peak_pss, "processes": len(tree)}


def count_jsonl_gz(folder: str) -> int:
    n = 0
    for path in glob.glob(os.path.join(folder, "**", "*.jsonl.gz"), recursive=True):
        with gzip.open(path, "rt") as f:
            n += sum(1 for _ in f)
    return n


def bench_datatrove(folder: str, python: str, repeat: int, workers: int) -> dict:
    files = sorted(glob.glob(os.path.join(folder, "*.warc.gz")))
    tmp = tempfile.mkdtemp(prefix="curate-bench-peers-")
    script = os.path.join(tmp, "datatrove_run.py")
    with open(script, "w") as f:
        f.write(DATATROVE_SCRIPT)
    curate_bin = os.path.join(os.path.dirname(sys.executable), "curate")
    runs = {"datatrove": [], "curate": []}
    docs = {}
    for r in range(repeat):
        order = ["datatrove", "curate"] if r % 2 == 0 else ["curate", "datatrove"]
        for name in order:
            out = os.path.join(tmp, f"{name}-{r}")
            if name == "datatrove":
                cmd = [python, script, folder, out, os.path.join(tmp, f"logs-{r}"), str(len(files)), str(workers)]
                run = run_tree(cmd)
                docs[name] = count_jsonl_gz(out)
            else:
                cmd = [curate_bin, "extract", "warc", "--input", folder, "--output", out, "--workers", str(workers),
                       "--algorithm", "resiliparse", "--language-id", "none", "--min-stopword-density", "0"]
                run = run_tree(cmd)
                with open(os.path.join(out, "_manifest.json")) as f:
                    docs[name] = json.load(f)["counts"]["out"]
            runs[name].append(run)
            print(f"  run {r} {name:<10} wall {run['wall']:6.1f} s  cpu {run['cpu']:6.1f} s  peak RSS "
                  f"{run['rss'] / 2**20:5.0f} MiB  PSS {run['pss'] / 2**20:5.0f} MiB  ({run['processes']} "
                  f"processes)  docs {docs[name]}", flush=True)
            shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(tmp, ignore_errors=True)
    result = {}
    for name, rs in runs.items():
        wall, cpu = min(r["wall"] for r in rs), min(r["cpu"] for r in rs)

        def med(k, rs=rs):
            return sorted(r[k] for r in rs)[len(rs) // 2] / 2**20
        result[name] = {"docs": docs[name], "best_wall_s": wall, "best_cpu_s": cpu,
                        "docs_per_s_per_worker": docs[name] / wall / workers, "docs_per_cpu_s": docs[name] / cpu,
                        "peak_rss_mib": med("rss"), "peak_pss_mib": med("pss")}
    for name, r in result.items():
        print(f"{name:<10} {r['docs']:>6} docs  wall {r['best_wall_s']:6.1f} s ({r['docs_per_s_per_worker']:5.0f} "
              f"docs/s per worker)  cpu {r['best_cpu_s']:6.1f} s ({r['docs_per_cpu_s']:5.0f} docs per CPU-second)  "
              f"peak RSS {r['peak_rss_mib']:5.0f} MiB  PSS {r['peak_pss_mib']:5.0f} MiB (medians)")
    for key, label in (("docs_per_s_per_worker", "docs/s per worker (wall)"), ("docs_per_cpu_s", "docs per CPU-second")):
        result[f"ratio_{key}"] = result["curate"][key] / result["datatrove"][key]
        print(f"curate/datatrove {label}: {result[f'ratio_{key}']:.2f}x")
    return result


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("inputs")
    s.add_argument("--output", default=os.path.join(REPO, "out", "bench-peers"))
    s = sub.add_parser("raw")
    s.add_argument("warcs", nargs="+")
    s.add_argument("--repeat", type=int, default=5)
    s = sub.add_parser("datatrove")
    s.add_argument("folder")
    s.add_argument("--datatrove-python", required=True)
    s.add_argument("--repeat", type=int, default=3)
    s.add_argument("--workers", type=int, default=2)
    args = p.parse_args(argv)
    if args.cmd == "inputs":
        make_inputs(args.output)
    elif args.cmd == "raw":
        bench_raw(args.warcs, args.repeat)
    else:
        bench_datatrove(args.folder, args.datatrove_python, args.repeat, args.workers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
