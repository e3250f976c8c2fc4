"""``curate report DIR``: what each stage kept and dropped, and how the filter scores are spread.

DIR is a job output (``01-normalize/``, ``02-clean/``, ... each with a _manifest.json) or one stage
output. The report prints one table of the manifests' counts: documents in and out per stage, the
documents dropped per reason, and the PII redacted per kind. For filter stages run with
``--keep-scores`` it also prints, per filter, its thresholds, how many documents it would reject on
its own (whatever the other filters decide), how many it dropped as the first rejecting filter, and
how many only it rejects (no other filter of the chain does: without it they would be kept, so a
filter that repeats part of another's rule shows); and it writes a PNG with
one histogram per filter score, thresholds marked (``--png``, default ``DIR/_reports/scores.png``).

It also writes one self-contained HTML page of the run (``--html``, default
``DIR/_reports/report.html``; see ``app/report_html.py``): the funnel, score histograms from the
sample every filter run keeps, example rejects, dedup groups and pairs (and a fuzzy run's estimated
recall and precision), tokens, and time per stage.
``curate run`` writes the same page at its end.
"""

from __future__ import annotations

import glob
import json
import os

from curate.app.run_folders import load_manifest, stage_dirs, threshold_text  # noqa: F401 (curate report's own)
from curate.stages.errors import DataError, SettingsError
from curate.stages.output import side_glob

HELP = "counts per stage and reason; an HTML page of the run (funnel, scores, rejects, dedup, tokens, time)"


def add_arguments(p) -> None:
    p.add_argument("dir", metavar="DIR", help="a job output folder (NN-stage subfolders) or one stage folder")
    p.add_argument("--png", default=None, metavar="PATH", help="score plot (default: DIR/_reports/scores.png)")
    p.add_argument("--bins", type=int, default=40, help="histogram bins (default 40)")
    p.add_argument("--html", default=None, metavar="PATH",
                   help="the HTML page of the run (default: DIR/_reports/report.html)")
    p.add_argument("--no-verify", dest="verify", action="store_false",
                   help="do not run verify on the tokenizer output for the page (it reads every token)")


def table(rows: list[tuple], header: tuple) -> str:
    rows = [tuple("" if c is None else str(c) for c in r) for r in [header, *rows]]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def counts_table(stages: list[tuple[str, dict]]) -> str:
    rows = []
    for name, m in stages:
        c = m.get("counts", {})
        dropped = c.get("dropped", {})
        rows.append((name, m.get("stage", "?"), c.get("in"), c.get("out"), sum(dropped.values()), "", ""))
        for reason, n in sorted(dropped.items(), key=lambda kv: (-kv[1], kv[0])):
            rows.append(("", "", "", "", "", f"dropped: {reason}", n))
        for kind, n in (m.get("redacted") or {}).items():
            rows.append(("", "", "", "", "", f"redacted: {kind}", n))
    return table(rows, ("folder", "stage", "docs in", "docs out", "dropped", "detail", "count"))


#: rows per batch while streaming score columns: memory is bounded by this, not by the data
BATCH_ROWS = 65536


def score_files(folder: str) -> list[str]:
    return sorted(glob.glob(os.path.join(folder, "part-*")) + side_glob(folder, "_rejects"))


