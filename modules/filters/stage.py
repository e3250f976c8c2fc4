"""``filter``: apply a chain of document filters read from YAML.

    curate filter --config jobs/filters/heuristic_en.yaml --input in/ --output out/ [--keep-scores]

The chain file is read once, strictly (``curate.stages.yamlfile``), when the settings are made (before any
cluster starts), and validated: an unknown filter, parameter or out-of-range threshold is one line
naming the file, the filter's position and the value. The normalised chain (every parameter spelled
out) is part of the settings, so editing the YAML reruns the stage, and the manifest shows the
thresholds that were used. Each dropped document goes to ``_rejects/`` with the reason of the first
filter rejecting it; the manifest counts them per reason and lists the filters.

The manifest also holds ``score_sample``: per filter, how many documents it scored, would reject on
its own (``rejected``, whatever the other filters decide) and is the only filter of the chain to reject
(``only``: without it they would be kept, so a coupling between two filters shows), how many of
its scores were NaN (``nan``: scored and rejected; such a document's reason is ``nan``), and a histogram (kept / rejected by that filter) of the scores of a uniform sample of at most
:data:`SAMPLE_SIZE` documents, so ``curate report`` can draw the distributions around the thresholds
without ``--keep-scores``. The sample is bottom-k by a hash of the id: each partition keeps its k
smallest, the merge keeps the k smallest of those, so memory is bounded by k per task and the sample
is the same on every rerun. A resumed run samples only the partitions it writes (``partitions`` of
``of_partitions``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from curate.stages.filters.base import ScoreFilter, build_chain, load_chain
from curate.stages.stage import MapStage

#: documents in the score sample behind the manifest's histograms
SAMPLE_SIZE = 2000
#: bins of each histogram in the manifest
SAMPLE_BINS = 40
_PRIORITY = "__priority"


@dataclass(frozen=True)
class FilterSettings:
    config: str = field(metadata={"help": "filter chain YAML, e.g. jobs/filters/heuristic_en.yaml",
                                  "metavar": "FILTERS.yaml"})
    keep_scores: bool = field(default=False, metadata={"help": "keep a score_<filter> column per filter"})
    #: the chain as loaded from ``config`` (not a flag: filled in from the file)
    chain: tuple = field(default=(), init=False, compare=True, hash=False)

    def __post_init__(self):
        object.__setattr__(self, "chain", load_chain(self.config))


class FilterStage(MapStage):
    name = "filter"

    Settings = FilterSettings
    help = "quality filters from a YAML chain (heuristic, C4/FineWeb, code, language, classifier)"

    def columns(self, settings):
        from curate.stages.filters.base import build_chain
        from curate.stages.stage import Columns

        chain = build_chain(settings.chain)  # the filter objects only: no model is loaded here
        needs = tuple(dict.fromkeys(["text", *(f.input_column for f in chain)]))
        return Columns(needs=needs, adds=tuple(f.score_column for f in chain) if settings.keep_scores else ())

    def check_output(self, settings: FilterSettings, inputs, output) -> None:
        # here, not in check: a job calls this for every stage before any work, also for one whose
        # input an earlier stage writes
        from curate.stages.filters.tokens import check_loadable_in

        check_loadable_in(build_chain(settings.chain))

    def transform(self, df: pd.DataFrame, settings: FilterSettings) -> pd.DataFrame:
        return ScoreFilter(build_chain(settings.chain), keep_scores=settings.keep_scores).apply(df)

    def run(self, settings: FilterSettings, ctx) -> dict:
        """Write the filtered documents; the score sample comes from the same delayed partitions,
        computed in the writer's one ``run_compute`` call (as redact does), so nothing is scored twice."""
        import dataclasses

        from curate.stages import dataset

        chain = build_chain(settings.chain)
        scored = self.apply_made(dataset.read_made(ctx.input, ctx.io), dataclasses.replace(settings, keep_scores=True))
        drop = () if settings.keep_scores else [f.score_column for f in chain]
        return write_with_sample(self, scored, settings, ctx, {"filters": [f.describe() for f in chain]}, drop)


