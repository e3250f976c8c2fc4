"""``split_documents`` and ``join_documents``: cut documents into segments and put them back together
(NeMo Curator's ``DocumentSplitter`` and ``DocumentJoiner``), e.g. to filter paragraphs one by one
and reassemble what is left::

    curate split_documents --input IN --output SEG [--separator '\\n\\n']
    curate filter --config paragraph_rules.yaml --input SEG --output KEPT
    curate join_documents --input KEPT --output OUT [--separator '\\n\\n']

Split: document ``D`` with text ``s0 SEP s1 SEP s2`` becomes three rows with ids ``D#0``, ``D#1``,
``D#2`` (ids stay unique, as the dataset contract wants), ``document_id = D`` and ``segment_id`` 0,
1, 2; every other column is copied. Empty segments (two separators in a row) are kept, so a join
gives back exactly the original text.

Join: rows are grouped by ``document_id``, ordered by ``segment_id`` and their texts joined with the
separator; the document gets its id back (``document_id``) and the other columns of its first
segment. Segments dropped in between simply are not there any more. Segments of one document must be
in one partition, which is how ``split_documents`` and every per-document stage leave them; after a
stage that moves rows between partitions (``shuffle``), pass ``--regroup``: one shuffle on
``document_id`` brings them together first.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from curate.stages.errors import SettingsError
from curate.stages.stage import REASON, MapStage

DOCUMENT_ID = "document_id"
SEGMENT_ID = "segment_id"
DETAIL = "_detail"


def _unescape(sep: str) -> str:
    # a separator typed on a command line arrives as the two characters '\' 'n'
    return sep.encode("utf-8").decode("unicode_escape") if "\\" in sep else sep


@dataclass(frozen=True)
class SplitSettings:
    separator: str = field(default="\\n\\n", metadata={
        "help": "split on this text (escapes such as \\n are understood)", "metavar": "SEP"})

    def __post_init__(self):
        if not _unescape(self.separator):
            raise SettingsError("separator must not be empty")


@dataclass(frozen=True)
class JoinSettings:
    separator: str = field(default="\\n\\n", metadata={
        "help": "join segments with this text (escapes such as \\n are understood)", "metavar": "SEP"})
    regroup: bool = field(default=False, metadata={
        "help": "shuffle on document_id first (segments of a document spread over partitions)"})

    def __post_init__(self):
        _unescape(self.separator)


def split_frame(df: pd.DataFrame, settings: SplitSettings) -> pd.DataFrame:
    """One row per segment; the pure per-partition step (rows dropped upstream are not passed in)."""
    from curate.stages.dataset import STRING

    sep = _unescape(settings.separator)
    parts = df["text"].astype(object).where(df["text"].notna(), "").map(lambda t: t.split(sep))
    counts = parts.map(len).to_numpy(dtype=np.int64) if len(df) else np.zeros(0, dtype=np.int64)
    rows = np.repeat(np.arange(len(df)), counts)
    seg = (np.arange(len(rows)) - np.repeat(np.cumsum(counts) - counts, counts)).astype(np.int64)
    out = df.iloc[rows].reset_index(drop=True)
    doc = out["id"].astype(STRING)
    texts = [s for p in parts for s in p]
    out = out.assign(
        id=(doc + "#" + pd.Series(seg, dtype="int64").astype(STRING)).astype(STRING),
        text=pd.Series(texts, dtype=STRING),
    )
    cols = [c for c in out.columns if c not in (DOCUMENT_ID, SEGMENT_ID, REASON, DETAIL)]
    out[DOCUMENT_ID] = doc
    out[SEGMENT_ID] = pd.Series(seg, dtype="int64")
    tail = [c for c in (REASON, DETAIL) if c in out.columns]
    return out[[*cols[:2], DOCUMENT_ID, SEGMENT_ID, *cols[2:], *tail]]


def join_frame(df: pd.DataFrame, settings: JoinSettings) -> pd.DataFrame:
    """One row per document_id: texts joined in segment order, id restored, first segment's columns."""
    from curate.stages.dataset import STRING

    for col in (DOCUMENT_ID, SEGMENT_ID):
        if col not in df.columns:
            raise SettingsError(f"join_documents: the dataset has no {col!r} column (made by split_documents)")
    sep = _unescape(settings.separator)
    # documents in the order they first appear, segments in segment_id order
    group = df.groupby(DOCUMENT_ID, sort=False, dropna=False).ngroup()
    ordered = df.assign(_group=group.to_numpy()).sort_values(["_group", SEGMENT_ID], kind="stable")
    ordered = ordered.drop(columns=["_group"])
    first = ordered.drop_duplicates(DOCUMENT_ID, keep="first")
    texts = ordered.groupby(DOCUMENT_ID, sort=False)["text"].agg(lambda s: sep.join(s.fillna("")))
    out = first.assign(id=first[DOCUMENT_ID].astype(STRING),
                       text=first[DOCUMENT_ID].map(texts).astype(STRING))
    return out.drop(columns=[DOCUMENT_ID, SEGMENT_ID]).reset_index(drop=True)


class SplitDocumentsStage(MapStage):
    name = "split_documents"
    adds = ("id", "document_id", "segment_id")
    Settings = SplitSettings
    help = "split documents on a separator into segments (id D#k, document_id, segment_id)"

    def transform(self, df, settings):
        return split_frame(df, settings)


class JoinDocumentsStage(MapStage):
    name = "join_documents"
    needs = ("text", "document_id", "segment_id")
    removes = ("segment_id",)
    Settings = JoinSettings
    help = "join segments back into documents by document_id, in segment_id order"

    def transform(self, df, settings):
        return join_frame(df, settings)

    def apply(self, ddf, settings):
        if settings.regroup and ddf.npartitions > 1:
            ddf = ddf.shuffle(DOCUMENT_ID, npartitions=ddf.npartitions)
        return super().apply(ddf, settings)
