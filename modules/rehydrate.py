"""``rehydrate``: repeat each kept document by a factor of its duplicate cluster's size (FineWeb-2).

    curate rehydrate --input DEDUPED --output OUT --factors "1:1,2:2,3-4:3,5-100:5,101-:1"

Deduplication keeps one document per duplicate cluster and writes the cluster's size in
``dup_cluster_size`` (1 for a document without duplicates). How often a text was duplicated is a
quality signal: FineWeb-2 upsamples documents that were duplicated a few times (a page worth
copying) and not those duplicated very often (boilerplate, spam). ``--factors`` maps cluster sizes to
how many times the document appears in the output:

- ``SIZE:FACTOR`` for one size, ``LO-HI:FACTOR`` for a closed range, ``LO-:FACTOR`` for every size from
  ``LO`` up. The ranges must not overlap and must leave no gap from 1 up to the last one, which must be
  open (``LO-``): every size has exactly one factor. A factor of 0 drops the document (reason
  ``rehydrate``, its size in the detail).
- The first copy keeps its id; copy ``k`` (2, 3, ...) has id ``ID#k``, so ids stay unique. Copies
  follow their original, in input order: the output depends only on the input (no randomness).
- The manifest counts documents and output rows per factor (``rehydrate.factors``).

A document without ``dup_cluster_size`` (a dataset that was never deduplicated by a curate that
writes it) fails the run naming the file; null sizes count as 1 (a document deduplication did not see).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from curate.stages.dataset import STRING, mark_dropped
from curate.stages.errors import DataError, SettingsError
from curate.stages.stage import MapStage

COLUMN = "dup_cluster_size"
REASON = "rehydrate"
_RANGE = re.compile(r"^\s*(\d+)\s*(?:(-)\s*(\d*)\s*)?:\s*(\d+)\s*$")


def parse_factors(text: str) -> tuple[tuple[int, int | None, int], ...]:
    """'1:1,2:2,3-4:3,5-:1' -> ((1, 1, 1), (2, 2, 2), (3, 4, 3), (5, None, 1)): (lo, hi, factor), sorted;
    SettingsError naming an overlap, a gap or a bad item."""
    ranges = []
    for item in (s for s in str(text).split(",") if s.strip()):
        m = _RANGE.match(item)
        if not m:
            raise SettingsError(f"factors: expected SIZE:FACTOR, LO-HI:FACTOR or LO-:FACTOR; got {item.strip()!r}")
        lo, dash, hi, factor = int(m.group(1)), m.group(2), m.group(3), int(m.group(4))
        top = (int(hi) if hi else None) if dash else lo
        if lo < 1 or (top is not None and top < lo):
            raise SettingsError(f"factors: {item.strip()!r} is not a range of sizes from 1 up")
        ranges.append((lo, top, factor))
    if not ranges:
        raise SettingsError("factors: give at least one SIZE:FACTOR, e.g. 1:1,2:2,3-4:3,5-:1")
    ranges.sort()
    expected = 1
    for lo, hi, _ in ranges:
        if lo < expected:
            raise SettingsError(f"factors: sizes {lo}-{hi if hi is not None else ''} overlap an earlier range")
        if lo > expected:
            raise SettingsError(f"factors: no factor for sizes {expected}-{lo - 1} (a gap)")
        if hi is None:
            expected = None
            break
        expected = hi + 1
    if expected is not None or ranges[-1][1] is not None:
        raise SettingsError(f"factors: the last range must be open, e.g. {expected}-:1 (no factor for sizes "
                            f"from {expected} up)" if expected is not None else
                            "factors: a range after the open one")
    return tuple(ranges)


@dataclass(frozen=True)
class RehydrateSettings:
    factors: str = field(default="1:1,2:2,3-4:3,5-100:5,101-:1", metadata={
        "help": "cluster size -> copies: SIZE:FACTOR, LO-HI:FACTOR, LO-:FACTOR, comma separated, covering every "
                "size from 1 (FineWeb-2's default shape)", "metavar": "RANGES"})
    #: the parsed ranges (not an option: derived from ``factors``, once, on the client)
    ranges: tuple = field(default=(), init=False, compare=True, hash=False)

    def __post_init__(self):
        object.__setattr__(self, "ranges", parse_factors(self.factors))


def factor_of(sizes: np.ndarray, ranges) -> np.ndarray:
    out = np.zeros(len(sizes), dtype=np.int64)
    for lo, hi, factor in ranges:
        inside = (sizes >= lo) if hi is None else ((sizes >= lo) & (sizes <= hi))
        out[inside] = factor
    return out


def rehydrate(df: pd.DataFrame, settings: RehydrateSettings) -> pd.DataFrame:
    """Each row ``factor`` times (copies right after it, ids ``ID#k``), factor 0 marked dropped."""
    if COLUMN not in df.columns:
        raise DataError(f"rehydrate: no {COLUMN!r} column (columns: {', '.join(map(str, df.columns))}); "
                        "deduplicate with curate dedup exact|fuzzy first")
    sizes = pd.to_numeric(df[COLUMN], errors="coerce").fillna(1).astype(np.int64).to_numpy()
    factors = factor_of(sizes, settings.ranges)
    repeat = np.maximum(factors, 1)  # a dropped row stays once, marked, for _rejects/
    out = df.iloc[np.repeat(np.arange(len(df)), repeat)].reset_index(drop=True)
    copy = np.concatenate([np.arange(1, r + 1) for r in repeat]) if len(repeat) else np.zeros(0, np.int64)
    ids = out["id"].astype(STRING)
    suffix = pd.Series([f"#{k}" for k in copy.tolist()], dtype=STRING, index=ids.index)
    out = out.assign(id=ids.where(copy == 1, ids + suffix))
    dropped = np.repeat(factors == 0, repeat)
    if dropped.any():
        out = mark_dropped(out, dropped, REASON)
        out = out.assign(_detail=pd.Series(np.where(dropped, [f"{COLUMN} {s}" for s in np.repeat(sizes, repeat)], None),
                                           dtype=STRING))
    return out


def factor_counts(df: pd.DataFrame, ranges) -> dict[str, dict[str, int]]:
    """{factor: {"documents": n, "rows": n * factor}} of one input partition (its kept documents)."""
    from curate.stages.dataset import REASON as DROPPED

    kept = df if DROPPED not in df.columns else df[df[DROPPED].isna()]
    if COLUMN not in kept.columns:
        return {}
    sizes = pd.to_numeric(kept[COLUMN], errors="coerce").fillna(1).astype(np.int64).to_numpy()
    factors, n = np.unique(factor_of(sizes, ranges), return_counts=True)
    return {str(int(f)): {"documents": int(k), "rows": int(f) * int(k)} for f, k in zip(factors, n)}


def merge_counts(parts: list[dict]) -> dict:
    total: dict[str, dict[str, int]] = {}
    for part in parts:
        for f, c in part.items():
            t = total.setdefault(f, {"documents": 0, "rows": 0})
            t["documents"] += c["documents"]
            t["rows"] += c["rows"]
    return {"factors": dict(sorted(total.items(), key=lambda kv: int(kv[0])))}


class RehydrateStage(MapStage):
    name = "rehydrate"
    needs = ("dup_cluster_size",)
    Settings = RehydrateSettings
    help = "repeat each kept document by a factor of its duplicate cluster size (FineWeb-2 upsampling)"

    def transform(self, df: pd.DataFrame, settings: RehydrateSettings) -> pd.DataFrame:
        return rehydrate(df, settings)

    def run(self, settings: RehydrateSettings, ctx) -> dict:
        """Write the repeated documents; the counts per factor come from the input partitions, in the
        writer's one compute (the partitions are read once for both)."""
        import dataclasses

        import dask

        from curate.stages import dataset

        ddf = dataset.read_dataset(ctx.input, ctx.io, rejects_dir=ctx.output)
        counts = dask.delayed(merge_counts)([dask.delayed(factor_counts)(p, settings.ranges) for p in ddf.to_delayed()])
        extra: dict = {}

        def compute(*collections):
            *results, merged = ctx.run_compute(*collections, counts)
            extra["rehydrate"] = merged
            return tuple(results)

        return dataset.write_dataset(self.apply(ddf, settings), dataclasses.replace(ctx, compute=compute),
                                     stage=self.name, settings=settings, reject_columns=self.reject_columns,
                                     extra=extra)