def write_with_sample(stage, out, settings, ctx, extra: dict, drop=()) -> dict:
    """Write ``out``, whose partitions hold every filter's score column, and put the manifest's
    ``score_sample`` into ``extra``. Each partition's sample is taken in its write task (``drop``:
    the score columns it then leaves out) and the samples are merged in tasks, so nothing is scored
    twice, the step adds no task per partition, and the client receives one merged sample."""
    import functools

    from curate.stages import dataset

    def on_side(side):
        if side is None:  # every partition resumed from a killed run: nothing written, nothing sampled
            return
        extra["score_sample"] = {**merge_samples([side], settings.chain), "partitions": side["partitions"],
                                 "of_partitions": out.npartitions}

    return dataset.write_dataset(out, ctx, stage=stage.name, settings=settings, reject_columns=stage.reject_columns,
                                 extra=extra, prepare=functools.partial(_sampled, chain=settings.chain, drop=tuple(drop)),
                                 combine=functools.partial(combine_samples, chain=settings.chain), on_side=on_side,
                                 dropped_columns=tuple(drop))


def _sampled(df: pd.DataFrame, chain, drop: tuple) -> tuple[pd.DataFrame, dict]:
    sample = {**partition_sample(df, chain), "partitions": 1}
    return (df.drop(columns=list(drop)) if drop else df), sample


def combine_samples(parts: list[dict], chain, size: int | None = None) -> dict:
    """Partition samples (:func:`partition_sample`) as one of the same form: counts added, the
    ``size`` rows of smallest priority kept (so merging in any grouping gives the same sample)."""
    size = SAMPLE_SIZE if size is None else size
    filters = build_chain(chain)
    samples = [p["sample"] for p in parts if len(p["sample"])]
    sample = (pd.concat(samples, ignore_index=True).sort_values(_PRIORITY, kind="stable").head(size)
              .reset_index(drop=True) if samples else parts[0]["sample"])
    counts = {f.reason: {k: int(sum(p["counts"][f.reason].get(k, 0) for p in parts))
                         for k in ("scored", "rejected", "only", "nan")} for f in filters}
    return {"documents": int(sum(p["documents"] for p in parts)), "counts": counts, "sample": sample,
            "partitions": int(sum(p.get("partitions", 1) for p in parts))}


# --------------------------------------------------------------------------- the score sample


def partition_sample(df: pd.DataFrame, chain, size: int | None = None) -> dict:
    """Counts per filter over the partition's scored documents, and the ``size`` of them with the
    smallest id hash: their scores and each filter's own decision."""
    from curate.stages.dataset import REASON
    from curate.stages.filters.apply import NAN_REASON

    size = SAMPLE_SIZE if size is None else size
    filters = build_chain(chain)
    if REASON in df.columns:  # the documents that reached the stage: not rejected by the reader
        reason = df[REASON]
        rows = df[(reason.isna() | reason.isin([*(f.reason for f in filters), NAN_REASON])).to_numpy(dtype=bool)]
    else:
        rows = df
    counts, bad = {}, {}
    alive = np.ones(len(rows), dtype=bool)
    for f in filters:
        s = rows[f.score_column].to_numpy(dtype=np.float64)
        # an expensive filter scores what every earlier filter kept (ScoreFilter.evaluate); a NaN it
        # gave is a score, and rejects
        scored = alive.copy() if f.expensive else np.ones(len(s), dtype=bool)
        bad[f.reason] = np.zeros(len(s), dtype=bool)
        if scored.any():
            at = np.flatnonzero(scored)
            keep = np.asarray(f.keep_frame(s[at], rows.iloc[at]), dtype=bool) & ~np.isnan(s[at])
            bad[f.reason][at] = ~keep
        alive &= ~bad[f.reason]
        counts[f.reason] = {"scored": int(scored.sum()), "rejected": int(bad[f.reason].sum()),
                            "nan": int((scored & np.isnan(s)).sum())}
    # a filter that did not score a document (a model filter after one that rejected it) does not reject it
    rejecters = np.sum(list(bad.values()), axis=0) if bad else np.zeros(len(rows), dtype=np.int64)
    for f in filters:
        counts[f.reason]["only"] = int((bad[f.reason] & (rejecters == 1)).sum())
    priority = pd.util.hash_pandas_object(rows["id"].astype(str), index=False).to_numpy()
    pick = np.argsort(priority, kind="stable")[:size]
    small = rows.iloc[pick]
    sample = pd.DataFrame({_PRIORITY: priority[pick]})
    for f in filters:
        s = small[f.score_column].to_numpy(dtype=np.float64)
        keep = np.ones(len(s), dtype=bool)
        has = ~np.isnan(s)
        if has.any():
            keep[has] = np.asarray(f.keep_frame(s[has], small.iloc[np.flatnonzero(has)]), dtype=bool)
        sample[f.score_column] = s  # a NaN is left out of the histogram, counted in counts[...]["nan"]
        sample["keep_" + f.reason] = keep
    return {"documents": len(rows), "counts": counts, "sample": sample}


