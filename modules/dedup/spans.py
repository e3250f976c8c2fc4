"""paragraph_dedup, line_dedup, sentence_dedup: repeated paragraphs, lines or three-sentence spans
removed from every document but the first that holds them.

The rule (Dolma's for paragraphs, C4's for three-sentence spans): documents are ordered by document
number (input partition, then row); a span (a paragraph, a line, or three consecutive sentences: see
:mod:`.segments` for how text is cut and how spans are compared) stays in the first place it occurs,
the smallest (document, span index), and is removed from every later place, in other documents and
later in the same document. Spans of fewer than ``--min-span-words`` words ("Home", "Share", "}") are
never hashed: they stay wherever they are and never make another span removed. A document that lost a
span and is left with fewer than ``--min-words`` words (or none) is dropped with the unit's reason
(``paragraph_duplicate``, ``line_duplicate``, ``span_duplicate``); the others keep their text minus
the removed spans.

Identify, then remove, every step Parquet under ``OUT/_work/``:

1. ``spans`` (one task per input partition): each span's 64-bit hash, document number and span index.
   Within the partition only the first row of each hash is kept for the shuffle; the later ones are
   already known to be removed and go to ``local/`` with the document they repeat.
2. ``later``: the first rows shuffled on the hash; per hash the smallest (document, span) stays, the
   other partitions' rows are removed. A hash has at most one row per input partition here, so a span
   copied into every document of the corpus costs one row per partition, not per document.
3. ``removals``: the removed rows routed back to their input partition (one range shuffle) and merged
   with ``local/``: ``(doc, span, first_doc)`` per input partition, sorted.
4. ``audit`` (one task per input partition): each changed document's removed spans and bytes, words
   left and whether it is dropped, in ``OUT/_duplicates/`` (``id``, ``removed_spans``,
   ``removed_bytes``, ``bytes``, ``words_left``, ``dropped``), and the totals for the manifest.
5. the dataset: each input partition rewritten without its removed spans.

A task holds one input partition, or one shuffled partition of compact rows (24 bytes per span), so a
worker's memory is set by ``--blocksize``, never by the corpus. Hashes are 64-bit: two different spans
share one with probability about ``n^2 / 2^65`` among ``n`` distinct spans (0.03 for a billion), and then
the later one is removed as a repeat.

``--bloom``: one task streams the input partitions in order through a Bloom filter of the stated size
(:mod:`.bloom`): a span is removed when the filter has seen its hash (inside one partition the first
occurrence is found exactly, as in step 1). It needs no shuffle, but it is one task, its memory is the
filter's (``--bloom-capacity`` distinct spans at ``--bloom-fp``: 3.6 bytes per span at 1e-6), and a
false positive removes a span that is not a repeat: the manifest records the filter and the rate its
fill implies. Without false positives it removes exactly what the default mode removes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import pandas as pd

from curate.stages import dedup
from curate.stages.dedup import bloom as blooming, segments
from curate.stages.errors import SettingsError
from curate.stages.stage import Stage, check_range

REASONS = {"paragraph": "paragraph_duplicate", "line": "line_duplicate", "sentence": "span_duplicate"}
#: documents with the most removed bytes listed in the manifest
LARGEST = 10


@dataclass(frozen=True)
class SpanDedupSettings:
    min_span_words: int = field(default=5, metadata={
        "help": "spans (paragraphs, lines, three-sentence spans) with fewer words are never removed: short "
                "common lines such as Home, Share or a closing brace", "metavar": "N"})
    min_words: int = field(default=50, metadata={
        "help": "a document that lost a span and has fewer words left is dropped (with none left it always is)",
        "metavar": "N"})
    bloom: bool = field(default=False, metadata={
        "help": "one streaming pass through a Bloom filter instead of a shuffle: one task, the filter's memory, "
                "and a false positive removes a span that is not a repeat (--bloom-fp)"})
    bloom_fp: float = field(default=1e-6, metadata={
        "help": "--bloom: the filter's false-positive rate at --bloom-capacity distinct spans", "metavar": "P"})
    bloom_capacity: int = field(default=10_000_000, metadata={
        "help": "--bloom: distinct spans the filter is sized for (3.6 bytes each at 1e-6); beyond, the rate grows "
                "(the manifest records the rate at the end)", "metavar": "N"})

    def __post_init__(self):
        check_range(self, "min_span_words", 1)
        check_range(self, "min_words", 0)
        check_range(self, "bloom_capacity", 1)
        if not 0.0 < self.bloom_fp < 1.0:
            raise SettingsError(f"bloom_fp must be between 0 and 1 (exclusive); got {self.bloom_fp!r}")
        bits, _ = blooming.size_for(self.bloom_capacity, self.bloom_fp)
        if self.bloom and bits > blooming.MAX_BITS:
            raise SettingsError(f"bloom_capacity {self.bloom_capacity} at bloom_fp {self.bloom_fp} needs a "
                                f"{bits / 8 / 2**30:.0f} GiB filter; at most {blooming.MAX_BITS / 8 / 2**30:.0f} GiB")


# --------------------------------------------------------------------------- per-partition work


def span_rows(df: pd.DataFrame, partition: int, unit: str, min_span_words: int) -> pd.DataFrame:
    """(hash, doc, span) of every span of the documents of input partition ``partition`` not already
    dropped, in (doc, span) order."""
    from array import array

    pos = dedup.good_rows(df)
    docs = dedup.doc_numbers(partition, pos)
    # typed arrays, not lists of Python ints: 20 bytes per span while the partition is cut
    hashes, numbers, index = array("Q"), array("q"), array("i")
    for doc, text in zip(docs.tolist(), df["text"].iloc[pos].tolist()):
        if not isinstance(text, str):
            continue
        _, found = segments.spans(text, unit, min_span_words)
        if found:
            index.extend(k for k, _, _ in found)
            hashes.extend(h for _, h, _ in found)
            numbers.extend([doc] * len(found))
    return pd.DataFrame({"hash": np.frombuffer(hashes, dtype=np.uint64), "doc": np.frombuffer(numbers, dtype=np.int64),
                         "span": np.frombuffer(index, dtype=np.int32)})


def split_firsts(rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the first row of each hash, by (doc, span); the later rows as ``(doc, span, first_doc)``)."""
    rows = rows.sort_values(["hash", "doc", "span"], kind="stable", ignore_index=True)
    later = rows["hash"].duplicated().to_numpy()
    first_doc = rows["doc"].to_numpy()[np.flatnonzero(~later)[np.cumsum(~later) - 1]] if len(rows) else []
    removed = pd.DataFrame({"doc": rows["doc"].to_numpy()[later], "span": rows["span"].to_numpy()[later],
                            "first_doc": np.asarray(first_doc, dtype=np.int64)[later]})
    return rows[~later].reset_index(drop=True), sort_removals(removed)