def score_batches(folder: str, columns: list[str]):
    """Batches (column -> float array, NaN where unscored) of the score columns of the kept rows and
    of ``_rejects/``, at most :data:`BATCH_ROWS` rows each; no other column is kept in memory."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    for path in score_files(folder):
        if path.endswith(".parquet"):
            pf = pq.ParquetFile(path)
            have = [c for c in columns if c in pf.schema_arrow.names]
            if not have:
                continue
            for b in pf.iter_batches(batch_size=BATCH_ROWS, columns=have):
                yield {c: pc.cast(b.column(c), pa.float64()).to_numpy(zero_copy_only=False) for c in have}
        elif path.endswith(".jsonl"):
            # line by line with json.loads rather than Arrow's JSON reader, which needs every line to
            # fit in one block: a huge document must not break the report. Only the scores are kept.
            rows: list[tuple] = []
            with open(path, "rb") as f:
                for n, line in enumerate(f, 1):
                    if not line.strip():
                        continue
                    try:
                        record = json.loads(line)
                        rows.append(tuple(float("nan") if record.get(c) is None else float(record[c]) for c in columns))
                    except (ValueError, TypeError, AttributeError) as e:
                        raise DataError(f"{path}: line {n}: not a JSON object with numeric scores: {e}") from None
                    if len(rows) == BATCH_ROWS:
                        yield dict(zip(columns, np.array(rows, dtype=np.float64).T))
                        rows = []
            if rows:
                yield dict(zip(columns, np.array(rows, dtype=np.float64).T))


def rejects(values, f: dict):
    """Which scores the filter rejects on its own (NaN: rejected)."""
    import numpy as np

    v = np.asarray(values, dtype=float)
    bad = np.isnan(v)
    if f.get("min") is not None:
        bad |= (v <= f["min"]) if f.get("strict_min") else (v < f["min"])
    if f.get("max") is not None:
        bad |= (v >= f["max"]) if f.get("strict_max") else (v > f["max"])
    return bad


class ScoreSummary:
    """One filter's scores, streamed twice: counts and range (:meth:`add`), then, with bins fixed from
    that range and the thresholds (:meth:`fix_bins`), the histogram of kept and rejected scores
    (:meth:`add_to_histogram`). Memory: a few numbers and two arrays of ``bins`` counts."""

    def __init__(self, f: dict):
        self.f = f
        self.scored = 0
        self.rejected = 0
        self.only = 0  # documents no other filter of the chain rejects (see summarize)
        self.lo = float("inf")  # finite scores only
        self.hi = float("-inf")
        self.edges = self.kept = self.bad = None
        self.log = False

    def add(self, values) -> None:
        import numpy as np

        v = values[~np.isnan(values)]
        self.scored += len(v)
        self.rejected += int(rejects(v, self.f).sum())
        finite = v[np.isfinite(v)]
        if len(finite):
            self.lo, self.hi = min(self.lo, float(finite.min())), max(self.hi, float(finite.max()))

    def fix_bins(self, bins: int) -> None:
        """Bins over the scores' own range: stretched to a far threshold (word_count's max of 100,000),
        they left the data a sliver; :func:`plot` names such a threshold at the edge."""
        import numpy as np

        lines = [x for x in (self.f.get("min"), self.f.get("max")) if x is not None]
        if self.hi >= self.lo:
            lo, hi = self.lo, self.hi
        else:  # no finite score: the thresholds' range
            lo, hi = min(lines, default=0.0), max(lines, default=1.0)
        # log-spaced only when the range covers decades (as the filter stage's sample histogram)
        self.log = lo >= 0 and hi > 1000 and hi + 1 > 30 * (lo + 1)
        if self.log:
            edges = np.logspace(np.log10(lo + 1), np.log10(hi + 1), bins + 1) - 1
        else:
            edges = np.linspace(lo, hi if hi > lo else lo + 1, bins + 1)
        edges[0], edges[-1] = lo, max(edges[-1], hi)  # rounding must not drop the extremes
        self.edges = edges
        self.kept = np.zeros(bins, dtype=np.int64)
        self.bad = np.zeros(bins, dtype=np.int64)

    def add_to_histogram(self, values) -> None:
        import numpy as np

        v = values[~np.isnan(values)]
        bad = rejects(v, self.f)
        v = np.clip(v, self.edges[0], self.edges[-1])  # +-inf into the outer bins
        self.kept += np.histogram(v[~bad], bins=self.edges)[0]
        self.bad += np.histogram(v[bad], bins=self.edges)[0]


def summarize(folder: str, filters: list[dict], bins: int | None) -> dict[str, ScoreSummary]:
    """Column -> summary of each filter's scores in ``folder``; histograms too when ``bins``."""
    import numpy as np

    summaries = {f["column"]: ScoreSummary(f) for f in filters}
    columns = list(summaries)
    for batch in score_batches(folder, columns):
        bad = {}
        for c, v in batch.items():
            summaries[c].add(v)
            bad[c] = ~np.isnan(v) & rejects(v, summaries[c].f)  # unscored: not rejected by this filter
        rejecters = np.sum(list(bad.values()), axis=0)
        for c, b in bad.items():
            summaries[c].only += int((b & (rejecters == 1)).sum())
    scored = [s for s in summaries.values() if s.scored]
    if bins and scored:
        for s in scored:
            s.fix_bins(bins)
        wanted = [s.f["column"] for s in scored]
        for batch in score_batches(folder, wanted):
            for c in wanted:
                if c in batch:
                    summaries[c].add_to_histogram(batch[c])
    return summaries


