"""``curate report DIR``: what each stage kept and dropped, and how the filter scores are spread.

DIR is a job output (``01-normalize/``, ``02-clean/``, ... each with a manifest.json) or one stage
output. The report prints one table of the manifests' counts: documents in and out per stage, the
documents dropped per reason, and the PII redacted per kind. For filter stages run with
``--keep-scores`` it also prints, per filter, its thresholds, how many documents it rejects on its
own (in any order) and how many it dropped as the first rejecting filter; and it writes a PNG with
one histogram per filter score, thresholds marked (``--png``, default ``DIR/_reports/scores.png``).
"""

from __future__ import annotations

import glob
import json
import os
import re

from modules.errors import DataError, SettingsError

HELP = "counts per stage and reason, and a PNG of filter score distributions"


def add_arguments(p) -> None:
    p.add_argument("dir", metavar="DIR", help="a job output folder (NN-stage subfolders) or one stage folder")
    p.add_argument("--png", default=None, metavar="PATH", help="score plot (default: DIR/_reports/scores.png)")
    p.add_argument("--bins", type=int, default=40, help="histogram bins (default 40)")


def stage_dirs(folder: str) -> list[str]:
    if os.path.isfile(os.path.join(folder, "manifest.json")):
        return [folder]
    if not os.path.isdir(folder):
        raise SettingsError(f"report: {folder}: no such folder")
    subs = sorted(d for d in glob.glob(os.path.join(folder, "*"))
                  if re.match(r"\d\d-", os.path.basename(d)) and os.path.isfile(os.path.join(d, "manifest.json")))
    if not subs:
        raise SettingsError(f"report: {folder}: no manifest.json, and no NN-stage folders with one")
    return subs


def load_manifest(folder: str) -> dict:
    path = os.path.join(folder, "manifest.json")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except ValueError as e:
        raise DataError(f"{path}: not valid JSON: {e}") from None


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


def read_scores(folder: str, columns: list[str]):
    """Score columns of the kept rows and of _rejects/, as one frame."""
    import pandas as pd
    import pyarrow.parquet as pq

    frames = []
    for path in sorted(glob.glob(os.path.join(folder, "part-*")) + glob.glob(os.path.join(folder, "_rejects", "part-*"))):
        if path.endswith(".parquet"):
            have = [c for c in columns if c in pq.ParquetFile(path).schema_arrow.names]
            if have:
                frames.append(pq.read_table(path, columns=have).to_pandas())
        elif path.endswith(".jsonl"):
            df = pd.read_json(path, lines=True, dtype=False)
            have = [c for c in columns if c in df.columns]
            if have:
                frames.append(df[have])
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)


def rejects(values, f: dict):
    import numpy as np

    v = values.to_numpy(dtype=float)
    bad = np.isnan(v)
    if f.get("min") is not None:
        bad |= (v <= f["min"]) if f.get("strict_min") else (v < f["min"])
    if f.get("max") is not None:
        bad |= (v >= f["max"]) if f.get("strict_max") else (v > f["max"])
    return bad


def threshold_text(f: dict) -> str:
    parts = []
    if f.get("min") is not None:
        parts.append(f"{'>' if f.get('strict_min') else '>='} {f['min']:g}")
    if f.get("max") is not None:
        parts.append(f"{'<' if f.get('strict_max') else '<='} {f['max']:g}")
    return " and ".join(parts) or "-"


def plot(panels: list[tuple[str, dict, object]], path: str, bins: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    n = len(panels)
    cols = min(4, n)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.0 * rows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.axis("off")
    for ax, (title, f, values) in zip(axes.flat, panels):
        v = values.dropna().to_numpy(dtype=float)
        lines = [x for x in (f.get("min"), f.get("max")) if x is not None]
        lo = min([*v, *lines]) if len(v) or lines else 0.0
        hi = max([*v, *lines]) if len(v) or lines else 1.0
        log = lo >= 0 and hi > 1000
        if log:
            edges = np.logspace(0, np.log10(hi + 1), bins + 1) - 1
            ax.set_xscale("symlog", linthresh=1)
        else:
            edges = np.linspace(lo, hi if hi > lo else lo + 1, bins + 1)
        bad = rejects(values.dropna(), f)
        ax.hist([v[~bad], v[bad]], bins=edges, stacked=True, color=["#4c72b0", "#dd8452"], label=["kept", "rejected"])
        for x in lines:
            ax.axvline(x, color="#c44e52", linestyle="--", linewidth=1.2)
        ax.set_title(f"{title}\n{threshold_text(f)}: {int(bad.sum())} of {len(v)} rejected", fontsize=9)
        ax.tick_params(labelsize=7)
    axes.flat[0].legend(fontsize=7)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = os.path.join(os.path.dirname(os.path.abspath(path)), f".{os.path.basename(path)}.tmp-{os.getpid()}.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, path)


def main(args) -> int:
    if args.bins <= 0:
        raise SettingsError(f"--bins must be positive; got {args.bins}")
    folders = stage_dirs(args.dir)
    stages = [(os.path.basename(os.path.normpath(d)), load_manifest(d)) for d in folders]
    print(counts_table(stages))
    panels, rows = [], []
    for folder, (name, m) in zip(folders, stages):
        filters = m.get("filters") or []
        if not filters:
            continue
        scores = read_scores(folder, [f["column"] for f in filters])
        for f in filters:
            first = m.get("counts", {}).get("dropped", {}).get(f["reason"], 0)
            if f["column"] not in scores.columns or scores[f["column"]].notna().sum() == 0:
                rows.append((name, f["reason"], threshold_text(f), "-", "-", first))
                continue
            values = scores[f["column"]]
            alone = int(rejects(values.dropna(), f).sum())
            rows.append((name, f["reason"], threshold_text(f), int(values.notna().sum()), alone, first))
            panels.append((f"{name}: {f['reason']}", f, values))
    if rows:
        print()
        print(table(rows, ("folder", "filter", "keeps", "scored", "rejects alone", "dropped first")))
    if panels:
        png = args.png or os.path.join(args.dir, "_reports", "scores.png")
        plot(panels, png, args.bins)
        print(f"curate report: score distributions in {os.path.abspath(png)}")
    elif rows:
        print("curate report: no score columns; run the filter stage with --keep-scores for the plot")
    return 0