def merge_samples(parts: list[dict], chain, size: int | None = None, bins: int = SAMPLE_BINS) -> dict:
    """The manifest's ``score_sample``: totals, and per filter a histogram of the merged sample."""
    size = SAMPLE_SIZE if size is None else size
    filters = build_chain(chain)
    samples = [p["sample"] for p in parts if len(p["sample"])]
    sample = (pd.concat(samples, ignore_index=True).sort_values(_PRIORITY, kind="stable").head(size)
              if samples else pd.DataFrame())
    out = {"documents": int(sum(p["documents"] for p in parts)), "sampled": len(sample), "bins": bins,
           "filters": {}}
    for f in filters:
        entry = {k: int(sum(p["counts"][f.reason].get(k, 0) for p in parts)) for k in ("scored", "rejected", "only", "nan")}
        if len(sample):
            s = sample[f.score_column].to_numpy(dtype=np.float64)
            keep = sample["keep_" + f.reason].to_numpy(dtype=bool)
            has = ~np.isnan(s)
            entry["histogram"] = histogram(s[has], keep[has], f.min, f.max, bins)
        out["filters"][f.reason] = entry
    return out


def histogram(values: np.ndarray, keep: np.ndarray, lo_line, hi_line, bins: int) -> dict:
    """Counts of kept and rejected values per bin. The ``bins`` bins span the values' own range
    (log-spaced for wide non-negative ranges): bins stretched to a far threshold (word_count's max of
    100,000 over pages of a few thousand words) left the data a sliver of one or two bars. A threshold
    outside that range adds one empty bin reaching to it, so every threshold stays on the axis; the
    report shows the data's bins and marks such a threshold at the edge. Infinities go to the outer
    data bins; with no finite value the bins span the thresholds."""
    finite = values[np.isfinite(values)]
    lines = [x for x in (lo_line, hi_line) if x is not None]
    if len(finite):
        lo, hi = float(finite.min()), float(finite.max())
    else:
        lo, hi = min(lines, default=0.0), max(lines, default=1.0)
    # log-spaced only when the range covers decades (a narrow band of large values reads better linear)
    log = bool(lo >= 0 and hi > 1000 and hi + 1 > 30 * (lo + 1))
    if log:
        edges = np.logspace(np.log10(lo + 1), np.log10(hi + 1), bins + 1) - 1
    else:
        edges = np.linspace(lo, hi if hi > lo else lo + 1, bins + 1)
    edges[0], edges[-1] = lo, max(edges[-1], hi)  # rounding must not drop the extremes
    v = np.clip(values, edges[0], edges[-1])
    # counted over the data's bins (the last one closed, so the largest value stays in it), then the
    # empty bins reaching to thresholds beyond
    pad = ([0] if any(x < edges[0] for x in lines) else [], [0] if any(x > edges[-1] for x in lines) else [])
    kept, rejected = (np.histogram(v[k], bins=edges)[0].tolist() for k in (keep, ~keep))
    edges = [*([min(lines)] if pad[0] else []), *edges, *([max(lines)] if pad[1] else [])]
    return {"sampled": int(len(values)), "log": log, "edges": [float(f"{e:.6g}") for e in edges],
            "kept": pad[0] + kept + pad[1], "rejected": pad[0] + rejected + pad[1]}