def plot(panels: list[tuple[str, ScoreSummary]], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from curate.app.report_charts import score_view
    from curate.stages.dataset import atomic_write

    n = len(panels)
    cols = min(4, n)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.0 * rows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.axis("off")
    for ax, (title, s) in zip(axes.flat, panels):
        if s.log:
            ax.set_xscale("symlog", linthresh=1)
        left = s.edges[:-1]
        ax.hist([left, left], bins=s.edges, weights=[s.kept, s.bad], stacked=True, color=["#4c72b0", "#dd8452"],
                label=["kept", "rejected"])
        # as on the HTML page: the data's range, a near threshold on the axis, a far one named at the edge
        view = score_view(s.f, {"edges": list(map(float, s.edges)), "kept": s.kept.tolist(),
                                "rejected": s.bad.tolist(), "log": False})
        ax.set_xlim(view["lo"], view["hi"])
        ax.set_ylim(0, max(1, int((s.kept + s.bad).max())) * (1.25 if view["beyond"] else 1.05))
        for x in view["lines"]:
            ax.axvline(x, color="#c44e52", linestyle="--", linewidth=1.2)
        for side, text in view["beyond"]:
            ax.text(0.01 if side == "left" else 0.99, 0.97, text, transform=ax.transAxes, ha=side, va="top",
                    fontsize=7, color="#c44e52")
        ax.set_title(f"{title}\n{threshold_text(s.f)}: {s.rejected} of {s.scored} rejected", fontsize=9)
        ax.tick_params(labelsize=7)
    # above the first panel, clear of its bars
    axes.flat[0].legend(fontsize=7, ncols=2, loc="lower left", bbox_to_anchor=(0, 1.18), frameon=False)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    try:
        atomic_write(os.path.abspath(path), lambda tmp: fig.savefig(tmp, dpi=110, format="png"))
    finally:
        plt.close(fig)


def main(args) -> int:
    import contextlib

    from curate.stages.output import Lock, Output, refuse_link

    if args.bins <= 0:
        raise SettingsError(f"--bins must be positive; got {args.bins}")
    png = args.png or os.path.join(args.dir, "_reports", "scores.png")
    pages = (png, args.html or os.path.join(args.dir, "_reports", "report.html"))
    for path in pages:
        refuse_link(args.dir, path)  # before any work: the page and the plot may not go through a link
    inside = any(not os.path.relpath(os.path.abspath(p), os.path.abspath(args.dir)).startswith("..") for p in pages)
    # writing into the output: one writer at a time (a run or an erase holding it is named)
    with Lock(Output.at(args.dir), "curate report") if inside and os.path.isdir(args.dir) else contextlib.nullcontext():
        return _report(args, png)


def _report(args, png: str) -> int:
    folders = stage_dirs(args.dir)
    stages = [(os.path.basename(os.path.normpath(d)), load_manifest(d)) for d in folders]
    print(counts_table(stages))
    panels, rows = [], []
    for folder, (name, m) in zip(folders, stages):
        filters = m.get("filters") or []
        if not filters:
            continue
        summaries = summarize(folder, filters, args.bins)
        for f in filters:
            first = m.get("counts", {}).get("dropped", {}).get(f["reason"], 0) if m.get("stage") != "tag" else "-"
            s = summaries[f["column"]]
            if not s.scored:
                # no score columns in the parts: the counts every filter run keeps in its manifest (the
                # HTML page's), taken over every document, not a sample
                kept = ((m.get("score_sample") or {}).get("filters") or {}).get(f["reason"]) or {}
                rows.append((name, f["reason"], threshold_text(f), kept.get("scored", "-"), kept.get("rejected", "-"),
                             first, kept.get("only", "-")))
                continue
            rows.append((name, f["reason"], threshold_text(f), s.scored, s.rejected, first, s.only))
            panels.append((f"{name}: {f['reason']}", s))
    if rows:
        print()
        print(table(rows, ("folder", "filter", "keeps", "scored", "would reject", "dropped first",
                           "only it rejects")))
    if panels:
        plot(panels, png)
        print(f"curate report: score distributions in {os.path.abspath(png)}")
    elif rows:
        print("curate report: the parts hold no score columns, so no PNG here (the HTML page's histograms come "
              "from each filter's score sample in its manifest; --keep-scores also writes the columns)")
    from curate.app.report_html import write_report

    page = write_report(args.dir, args.html, verify=args.verify)
    print(f"curate report: page in {page}")
    return 0
