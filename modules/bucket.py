"""``bucket``: scores -> an integer quality bucket by global percentiles (Nemotron-CC's recipe).

    curate bucket --input TAGGED --output OUT --scores score_edu,score_dclm --buckets 20 [--combine max]

Each score column is cut into ``buckets`` equally populated ranges over the whole dataset: with ``n``
documents that have the score, cut ``k`` (k = 1 .. buckets-1) is the value at rank ``ceil(k * n /
buckets)`` (1-based) of the sorted scores, and a document's bucket for that score is the number of cuts
its score reaches (``score >= cut``), 0 .. buckets-1: equal scores always share a bucket. The
per-score buckets are then combined into the ``bucket`` column (``--column``): ``max`` (Nemotron-CC:
a document is as good as its best classifier says), ``mean`` (rounded down) or ``weights:a=0.5,b=0.5``
(the weighted mean of the per-score buckets, rounded down). A document whose score is missing (null or
NaN: NaN compares false, so it reaches no cut) does not count for that score; a document without any of
the scores gets bucket ``-1``, a bucket apart.

The cuts are exact and computed in bounded memory, whatever the dataset's size: one pass finds each
score's range, a second counts the scores in ``BINS`` equal bins (a fixed array per task), which names
the bin holding each cut's rank; a third collects only the scores inside those bins, and the cut is
read off them. Memory per task is the bins plus the values in at most ``buckets - 1`` bins. The
manifest records every score's cuts (``bucket.cuts``) and counts per bucket; the same data give the same
buckets on any cluster.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from curate.stages.errors import DataError, SettingsError
from curate.stages.stage import REASON, Stage, check_range

#: bins of the counting pass: the cut's bin then holds about n / BINS values
BINS = 1 << 16


def parse_combine(text: str, scores: tuple[str, ...]) -> tuple[str, dict[str, float]]:
    """'max' | 'mean' | 'weights:a=0.5,b=0.5' -> (rule, weights per score)."""
    if text in ("max", "mean"):
        return text, {}
    if not text.startswith("weights:"):
        raise SettingsError(f"combine must be max, mean or weights:SCORE=W,...; got {text!r}")
    weights = {}
    for item in (s.strip() for s in text[len("weights:"):].split(",") if s.strip()):
        name, sep, value = item.partition("=")
        try:
            w = float(value)
        except ValueError:
            w = -1.0
        if not sep or name not in scores or not (w >= 0) or math.isinf(w):
            raise SettingsError(f"combine: expected SCORE=WEIGHT with SCORE one of {', '.join(scores)} and "
                                f"WEIGHT >= 0; got {item!r}")
        weights[name] = w
    if not weights or sum(weights.values()) <= 0:
        raise SettingsError("combine: the weights must not all be 0")
    return "weights", weights


@dataclass(frozen=True)
class BucketSettings:
    scores: tuple[str, ...] = field(default=(), metadata={"help": "score columns to bucket", "metavar": "COL,..."})
    buckets: int = field(default=20, metadata={"help": "buckets per score (Nemotron-CC: 20)", "metavar": "N"})
    combine: str = field(default="max", metadata={
        "help": "how per-score buckets make the bucket: max, mean (rounded down) or weights:SCORE=W,...",
        "metavar": "RULE"})
    column: str = field(default="bucket", metadata={"help": "the output column", "metavar": "NAME"})

    def __post_init__(self):
        if not self.scores:
            raise SettingsError("scores: name at least one score column, e.g. --scores score_edu")
        if len(set(self.scores)) != len(self.scores):
            raise SettingsError("scores: a column is named twice")
        check_range(self, "buckets", 1, 10_000)
        parse_combine(self.combine, self.scores)
        if self.column in self.scores:
            raise SettingsError(f"column: {self.column!r} is one of the scores")


def _values(df: pd.DataFrame, column: str) -> np.ndarray:
    if column not in df.columns:
        raise DataError(f"bucket: no column {column!r} (columns: {', '.join(map(str, df.columns))})")
    kept = df if REASON not in df.columns else df[df[REASON].isna()]
    v = pd.to_numeric(kept[column], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    return v[~np.isnan(v)]


def ranges(df: pd.DataFrame, scores) -> dict[str, tuple[int, float, float]]:
    """Pass 1 of a partition: (count, min, max) of each score."""
    out = {}
    for s in scores:
        v = _values(df, s)
        out[s] = (len(v), float(v.min()) if len(v) else math.inf, float(v.max()) if len(v) else -math.inf)
    return out


def _edges(lo: float, hi: float) -> np.ndarray:
    return np.linspace(lo, hi, BINS + 1) if hi > lo else np.array([lo, lo])


def _bin_of(v: np.ndarray, lo: float, hi: float) -> np.ndarray:
    if hi <= lo:
        return np.zeros(len(v), dtype=np.int64)
    # the bin of each value with the same edges every task uses (the last bin is closed)
    return np.clip(np.searchsorted(_edges(lo, hi), v, side="right") - 1, 0, BINS - 1)


def histograms(df: pd.DataFrame, scores, bounds: dict) -> dict[str, np.ndarray]:
    """Pass 2 of a partition: counts of each score in the BINS bins of its global range."""
    out = {}
    for s in scores:
        v = _values(df, s)
        lo, hi = bounds[s]
        n = BINS if hi > lo else 1
        out[s] = np.bincount(_bin_of(v, lo, hi), minlength=n).astype(np.int64)
    return out


def in_bins(df: pd.DataFrame, scores, bounds: dict, wanted: dict) -> dict[str, np.ndarray]:
    """Pass 3 of a partition: the scores that fall in the bins holding a cut."""
    out = {}
    for s in scores:
        v = _values(df, s)
        lo, hi = bounds[s]
        out[s] = v[np.isin(_bin_of(v, lo, hi), wanted[s])]
    return out


def cut_ranks(n: int, buckets: int) -> list[int]:
    """1-based ranks of the cuts: ceil(k n / buckets) for k = 1 .. buckets-1."""
    return [math.ceil(k * n / buckets) for k in range(1, buckets)]


def cuts_from(hist: np.ndarray, values: np.ndarray, ranks: list[int], lo: float, hi: float) -> list[float]:
    """The value at each rank, from the counts before each bin and the sorted values inside it."""
    before = np.concatenate([[0], np.cumsum(hist)])
    values = np.sort(values)
    value_bins = _bin_of(values, lo, hi)
    cuts = []
    for r in ranks:
        b = int(np.searchsorted(before, r, side="left") - 1)  # the bin where the r-th value lies
        inside = values[value_bins == b]
        cuts.append(float(inside[r - before[b] - 1]))
    return cuts


def assign(df: pd.DataFrame, settings: BucketSettings, cuts: dict[str, list[float]]) -> pd.DataFrame:
    """The bucket column: per score the cuts reached, combined; -1 without any score."""
    rule, weights = parse_combine(settings.combine, settings.scores)
    per = []
    for s in settings.scores:
        v = pd.to_numeric(df[s], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
        b = np.searchsorted(np.asarray(cuts[s], dtype=np.float64), v, side="right").astype(np.float64)
        per.append(np.where(np.isnan(v), np.nan, b))
    stack = np.vstack(per) if per else np.zeros((0, len(df)))
    have = ~np.isnan(stack)
    with np.errstate(invalid="ignore"):
        if rule == "max":
            combined = np.where(have, stack, -np.inf).max(axis=0)
        elif rule == "mean":
            combined = np.floor(np.where(have, stack, 0).sum(axis=0) / np.maximum(have.sum(axis=0), 1))
        else:
            w = np.array([weights.get(s, 0.0) for s in settings.scores])[:, None] * have
            num, den = (np.where(have, stack, 0) * w).sum(axis=0), w.sum(axis=0)
            combined = np.floor(num / np.where(den > 0, den, 1))
            have = have & (w > 0)  # a score of weight 0 does not make a bucket on its own
    bucket = np.where(have.any(axis=0), combined, -1).astype(np.int64)
    return df.assign(**{settings.column: pd.Series(bucket, index=df.index, dtype="Int64")})


def bucket_counts(df: pd.DataFrame, column: str) -> dict[str, int]:
    kept = df if REASON not in df.columns else df[df[REASON].isna()]
    return {str(int(k)): int(n) for k, n in kept[column].value_counts().items()}


def merge_counts(parts: list[dict]) -> dict[str, int]:
    total: dict[str, int] = {}
    for part in parts:
        for k, n in part.items():
            total[k] = total.get(k, 0) + n
    return total


class BucketStage(Stage):
    """Percentile buckets of score columns over the whole dataset, combined into one integer column."""

    name = "bucket"
    needs = ()

    def columns(self, settings):
        from curate.stages.stage import Columns

        return Columns(needs=tuple(settings.scores), adds=(settings.column,))
    Settings = BucketSettings
    help = "integer quality buckets from score columns by global percentiles (Nemotron-CC), exact, bounded memory"

    def run(self, settings: BucketSettings, ctx) -> dict:
        import dataclasses

        import dask

        from curate.stages import dataset

        ddf = dataset.read_dataset(ctx.input, ctx.io, rejects_dir=ctx.output)
        missing = [s for s in settings.scores if s not in ddf.columns]
        if missing:
            raise SettingsError(f"scores: the input has no column {missing[0]!r} "
                                f"(columns: {', '.join(map(str, ddf.columns))})")
        parts = ddf.to_delayed()
        scores = settings.scores
        first = ctx.run_compute(*[dask.delayed(ranges)(p, scores) for p in parts])
        n = {s: sum(r[s][0] for r in first) for s in scores}
        for s in scores:
            if n[s] and settings.buckets > n[s]:
                raise SettingsError(f"buckets: {settings.buckets} buckets for {n[s]:,} documents with {s}; "
                                    "give at most one bucket per document")
        bounds = {s: (min(r[s][1] for r in first), max(r[s][2] for r in first)) if n[s] else (0.0, 0.0)
                  for s in scores}
        hists = ctx.run_compute(*[dask.delayed(histograms)(p, scores, bounds) for p in parts])
        hist = {s: np.sum([h[s] for h in hists], axis=0) for s in scores}
        ranks = {s: cut_ranks(n[s], settings.buckets) if n[s] else [] for s in scores}
        wanted = {s: np.unique([int(np.searchsorted(np.concatenate([[0], np.cumsum(hist[s])]), r, side="left") - 1)
                                for r in ranks[s]]) for s in scores}
        picked = ctx.run_compute(*[dask.delayed(in_bins)(p, scores, bounds, wanted) for p in parts])
        cuts = {s: cuts_from(hist[s], np.concatenate([p[s] for p in picked]) if picked else np.zeros(0),
                             ranks[s], *bounds[s]) for s in scores}
        meta = assign(ddf._meta, settings, {s: [] for s in scores})
        out = ddf.map_partitions(assign, settings, cuts, meta=meta)
        counts = dask.delayed(merge_counts)([dask.delayed(bucket_counts)(p, settings.column) for p in out.to_delayed()])
        extra: dict = {"bucket": {"cuts": cuts, "scored": n}}

        def compute(*collections):
            *results, merged = ctx.run_compute(*collections, counts)
            extra["bucket"]["counts"] = dict(sorted(merged.items(), key=lambda kv: int(kv[0])))
            return tuple(results)

        return dataset.write_dataset(out, dataclasses.replace(ctx, compute=compute), stage=self.name,
                                     settings=settings, extra=extra)
