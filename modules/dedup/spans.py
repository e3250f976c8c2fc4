"""paragraph_dedup, line_dedup, sentence_dedup: repeated paragraphs, lines or three-sentence spans
removed from every document but the first that holds them.

The rule (Dolma's for paragraphs, C4's for three-sentence spans): documents are ordered by document
number (input partition, then row); a span (a paragraph, a line, or three consecutive sentences: see
:mod:`.segments` for how text is cut and how spans are compared) stays in the first place it occurs,
the smallest (document, span index), and is removed from every later place, in other documents and
later in the same document. Spans of fewer than ``--min-span-words`` words ("Home", "Share", "}") are
never hashed, so never a later occurrence: they stay wherever they are and never make another span
removed. A document that lost a span and is left with fewer than ``--min-words`` words (or none) is
dropped with the unit's reason (``paragraph_duplicate``, ``line_duplicate``, ``span_duplicate``); the
others keep their text minus the removed spans.

No span is cut where it is the copy that stays. Three-sentence spans overlap, so the later occurrence
of one span shares sentences with the windows around it, which can be first occurrences: in "A. B. A.
B. A. B." ABA occurs at 0 and 2, BAB at 1 and 3, and cutting sentences 2 to 5 would leave "A. B.",
where neither survives; across documents, e1 = S1 S2 S3, e2 = S1 S2 S3 S4, e3 = S2 S3 S4 S0: e2 holds
the first S2 S3 S4, which e3 repeats, and e3 holds S3 S4 S0, which occurs nowhere else, so cutting
every later occurrence whole would lose both. So a sentence is removed only when a later occurrence
covers it and no other window of its document does: every other window is the first occurrence of its
span (repeated or not) or too short to be hashed, and stays whole (:func:`.segments.removed_units`,
computed per document from which of its windows are later occurrences): "A. B. A. B.", e2 = S2 S3 S4,
e3 = S3 S4 S0. What this guarantees, for any input and partitioning (a test checks it by brute force
on periodic and random text, in both modes):

- every distinct span of the input (hashed or too short to be) stays whole in the first document that
  holds it, unless that document is dropped for ``--min-words``; a document that holds the first
  occurrence of a hashed span that repeats never is (``short_documents_kept``), so no repeat loses
  every copy, and a span that occurs once goes only with a document too short to keep;
- every removed unit belongs to a later occurrence of a span whose first occurrence stays whole;
- every later occurrence is cut, unless the other windows of its document cover all of its units;
  those left whole are counted (``later_spans_left_whole``).

The price is at the edges of a repeated passage of sentences: the sentence before a copy and the
copy's first two (its last two and the sentence after it) are a span of their own, which stays whole
where it first occurs. So a later copy whose neighbours no earlier copy had keeps its first two and
last two sentences (all of a copy of fewer than five sentences); C4's rule removes the copy whole and
loses those edge spans.

Lines and paragraphs never overlap, so there every later occurrence goes, the plain rule; but the
first occurrences matter there too: a document that holds the first occurrence of a repeated span is
never dropped for ``--min-words`` (``short_documents_kept``), since it is where that span stays.

Identify, then remove, every step Parquet under ``OUT.side/_work/``:

1. ``spans`` (one task per input partition): each span's 64-bit hash, document number and span index.
   Within the partition only the first row of each hash is kept for the shuffle, with ``repeats``
   (the partition holds the hash again); the later ones are already known to be removed and go to
   ``local/`` with the document they repeat.
2. ``later``: the first rows shuffled on the hash; per hash the smallest (document, span) stays, the
   other partitions' rows are removed, and the first gets a ``keep`` row when the span repeats (another
   partition's row, or its own ``repeats``): its document is never dropped for ``--min-words``. Which
   units go needs no such row: what is not a later occurrence stays whole. A hash has at most one row
   per input partition here, so a span copied into every document of the corpus costs one row per
   partition, not per document.
3. ``removals``: the removed and ``keep`` rows routed back to their input partition (one range shuffle)
   and merged with ``local/``: ``(doc, span, first_doc, keep)`` per input partition, sorted.
4. ``audit`` (one task per input partition): each changed document's removed spans and bytes, words
   left and whether it is dropped, in ``OUT.side/_duplicates/`` (``id``, ``removed_spans``,
   ``removed_bytes``, ``bytes``, ``words_left``, ``dropped``), and the totals for the manifest.
5. the dataset: each input partition rewritten without its removed units.

A task holds one input partition, or one shuffled partition of compact rows (24 bytes per span), so a
worker's memory is set by ``--blocksize``, never by the corpus. Hashes are 64-bit: two different spans
share one with probability about ``n^2 / 2^65`` among ``n`` distinct spans (0.03 for a billion), and then
the later one is removed as a repeat.

``--bloom``: one task streams the input partitions in order through a Bloom filter of the stated size
(:mod:`.bloom`): a span is removed when the filter has seen its hash (inside one partition the first
occurrence is found exactly, as in step 1). The filter cannot say where a span first occurred, so a
second filter of the same size collects the spans met again, and once every partition went through,
each partition's first occurrences (kept aside in ``_work/bloom/``) that it holds get their ``keep``
rows. It needs no shuffle, but it is one task, its memory is the two filters' (``--bloom-capacity``
distinct spans at ``--bloom-fp``: 7.2 bytes per span at 1e-6), and a false positive of the first filter
removes a span that is not a repeat (one of the second only keeps a short document that could have
gone). So before each partition's lookups the first filter's rate is estimated from its fill
(``fill ** k``) and the run stops, naming ``--bloom-capacity``, once it is above ``--bloom-max-fp``; the
manifest records both filters and the rate of the last lookups. Without false positives it removes
exactly what the default mode removes.
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
        "help": "--bloom: distinct spans the filter is sized for (two filters, 7.2 bytes per span at 1e-6); beyond, "
                "the rate grows until --bloom-max-fp stops the run", "metavar": "N"})
    bloom_max_fp: float = field(default=1e-4, metadata={
        "help": "--bloom: stop with an error before a lookup when the filter's false-positive rate (estimated from "
                "its fill) is above this: a false positive removes a span that never repeats", "metavar": "P"})

    def __post_init__(self):
        check_range(self, "min_span_words", 1)
        check_range(self, "min_words", 0)
        check_range(self, "bloom_capacity", 1)
        for name in ("bloom_fp", "bloom_max_fp"):
            if not 0.0 < getattr(self, name) < 1.0:
                raise SettingsError(f"{name} must be between 0 and 1 (exclusive); got {getattr(self, name)!r}")
        if self.bloom and self.bloom_max_fp < self.bloom_fp:
            raise SettingsError(f"bloom_max_fp {self.bloom_max_fp:g} is below bloom_fp {self.bloom_fp:g}, the rate "
                                f"the filter is sized to reach at bloom_capacity: raise bloom_max_fp or lower bloom_fp")
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
    """(the first row of each hash, by (doc, span), with ``repeats``: the hash has another row here, or
    a row of it said so; the later rows as removals ``(doc, span, first_doc, keep=False)``)."""
    rows = rows.sort_values(["hash", "doc", "span"], kind="stable", ignore_index=True)
    later = rows["hash"].duplicated().to_numpy()
    heads = np.flatnonzero(~later)
    group = np.cumsum(~later) - 1
    repeats = np.diff(np.r_[heads, len(rows)]) > 1
    if "repeats" in rows.columns and len(rows):
        repeats |= np.bitwise_or.reduceat(rows["repeats"].to_numpy(dtype=bool), heads)
    first_doc = rows["doc"].to_numpy()[heads[group]] if len(rows) else np.zeros(0, dtype=np.int64)
    removed = pd.DataFrame({"doc": rows["doc"].to_numpy()[later], "span": rows["span"].to_numpy()[later],
                            "first_doc": np.asarray(first_doc, dtype=np.int64)[later], "keep": False})
    firsts = rows.iloc[heads][["hash", "doc", "span"]].reset_index(drop=True).assign(repeats=repeats)
    return firsts, sort_removals(removed)


def anchor_rows(firsts: pd.DataFrame) -> pd.DataFrame:
    """The first occurrences among ``firsts`` of spans that repeat, as rows that keep their documents
    from the ``--min-words`` drop ``(doc, span, first_doc=doc, keep=True)``."""
    a = firsts[firsts["repeats"].to_numpy(dtype=bool)]
    return pd.DataFrame({"doc": a["doc"].to_numpy(), "span": a["span"].to_numpy(),
                         "first_doc": a["doc"].to_numpy(), "keep": True})


def sort_removals(rows: pd.DataFrame) -> pd.DataFrame:
    return rows.astype({"doc": np.int64, "span": np.int32, "first_doc": np.int64, "keep": bool}).sort_values(
        ["doc", "span", "keep"], kind="stable", ignore_index=True)


def apply_removals(df: pd.DataFrame, rows: pd.DataFrame, unit: str, min_words: int):
    """(``df`` with the units of the later occurrences in ``rows`` cut from their texts, except those
    another window of the document needs (:func:`.segments.removed_units`), and the documents left too
    short marked dropped; the audit: one row per changed document; counts for the manifest). A
    document with a ``keep`` row holds the first occurrence of a repeated span and is never dropped:
    it is where that span stays."""
    from curate.stages.dataset import DETAIL, STRING, mark_dropped

    reason = REASONS[unit]
    docs = rows["doc"].to_numpy(dtype=np.int64)
    spans = rows["span"].to_numpy(dtype=np.int64)
    keep = rows["keep"].to_numpy(dtype=bool)
    starts = np.flatnonzero(np.r_[True, docs[1:] != docs[:-1]]) if len(docs) else np.zeros(0, dtype=np.int64)
    ends = np.r_[starts[1:], len(docs)]
    texts = df["text"].to_numpy(dtype=object, na_value=None).copy()
    audit = {"row": [], "removed_spans": [], "removed_bytes": [], "bytes": [], "words_left": [], "holds": []}
    left_whole = 0
    for a, b in zip(starts.tolist(), ends.tolist()):
        later = spans[a:b][~keep[a:b]]
        if not len(later):
            continue
        row = int(docs[a] & dedup.ROW_MASK)
        text = texts[row]
        cut = segments.units(text, unit)
        removed = segments.removed_units(later, len(cut), unit)
        # a later occurrence that the document's other windows cover whole stays (counted, never silent)
        hit = np.isin(later[:, None] + np.arange(segments.width(unit)), removed).any(axis=1)
        left_whole += int((~hit).sum())
        if not len(removed):
            continue
        new = segments.cut_ranges(text, segments.removal_ranges(cut, removed))
        texts[row] = new
        before = segments.utf8_len(text)
        audit["row"].append(row)
        audit["removed_spans"].append(int(hit.sum()))
        audit["removed_bytes"].append(before - segments.utf8_len(new))
        audit["bytes"].append(before)
        audit["words_left"].append(len(new.split()))
        audit["holds"].append(bool(keep[a:b].any()))
    audit = pd.DataFrame(audit)
    short = audit["words_left"].to_numpy() < max(min_words, 1)
    holds = audit["holds"].to_numpy(dtype=bool)
    drop = short & ~holds
    counts = {"later_spans_left_whole": left_whole, "short_documents_kept": int((short & holds).sum())}
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
    return out, table, counts


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
    # what the rule kept for first occurrences: units (span dedup) or tokens (substring dedup)
    keys += tuple(k for k in ("later_spans_left_whole", "repeated_tokens_kept", "short_documents_kept")
                  if any(k in p for p in parts))
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
    """Per hash: the smallest (doc, span) is the first occurrence (a ``keep`` row when the span
    repeats, here or inside its own partition); the other partitions' rows are removed."""
    firsts, removed = split_firsts(part)
    return dedup.save_part(sort_removals(pd.concat([removed, anchor_rows(firsts)], ignore_index=True)), folder, i)