def sort_removals(rows: pd.DataFrame) -> pd.DataFrame:
    return rows.astype({"doc": np.int64, "span": np.int32, "first_doc": np.int64}).sort_values(
        ["doc", "span"], kind="stable", ignore_index=True)


def apply_removals(df: pd.DataFrame, rows: pd.DataFrame, unit: str, min_words: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(``df`` with the spans in ``rows`` (doc, span) cut from their texts and the documents left too
    short marked dropped; the audit: one row per changed document)."""
    from curate.stages.dataset import DETAIL, STRING, mark_dropped

    reason = REASONS[unit]
    docs = rows["doc"].to_numpy(dtype=np.int64)
    spans = rows["span"].to_numpy(dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, docs[1:] != docs[:-1]]) if len(docs) else np.zeros(0, dtype=np.int64)
    ends = np.r_[starts[1:], len(docs)]
    texts = df["text"].to_numpy(dtype=object, na_value=None).copy()
    audit = {"row": [], "removed_spans": [], "removed_bytes": [], "bytes": [], "words_left": []}
    for a, b in zip(starts.tolist(), ends.tolist()):
        row = int(docs[a] & dedup.ROW_MASK)
        text = texts[row]
        cut = segments.units(text, unit)
        ranges = segments.removal_ranges(cut, segments.covered_units(spans[a:b], unit))
        new = segments.cut_ranges(text, ranges)
        texts[row] = new
        before = segments.utf8_len(text)
        audit["row"].append(row)
        audit["removed_spans"].append(b - a)
        audit["removed_bytes"].append(before - segments.utf8_len(new))
        audit["bytes"].append(before)
        audit["words_left"].append(len(new.split()))
    audit = pd.DataFrame(audit)
    drop = audit["words_left"].to_numpy() < max(min_words, 1)
    changed = audit["row"].to_numpy(dtype=np.int64)
    out = df.assign(text=pd.array(texts, dtype=df["text"].dtype))
    mask = np.zeros(len(df), dtype=bool)
    mask[changed[drop]] = True
    out = mark_dropped(out, mask, reason)
    if drop.any():
        detail = np.full(len(df), None, dtype=object)
        detail[changed[drop]] = [
            f"{r} of {n} bytes were {unit}s of earlier documents; {w} words left"
            for r, n, w in zip(audit["removed_bytes"][drop], audit["bytes"][drop], audit["words_left"][drop])]
        current = out[DETAIL] if DETAIL in out.columns else pd.Series(pd.NA, index=out.index, dtype=STRING)
        out = out.assign(**{DETAIL: current.mask(mask, pd.Series(detail, index=out.index)).astype(STRING)})
    table = pd.DataFrame({
        "id": df["id"].iloc[changed].astype(STRING).to_numpy() if len(changed) else pd.array([], dtype=STRING),
        "removed_spans": audit["removed_spans"].to_numpy(dtype=np.int64),
        "removed_bytes": audit["removed_bytes"].to_numpy(dtype=np.int64),
        "bytes": audit["bytes"].to_numpy(dtype=np.int64),
        "words_left": audit["words_left"].to_numpy(dtype=np.int64),
        "dropped": drop,
    }).astype({"id": STRING})
    return out, table


def audit_stats(table: pd.DataFrame) -> dict:
    """Totals of one partition's audit for the manifest, with the removed bytes per document as a
    histogram (powers of two) and the largest few."""
    removed = table["removed_bytes"].to_numpy(dtype=np.int64)
    dropped = table["dropped"].to_numpy(dtype=bool)
    bins = np.ceil(np.log2(np.maximum(removed, 1))).astype(np.int64)
    hist = {int(k): int(v) for k, v in zip(*np.unique(bins, return_counts=True))}
    top = table.nlargest(LARGEST, "removed_bytes")
    return {"spans_removed": int(table["removed_spans"].sum()), "documents_changed": int(len(table)),
            "documents_dropped": int(dropped.sum()), "bytes_removed": int(removed.sum()),
            # what the dropped documents still held: removed with them, beyond their removed spans
            "bytes_dropped_with_documents": int((table["bytes"] - table["removed_bytes"])[dropped].sum()),
            "histogram": hist,
            "largest": [[str(i), int(b)] for i, b in zip(top["id"], top["removed_bytes"])]}


def text_bytes(df: pd.DataFrame) -> int:
    pos = dedup.good_rows(df)
    return int(sum(segments.utf8_len(t) for t in df["text"].iloc[pos].tolist() if isinstance(t, str)))


def merge_stats(parts: list[dict]) -> dict:
    """The partitions' audit stats added up (histogram keys become ``"<=2^k"`` byte labels)."""
    keys = ("spans_removed", "documents_changed", "documents_dropped", "bytes_removed",
            "bytes_dropped_with_documents", "bytes_in")
    out = {k: int(sum(p.get(k, 0) for p in parts)) for k in keys}
    hist: dict[int, int] = {}
    for p in parts:
        for k, v in p.get("histogram", {}).items():
            hist[int(k)] = hist.get(int(k), 0) + v
    out["removed_bytes_per_document"] = {f"<={1 << k}": v for k, v in sorted(hist.items())}
    largest = sorted((e for p in parts for e in p.get("largest", [])), key=lambda e: (-e[1], e[0]))
    out["largest"] = largest[:LARGEST]
    return out


# --------------------------------------------------------------------------- tasks


def _spans_task(df, i, folder, local, unit, min_span_words) -> dict:
    rows = span_rows(df, i, unit, min_span_words)
    firsts, later = split_firsts(rows)
    stats = dedup.save_part(firsts, folder, i)
    stats["outputs"] = stats.get("outputs", []) + dedup.save_part(later, local, i).get("outputs", [])
    stats["spans"] = len(rows)
    return stats


def _later_task(part, folder, i) -> dict:
    return dedup.save_part(split_firsts(part)[1], folder, i)


def _removals_task(routed, local_path, folder, i) -> dict:
    rows = pd.concat([routed[["doc", "span", "first_doc"]], dedup.load_part(local_path)], ignore_index=True)
    return dedup.save_part(sort_removals(rows), folder, i)


def _bloom_task(inputs, folder, unit, settings) -> dict:
    """The one-pass mode: every input partition in order through one Bloom filter."""
    import logging

    bf = blooming.BloomFilter(settings.bloom_capacity, settings.bloom_fp)
    logging.getLogger(__name__).info("bloom filter: %d bits (%.1f MiB), %d hash functions", bf.m,
                                     bf.nbytes / 2**20, bf.k)
    outputs, rows_out, spans = [], 0, 0
    for i in range(len(inputs)):
        rows = span_rows(inputs.read(i), i, unit, settings.min_span_words)
        spans += len(rows)
        firsts, later = split_firsts(rows)
        seen = bf.contains(firsts["hash"].to_numpy())
        bf.add(firsts["hash"].to_numpy()[~seen])
        removed = pd.concat([later, pd.DataFrame({"doc": firsts["doc"][seen], "span": firsts["span"][seen],
                                                  "first_doc": np.int64(-1)})], ignore_index=True)
        stats = dedup.save_part(sort_removals(removed), folder, i)
        outputs += stats.get("outputs", [])
        rows_out += stats["rows"]
    info = bf.describe()
    info["fill"] = round(bf.fill(), 6)
    return {"partition": 0, "rows": rows_out, "outputs": outputs, "spans": spans, "bloom": info}


def _audit_task(inputs, i, removals_path, folder, unit, min_words) -> dict:
    df = inputs.read(i)
    _, table = apply_removals(df, dedup.load_part(removals_path), unit, min_words)
    stats = dedup.save_part(table, folder, i)
    stats.update(audit_stats(table))
    stats["bytes_in"] = text_bytes(df)
    return stats


def _final_task(inputs, i, removals_path, unit, min_words) -> pd.DataFrame:
    return apply_removals(inputs.read(i), dedup.load_part(removals_path), unit, min_words)[0]


# --------------------------------------------------------------------------- the stages


class SpanDedupStage(Stage):
    """Shared by the three units; a subclass names its ``unit``."""

    unit: ClassVar[str]
    Settings = SpanDedupSettings

    def run(self, settings, ctx) -> dict:
        import dask
        import dask.dataframe as dd

        from curate.stages import dataset

        unit = self.unit
        ddf = dataset.read_dataset(ctx.input, ctx.io, rejects_dir=ctx.output)
        inputs = dedup.Inputs(ctx, ddf)
        steps = dedup.Steps(ctx, self.name)
        removals = steps.path("removals")
        extra: dict = {"unit": unit, "mode": "bloom" if settings.bloom else "shuffle"}
        if settings.bloom:
            info = steps.run("removals", lambda folder: [dask.delayed(_bloom_task, pure=False)(
                inputs, folder, unit, settings)])
            extra["spans"] = info["parts"][0]["spans"]
            extra["bloom"] = info["parts"][0]["bloom"]
            if extra["bloom"]["inserted"] > settings.bloom_capacity:
                import logging

                logging.getLogger(__name__).warning(
                    "%s: %d distinct spans in a Bloom filter sized for %d: its false-positive rate at the end is "
                    "%.2g (target %g); raise --bloom-capacity", ctx.output, extra["bloom"]["inserted"],
                    settings.bloom_capacity, extra["bloom"]["false_positive_rate_at_end"], settings.bloom_fp)
        else:
            local = steps.side("local", "spans")
            task = dask.delayed(_spans_task, pure=False)
            info = steps.run("spans", lambda folder: [task(part, i, folder, local, unit, settings.min_span_words)
                                                      for i, part in enumerate(ddf.to_delayed())],
                             extra_dirs=(local,))
            extra["spans"] = int(sum(p.get("spans", 0) for p in info["parts"]))

            def later(folder):
                shuffled = dedup.read_parts(steps.path("spans")).shuffle(on="hash")
                t = dask.delayed(_later_task, pure=False)
                return [t(part, folder, i) for i, part in enumerate(shuffled.to_delayed())]

            steps.run("later", later)

            def merge(folder):
                routed = dedup.route_to_input(dedup.read_parts(steps.path("later")), "doc", len(inputs))
                paths = dedup.list_parts(local)
                t = dask.delayed(_removals_task, pure=False)
                return [t(r, paths[i], folder, i) for i, r in enumerate(routed)]

            steps.run("removals", merge)

        paths = dedup.list_parts(removals)
        audit = steps.folder(dedup.DUPLICATES)
        t = dask.delayed(_audit_task, pure=False)
        info = steps.run("audit", lambda folder: [t(inputs, i, paths[i], audit, unit, settings.min_words)
                                                  for i in range(len(inputs))], extra_dirs=(audit,))
        extra.update(merge_stats(info["parts"]))
        final = dask.delayed(_final_task, pure=True)
        parts = [final(inputs, i, paths[i], unit, settings.min_words) for i in range(len(inputs))]
        marked = dd.from_delayed(parts, meta=inputs.meta, divisions=[None] * (len(parts) + 1), verify_meta=False)
        return dataset.write_dataset(marked, ctx, stage=self.name, settings=settings, reject_columns=("id",),
                                     extra={"dedup": extra, "steps": steps.timings}, records=steps.records())


class ParagraphDedupStage(SpanDedupStage):
    """Remove paragraphs (blank-line separated) seen in an earlier document; drop documents left too short."""

    name = "paragraph_dedup"
    unit = "paragraph"
    cli = ("dedup", "paragraphs")
    help = "remove each paragraph already seen in an earlier document (Dolma's rule); drop documents left too short"


class LineDedupStage(SpanDedupStage):
    """Remove lines seen in an earlier document; drop documents left too short."""

    name = "line_dedup"
    unit = "line"
    cli = ("dedup", "lines")
    help = "remove each line already seen in an earlier document (navigation, banners); drop documents left too short"


class SentenceDedupStage(SpanDedupStage):
    """Remove three-sentence spans seen in an earlier document (C4's rule); drop documents left too short."""

    name = "sentence_dedup"
    unit = "sentence"
    cli = ("dedup", "sentences")
    help = "remove each three-sentence span already seen in an earlier document (C4's rule); drop documents " \
           "left too short"
