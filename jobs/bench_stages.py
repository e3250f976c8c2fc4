"""Documents per second per core for the stages and options of issue 13 (NeMo Curator's CPU set).

    .venv/bin/python jobs/bench_stages.py [--repeat 10] [--runs 3] [--nemo VENV/bin/python]

Input: the Rust book pages of jobs/data/sample.jsonl.gz (about 10 kB each), repeated ``--repeat``
times, as one partition; for redact, the pages cut into 1 kB documents with a phone number, a card
number and an e-mail address planted in every tenth. Each step runs the stage's pure pandas function
in this process with Arrow limited to one thread (per core; a stage on N workers scales by
partitions). Best of ``--runs``. Decontamination uses 1,000 synthetic 13-word task texts, a tenth of
them planted in the pages. The blend, add_id and join steps are the per-partition functions; their
stages add one counting pass (blend, add_id) or nothing.

With ``--nemo`` (the Python of a throwaway venv holding NeMo Curator 0.9's CPU parts; never a
dependency of curate) the same decontamination runs through NeMo's ``TaskDecontamination`` too, on
the same documents and task texts, one partition on Dask's synchronous scheduler, and the rows both
write are printed.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def best(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--data", default=os.path.join(ROOT, "jobs/data/sample.jsonl.gz"))
    p.add_argument("--nemo", help="python of a NeMo Curator 0.9 venv: time its TaskDecontamination too")
    args = p.parse_args()

    import pandas as pd
    import pyarrow as pa

    from curate.stages import decontaminate as dc
    from curate.stages.add_id import AddIdSettings, add_ids
    from curate.stages.blend import blend_partition, plan_source
    from curate.stages.clean import CleanSettings, clean
    from curate.stages.dataset import STRING
    from curate.stages.filters import get_filter
    from curate.stages.filters.base import ScoreFilter
    from curate.stages.redact import RedactSettings, redact
    from curate.stages.split_join import JoinSettings, SplitSettings, join_frame, split_frame

    pa.set_cpu_count(1)
    with gzip.open(args.data, "rt", encoding="utf-8") as f:
        pages = [json.loads(line) for line in f]
    docs = [{"id": f"{d['id']}-{i}", "text": d["text"]} for i in range(args.repeat) for d in pages]
    rng = random.Random(0)
    vocab = sorted({w.lower().strip(".,;:()`'\"") for d in pages for w in d["text"].split()} - {""})
    tasks = [" ".join(rng.choice(vocab) for _ in range(13)) for _ in range(1000)]
    for d in docs[::10]:  # a tenth of the pages quote a task text in the middle
        cut = len(d["text"]) // 2
        d["text"] = d["text"][:cut] + " " + rng.choice(tasks) + ". " + d["text"][cut:]
    df = pd.DataFrame(docs).astype(STRING)
    n = len(df)
    print(f"{n} documents, {df['text'].str.len().mean() / 1e3:.1f} k characters each, one core\n")
    rows = []

    def report(name, seconds, count=n):
        rows.append((name, count / seconds))
        print(f"{name:<48} {count / seconds:>10,.0f} docs/s")

    # decontaminate: count pass + remove pass (the stage's two per-partition steps)
    s = dc.DecontaminateSettings.__new__(dc.DecontaminateSettings)
    for k, v in dict(max_ngram_size=13, min_ngram_size=8, max_matches=10, min_document_length=200,
                     remove_char_each_side=200, max_splits=10).items():
        object.__setattr__(s, k, v)
    index = dc.Index.build([dc.task_ngrams(tasks, 13, 8)])
    def decontaminate():
        counts = dc.count_partition(df, index)
        found = {tuple(g.split(" ")) for g, c in zip(counts["ngram"], counts["count"]) if c <= 10}
        return dc.remove_partition(df, dc.Index.build_from({g: t for g, t in index.grams.items() if g in found}), s)

    report("decontaminate (count + remove, 1,000 tasks)", best(decontaminate, args.runs))
    if args.nemo:
        nemo_decontaminate(args.nemo, docs, tasks, len(decontaminate().query("_reason.isna()")))

    plan = plan_source([n], wanted=2 * n + n // 3, seed=0, source=0)
    report("blend (2 1/3 copies of the partition)", best(lambda: blend_partition(df, *plan[0], "web", df.assign(
        blend_source=pd.Series([], dtype=STRING)).iloc[:0]), args.runs))
    report("add_id", best(lambda: add_ids(df, AddIdSettings()), args.runs))
    seg = split_frame(df, SplitSettings())
    report(f"split_documents ({len(seg) / n:.0f} segments per document)", best(lambda: split_frame(df, SplitSettings()), args.runs))
    report("join_documents", best(lambda: join_frame(seg, JoinSettings()), args.runs))
    base = best(lambda: clean(df, CleanSettings()), args.runs)
    report("clean, default", base)
    for opt in ("remove_urls", "remove_markdown", "remove_quotation", "normalize_newlines"):
        report(f"clean + {opt}", best(lambda opt=opt: clean(df, CleanSettings(**{opt: True})), args.runs))
    report("clean + slice_from/slice_to", best(lambda: clean(df, CleanSettings(slice_from="The", slice_to=".")), args.runs))
    sample = os.path.join(ROOT, "jobs/data/sample.jsonl.gz")
    filters = {
        "substring": {"substring": "Rust"},
        "histogram": {"sample": sample},
        "token_count": {"tokenizer": "tiktoken:cl100k_base", "min": 50},
        "code_xml_header": {}, "code_alpha": {}, "code_html_boilerplate": {},
        "code_tokenizer_fertility": {"tokenizer": "tiktoken:cl100k_base"},
    }
    for kind, params in filters.items():
        flt = get_filter(kind)(**params)
        report(f"filter {kind}", best(lambda flt=flt: ScoreFilter([flt]).apply(df), args.runs))

    # redact: 1 kB documents, fast path alone and with Presidio's default entities
    small = [t[i:i + 1000] for t in df["text"].tolist()[: max(1, n // 4)] for i in range(0, len(t), 1000)]
    for i in range(0, len(small), 10):
        small[i] += " Call +1 212-555-0198, card 4111 1111 1111 1111, mail jane@example.com."
    sdf = pd.DataFrame({"id": [str(i) for i in range(len(small))], "text": small}).astype(STRING)
    fast = RedactSettings()
    report("redact, regex fast path (1 kB docs)", best(lambda: redact(sdf, fast), args.runs), len(sdf))
    pres = RedactSettings(presidio=("default",))
    redact(sdf.iloc[:10], pres)  # build the analyzer once, as a worker does
    part = sdf.iloc[: max(1, len(sdf) // 10)]
    report("redact + presidio default entities (1 kB docs)", best(lambda: redact(part, pres), 1), len(part))
    return 0


NEMO_SCRIPT = """
import contextlib, io, json, sys, time
import dask, dask.dataframe as dd, pandas as pd
from nemo_curator.datasets import DocumentDataset
from nemo_curator.modules.task import TaskDecontamination
from nemo_curator.tasks.downstream_task import DownstreamTask
data = json.load(open(sys.argv[1]))
class Task(DownstreamTask):
    def generate_ngrams(self):
        for t in data["tasks"]:
            self._update_ngrams(t, 8, 13)
        return self._ngrams
df = pd.DataFrame(data["docs"])
ds = DocumentDataset(dd.from_pandas(df, npartitions=1))
with dask.config.set(scheduler="synchronous"), contextlib.redirect_stdout(io.StringIO()):
    start = time.perf_counter()
    out = TaskDecontamination([Task()])(ds).df.compute()
    seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "rows": len(out)}))
"""


def nemo_decontaminate(python: str, docs, tasks, our_rows: int) -> None:
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "data.json")
        with open(path, "w") as f:
            json.dump({"docs": docs, "tasks": tasks}, f)
        proc = subprocess.run([python, "-c", NEMO_SCRIPT, path], capture_output=True, text=True, timeout=3600)
    if proc.returncode:
        print(f"NeMo run failed: {proc.stderr.strip().splitlines()[-1:]}")
        return
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"{'  NeMo TaskDecontamination':<48} {len(docs) / res['seconds']:>10,.0f} docs/s "
          f"({res['rows']} rows written; curate {our_rows})")


if __name__ == "__main__":
    sys.exit(main())