def _removals_task(routed, local_path, folder, i) -> dict:
    rows = pd.concat([routed[["doc", "span", "first_doc", "keep"]], dedup.load_part(local_path)], ignore_index=True)
    return dedup.save_part(sort_removals(rows), folder, i)


def check_bloom_rate(bf, settings, unit: str, where: str) -> None:
    """Stop before a lookup whose false-positive rate (estimated from the filter's fill) passes
    ``--bloom-max-fp``: past it, spans that never repeat would be removed as repeats."""
    rate = bf.estimated_rate()
    if rate > settings.bloom_max_fp:
        raise SettingsError(
            f"--bloom-capacity {settings.bloom_capacity}: too small for this input: after {bf.inserted:,} distinct "
            f"{unit} spans the Bloom filter would remove a span that never repeats with probability {rate:.2g}, "
            f"above --bloom-max-fp {settings.bloom_max_fp:g} (stopped before {where}); raise --bloom-capacity to "
            f"the input's distinct spans or more, or run without --bloom")


def _bloom_task(inputs, folder, side, unit, settings) -> dict:
    """The one-pass mode: every input partition in order through one Bloom filter (``seen``), then each
    partition's first occurrences checked against a second one (``repeated``: spans met again) to
    find the documents never to drop, as the shuffle's ``keep`` rows."""
    import logging

    bf = blooming.BloomFilter(settings.bloom_capacity, settings.bloom_fp)
    repeated = blooming.BloomFilter(settings.bloom_capacity, settings.bloom_fp)
    logging.getLogger(__name__).info("bloom filters: 2 x %d bits (%.1f MiB), %d hash functions", bf.m,
                                     bf.nbytes / 2**20, bf.k)
    spans, worst = 0, 0.0
    for i in range(len(inputs)):
        check_bloom_rate(bf, settings, unit, f"input partition {i}, {inputs.pieces[i].path}")
        worst = bf.estimated_rate()  # it only grows: the rate of this partition's lookups, the highest yet
        rows = span_rows(inputs.read(i), i, unit, settings.min_span_words)
        spans += len(rows)
        firsts, later = split_firsts(rows)
        h = firsts["hash"].to_numpy()
        seen = bf.contains(h)
        bf.add(h[~seen])
        again = h[seen | firsts["repeats"].to_numpy(dtype=bool)]
        repeated.add(again[~repeated.contains(again)])
        removed = pd.DataFrame({"doc": firsts["doc"][seen], "span": firsts["span"][seen], "first_doc": np.int64(-1),
                                "keep": False})
        new = firsts[~seen]
        # first occurrences wait (with their hash) until every later one has gone into ``repeated``
        candidates = pd.DataFrame({"doc": new["doc"], "span": new["span"], "first_doc": new["doc"], "keep": True,
                                   "hash": new["hash"]})
        dedup.save_part(pd.concat([later.assign(hash=np.uint64(0)), removed.assign(hash=np.uint64(0)), candidates],
                                  ignore_index=True), side, i)
    outputs, rows_out = [], 0
    for i in range(len(inputs)):
        part = dedup.load_part(dedup.part_path(side, i))
        keep = part["keep"].to_numpy(dtype=bool).copy()
        keep[keep] = repeated.contains(part["hash"].to_numpy(dtype=np.uint64)[keep])
        rows = part[~part["keep"].to_numpy(dtype=bool) | keep].drop(columns=["hash"])
        stats = dedup.save_part(sort_removals(rows), folder, i)
        outputs += stats.get("outputs", [])
        rows_out += stats["rows"]
    info = bf.describe()
    info["fill"] = round(bf.fill(), 6)
    info["false_positive_rate_at_last_lookup"] = worst
    info["max_false_positive_rate"] = settings.bloom_max_fp
    info["repeated_filter"] = {"inserted": repeated.inserted, "fill": round(repeated.fill(), 6),
                               "false_positive_rate_at_end": repeated.estimated_rate()}
    return {"partition": 0, "rows": rows_out, "outputs": outputs, "spans": spans, "bloom": info}


