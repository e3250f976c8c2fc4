"""Documents per second per core: ``tag`` against ``filter`` with the same chain, and ``select`` on
tagged Parquet (issue 20's targets: tag at least as fast as filter; select at least 1 M docs/s).

    .venv/bin/python jobs/bench_tag_select.py [--repeat 20] [--chain jobs/filters/heuristic_en.yaml]
                                              [--docs 1000000] [--text-bytes 200] [--runs 3]

tag vs filter: the Rust book pages of jobs/data/sample.jsonl.gz (about 10 kB each), repeated
``--repeat`` times as one partition, through each stage's pure pandas function in this process with
Arrow limited to one thread (filter's ``ScoreFilter.apply`` and tag's ``tag_frame``), alternated,
best of ``--runs``.

select: a tagged Parquet file of ``--docs`` documents (``--text-bytes`` of text each, the chain's
score columns drawn at random around its thresholds), then the expression deciding as the chain does
(``chain_where``): the pure function alone (``select_frame`` on the frame), and the whole stage
(read, select, write kept and rejected rows, manifest) on Dask's synchronous scheduler, one core.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sys
import tempfile
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


def tagged_frame(n: int, text_bytes: int, chain, seed: int = 0):
    """n documents with every score column of ``chain``, scores spread around each threshold."""
    import numpy as np
    import pandas as pd

    from curate.stages.dataset import STRING
    from curate.stages.filters.base import build_chain

    rng = np.random.default_rng(seed)
    text = ("lorem ipsum dolor sit amet " * (text_bytes // 27 + 1))[:text_bytes]
    df = pd.DataFrame({"id": pd.array([f"d{i}" for i in range(n)], dtype=STRING),
                       "text": pd.array([text] * n, dtype=STRING)})
    for f in build_chain(chain):
        # each filter rejects about 2.5%: about half the documents pass a chain of 28
        if f.min is not None and f.max is not None:
            margin = (f.max - f.min) * 0.0125
            df[f.score_column] = rng.uniform(f.min - margin, f.max + margin, n)
            continue
        centre = f.min if f.min is not None else f.max
        spread = abs(centre) + 1.0
        side = 1.0 if f.min is not None else -1.0
        df[f.score_column] = centre + side * (rng.exponential(spread * 40, n) - spread)
    return df


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeat", type=int, default=20, help="copies of the 130 pages for tag vs filter (default 20)")
    p.add_argument("--runs", type=int, default=3, help="timings per step; the best is reported (default 3)")
    p.add_argument("--chain", default=os.path.join(ROOT, "jobs/filters/heuristic_en.yaml"))
    p.add_argument("--data", default=os.path.join(ROOT, "jobs/data/sample.jsonl.gz"))
    p.add_argument("--docs", type=int, default=1_000_000, help="documents of the tagged Parquet file (default 1 M)")
    p.add_argument("--text-bytes", type=int, default=200, help="text per document of that file (default 200)")
    args = p.parse_args()

    import dask
    import pandas as pd
    import pyarrow as pa

    from curate.stages.dataset import STRING
    from curate.stages.filters.base import ScoreFilter, build_chain, load_chain
    from curate.stages.select import select_frame
    from curate.stages.tag import chain_where, tag_frame

    pa.set_cpu_count(1)
    specs = load_chain(args.chain)
    chain = build_chain(specs)

    # tag vs filter ---------------------------------------------------------------------------
    with gzip.open(args.data, "rt", encoding="utf-8") as f:
        pages = [json.loads(line) for line in f]
    docs = [{**d, "id": f"{d['id']}-{i}"} for i in range(args.repeat) for d in pages]
    df = pd.DataFrame(docs).astype(STRING)
    n = len(df)
    t_filter, t_tag = [], []
    for _ in range(args.runs):  # alternated: both see the same machine
        t_filter.append(best(lambda: ScoreFilter(chain).apply(df), 1))
        t_tag.append(best(lambda: tag_frame(df, specs), 1))
    f_rate, t_rate = n / min(t_filter), n / min(t_tag)
    print(f"{n} pages ({df['text'].str.len().mean() / 1e3:.1f} k characters each), {len(chain)} filters, one core")
    print(f"  filter {f_rate:10,.0f} docs/s")
    print(f"  tag    {t_rate:10,.0f} docs/s   ({t_rate / f_rate:.2f}x filter)")

    # select on tagged Parquet ----------------------------------------------------------------
    where = chain_where(specs)
    tmp = tempfile.mkdtemp(prefix="bench-select-")
    try:
        frame = tagged_frame(args.docs, args.text_bytes, specs)
        src = os.path.join(tmp, "tagged.parquet")
        frame.to_parquet(src, row_group_size=128 * 1024)
        with_internal = frame.assign(_reason=pd.array([pd.NA] * len(frame), dtype=STRING),
                                     _detail=pd.array([pd.NA] * len(frame), dtype=STRING))
        t_pure = best(lambda: select_frame(with_internal, where), args.runs)  # noqa: B023 (called at once)
        kept = int(select_frame(with_internal, where)["_reason"].isna().sum())

        from curate.app.runner import run_stage
        from curate.stages.select import SelectSettings
        from curate.stages.stage import IOSettings

        def stage():
            out = os.path.join(tmp, "out")
            shutil.rmtree(out, ignore_errors=True)
            with dask.config.set(scheduler="synchronous"):
                run_stage("select", SelectSettings(where=where), (src,), out, IOSettings(), force=True)

        t_stage = best(stage, args.runs)
        size = os.path.getsize(src) / 1e6
        print(f"\ntagged Parquet: {args.docs:,} documents, {args.text_bytes} B of text each, "
              f"{len(chain)} score columns ({size:.0f} MB); {kept:,} kept by the chain's expression")
        print(f"  select_frame alone       {args.docs / t_pure:12,.0f} docs/s")
        print(f"  select stage, one core   {args.docs / t_stage:12,.0f} docs/s (read, decide, write kept and rejects)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
