"""``add_id``: new document ids, ``<prefix>-<number>``, numbered in dataset order across partitions.

    curate add_id --input IN --output OUT [--prefix doc] [--start 0] [--width 10] [--keep-original-as COL]

Ids are ``f"{prefix}-{n:0{width}d}"`` with ``n`` counting from ``start`` over the kept documents in
dataset order: partition 0 first, then partition 1, ... (NeMo Curator's ``AddId`` with a
``start_index``). Documents rejected upstream keep their id and are not numbered.

Sequential numbering without a global sort: one pass counts the kept documents of every partition
(a task per partition; only the counts travel), the client turns the counts into each partition's
first number (a running sum), and the second pass numbers every partition independently. The result
depends only on the input files and the settings, never on the number of workers or the order tasks
ran in. With ``--keep-original-as COL`` the previous id is kept in column COL.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from curate.stages.errors import SettingsError
from curate.stages.stage import REASON, Stage, check_range


@dataclass(frozen=True)
class AddIdSettings:
    prefix: str = field(default="doc", metadata={"help": "id prefix: PREFIX-0000000042", "metavar": "TEXT"})
    start: int = field(default=0, metadata={"help": "number of the first document", "metavar": "N"})
    width: int = field(default=10, metadata={"help": "digits, zero-padded (more when a number needs them)",
                                             "metavar": "N"})
    keep_original_as: str | None = field(default=None, metadata={
        "help": "keep the previous id in this column", "metavar": "COL"})

    def __post_init__(self):
        check_range(self, "start", lo=0)
        check_range(self, "width", lo=1, hi=40)
        if self.keep_original_as in ("id", "text", REASON, "_detail", ""):
            raise SettingsError(f"keep_original_as cannot be {self.keep_original_as!r} (a column curate uses)")


def kept_count(df: pd.DataFrame) -> int:
    return int(df[REASON].isna().sum()) if REASON in df.columns else len(df)


def add_ids(df: pd.DataFrame, settings: AddIdSettings, first: int = 0) -> pd.DataFrame:
    """Number the kept rows of ``df`` from ``settings.start + first``; the pure per-partition step."""
    from curate.stages.dataset import STRING

    kept = df[REASON].isna().to_numpy() if REASON in df.columns else np.ones(len(df), dtype=bool)
    numbers = settings.start + first + np.cumsum(kept) - 1
    fmt = f"{settings.prefix}-{{:0{settings.width}d}}"
    new = [fmt.format(n) for n in numbers[kept].tolist()]
    ids = df["id"].astype(STRING).copy()
    ids[kept] = new
    out = df.assign(id=ids.astype(STRING))
    if settings.keep_original_as:
        if settings.keep_original_as in out.columns:  # a column of that name is replaced, in place
            out = out.assign(**{settings.keep_original_as: df["id"].astype(STRING)})
        else:
            out.insert(2, settings.keep_original_as, df["id"].astype(STRING))
    return out


def _number(df: pd.DataFrame, settings: AddIdSettings, firsts: tuple, partition_info=None) -> pd.DataFrame:
    i = partition_info["number"] if partition_info else 0
    return add_ids(df, settings, firsts[i])


class AddIdStage(Stage):
    name = "add_id"
    needs = ()

    def columns(self, settings):
        from curate.stages.stage import Columns

        return Columns(adds=("id",) + ((settings.keep_original_as,) if settings.keep_original_as else ()))
    Settings = AddIdSettings
    help = "ids PREFIX-NNNNNNNNNN numbered in dataset order across partitions (no global sort)"

    def run(self, settings, ctx):
        from curate.stages import dataset

        ddf = dataset.read_dataset(ctx.input, ctx.io, rejects_dir=ctx.output)
        counts = ddf.map_partitions(lambda d: pd.Series([kept_count(d)]), meta=(None, "int64"))
        (sizes,) = ctx.run_compute(counts)
        firsts = tuple(int(x) for x in np.concatenate([[0], np.cumsum(np.asarray(sizes))[:-1]]))
        out = ddf.map_partitions(_number, settings, firsts, meta=add_ids(ddf._meta, settings))
        total = int(np.sum(np.asarray(sizes)))
        return dataset.write_dataset(out, ctx, stage=self.name, settings=settings, extra={"add_id": {
            "first": f"{settings.prefix}-{settings.start:0{settings.width}d}" if total else None,
            "last": f"{settings.prefix}-{settings.start + total - 1:0{settings.width}d}" if total else None,
            "documents": total}})