def _audit_task(inputs, i, removals_path, folder, unit, min_words) -> dict:
    df = inputs.read(i)
    _, table, counts = apply_removals(df, dedup.load_part(removals_path), unit, min_words)
    stats = dedup.save_part(table, folder, i)
    stats.update(audit_stats(table))
    stats.update(counts)
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

        from curate.stages import dataset

        unit = self.unit
        ddf = dataset.read_dataset(ctx.input, ctx.io, rejects_dir=ctx.output)
        inputs = dedup.Inputs(ctx, ddf)
        steps = dedup.Steps(ctx, self.name)
        removals = steps.path("removals")
        extra: dict = {"unit": unit, "mode": "bloom" if settings.bloom else "shuffle"}
        if settings.bloom:
            side = steps.side("bloom", "removals")
            info = steps.run("removals", lambda folder: [dask.delayed(_bloom_task, pure=False)(
                inputs, folder, side, unit, settings)], extra_dirs=(side,))
            extra["spans"] = info["parts"][0]["spans"]
            extra["bloom"] = info["parts"][0]["bloom"]
            if extra["bloom"]["inserted"] > settings.bloom_capacity:
                import logging

                logging.getLogger(__name__).warning(
                    "%s: %d distinct spans in a Bloom filter sized for %d: its false-positive rate reached %.2g "
                    "at the last lookup (target %g, --bloom-max-fp %g); raise --bloom-capacity", ctx.output,
                    extra["bloom"]["inserted"], settings.bloom_capacity,
                    extra["bloom"]["false_positive_rate_at_last_lookup"], settings.bloom_fp, settings.bloom_max_fp)
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
        info = steps.run("audit", lambda folder: [t(inputs.only(i), i, paths[i], audit, unit, settings.min_words)
                                                  for i in range(len(inputs))], extra_dirs=(audit,))
        extra.update(merge_stats(info["parts"]))
        marked = dataset.Made(_final_task, [(inputs.only(i), i, paths[i], unit, settings.min_words)
                                            for i in range(len(inputs))], inputs.meta)
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
