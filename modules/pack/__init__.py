"""``pack``: tokenized documents -> fixed-length training rows (BOS-aligned best-fit-decreasing packing).

Input: a token set written by ``curate tokenize`` (``modules/tokenize/read.py``). Output directory::

    part_00000.parquet ...      one file per input pair (named after it: train_00000, validation_00000 ...)
    _docs/part_00000.parquet    its document sidecar: the input pair's, copied byte for byte
    _rejects/part_00000.parquet documents longer than a row under --long-docs drop (pair, document,
                                tokens, _reason = too_long, _detail); in the side folder OUT.side/
    _manifest.json               settings, ids (bos, pad, eod), counts, fill ratio, per-file rows/tokens
    _SUCCESS                    written last

Every document becomes a *segment* ``[BOS] content``: the BOS is the token set's own when tokenize
ran with ``--add-bos``, else pack adds it (``bos_added`` in the manifest). A tokenizer without a
BOS token (tiktoken's cl100k_base) uses its end-of-document token as the separator, GPT-2 style;
then the EOD tokenize appended at the end of each document is dropped (``eod_stripped``): the next
segment's BOS is that same token, and a row must hold exactly one per document. ``--bos-id``
overrides.

Rows (Parquet, zstd, row groups of about 2**20 tokens), one record per row::

    column             Arrow type     meaning
    input_ids          list<uint32>   exactly seq_length ids (list<uint16> with --dtype uint16, refused
                                      when the vocabulary has more than 65,535 ids)
    loss_mask          list<uint8>    seq_length flags: 1 where target_ids is a real next token
    doc_starts         list<uint32>   position of each segment's BOS, ascending, the first is 0
    doc_index          list<int64>    per segment: the document's number in its input pair (0-based)
    doc_offset         list<int64>    per segment: where its content starts in the document's tokens
                                      (the document without its BOS; 0 unless the document was split
                                      or windowed)
    valid_token_count  int32          tokens before the padding: the segments' lengths summed
    pack_id            int64          (input file number << 32) | row number in the file: unique

``input_ids[valid_token_count:]`` is all ``pad_id``. ``target_ids`` is not stored; it is
``input_ids`` shifted left by one: ``target_ids[i] = input_ids[i+1]`` for ``i < seq_length - 1``
and ``pad_id`` at the end. ``loss_mask[i] = 1`` exactly when ``i + 1 < valid_token_count`` and
``i + 1`` is not in ``doc_starts``: the model learns every next token of a document (its EOD
included) and never a prediction across a document boundary or into the padding. Per-document
attention (cu_seqlens, position ids) follows from ``doc_starts`` and ``valid_token_count``.

Producer invariant, checked on every row before its row group is written (:func:`check_rows`, the
same function ``curate verify`` runs on the files): ``len(doc_starts)`` equals the number of BOS ids
in ``input_ids[:valid_token_count]`` and each start holds a BOS; ``valid_token_count`` is in
``1..seq_length`` and everything after it is ``pad_id``; ids are below the vocabulary size;
``loss_mask`` is the function of ``doc_starts`` and ``valid_token_count`` above. A violation fails
the run naming the file and row (a BOS id inside a document's text, for one).

Documents. ``_docs/P.parquet`` is the input pair P's document sidecar (``id``, and ``url`` when the
dataset had one; format in ``modules/tokenize/writer.py``) copied unchanged: row k is document k of
the pair, the number ``doc_index`` holds. So segment j of a row is the document
``_docs/P.parquet[doc_index[j]]``, its tokens ``input_ids[doc_starts[j] + 1 : next start or
valid_token_count]`` are that document's content from ``doc_offset[j]`` on, and this resolves from
the pack output alone. A copy rather than a ``doc_id`` list column: the rows stay what a training
loader reads (no strings per segment, repeated for every piece of a split or windowed document),
the sidecar keeps its checksum from tokenize (the same file, verifiably), and it lives in
``_docs/`` so ``DIR/*.parquet`` globs and Parquet dataset readers (which skip ``_`` paths) see rows
only. ``curate verify`` checks it: present, its checksum, one row per document of the input pair
(``files[].documents``), every ``doc_index`` a row of it, and every document of it in some row
unless dropped (``files[].dropped``). A token set written before sidecars gives a pack output
without them (``docs_columns`` null in the manifest; verify notes it).

Long documents (a segment longer than ``seq_length``): ``split`` cuts the content into consecutive
chunks of ``seq_length - 1`` tokens, each behind its own BOS (full chunks fill a row alone, the last
one is packed like any document); ``window`` emits full rows ``[BOS] content[o : o + seq_length - 1]``
for ``o = 0, stride, 2*stride, ...`` and a last window ending at the document's end (overlapping
tokens are trained on more than once, as in the OpenGenome2 recipe); ``drop`` rejects the document
(reason ``too_long``). The manifest counts each.

Packing. Segments are sorted by length, longest first (equal lengths in a seeded pseudo-random
order: splitmix64 of document, offset and --seed), and each goes into the open row with the
least room that still fits it (best fit; equal room: the older row), else into a new row. Rows are
then written in a seeded random order (so a file is not sorted by length). The result depends only
on the pair's tokens, the settings and the file's number: not on the cluster, its size or timing.

How far from optimal. Per partition (input pair) best-fit decreasing needs at most
``11/9 * OPT_p + 4`` rows, OPT_p the fewest rows any packing of that pair's segments needs (Johnson
1973; FFD's tight ``11/9 * OPT + 6/9`` is Dósa 2007). Against one packing of the whole corpus,
packing pairs separately guarantees only what every fit rule does: no two rows of a pair are both at
most half full, so the rows number fewer than ``2 * tokens / seq_length + pairs``. The real loss
depends on how different the pairs' length distributions are (a pair of only 0.6-row documents and
another of only 0.4-row ones lose a third of a row per document; packed together they fill every
row): after ``curate shuffle`` every pair samples the same distribution and the loss is a
partly-filled row or so per pair. Measured (README, ``jobs/bench_pack.py``): 99.98-99.99% fill in 16
partitions against 100.00% in one, on 200,000 long-tailed documents.

Memory: per pair, the index (12 bytes per document), the segment layout (about 48 bytes per
segment) and one row group at a time; the tokens are memory-mapped (``modules/tokenize/read.py``).
"""

from __future__ import annotations

import logging
import os
import time

import numpy as np
import pandas as pd

from curate.stages.errors import DataError, SettingsError
from curate.stages.pack.checks import (
    MAX_ROW_PROBLEMS,
    verify,
)
from curate.stages.pack.layout import (
    Layout,
    best_fit_decreasing,
    layout,
    segments,
)
from curate.stages.pack.plan import (
    COLUMNS,
    LONG_DOCS,
    ROW_GROUP_TOKENS,
    TOO_LONG,
    UINT16_MAX_VOCAB,
    PackPlan,
    PackSettings,
    resolve_plan,
)
from curate.stages.pack.rows import (
    _assert_rows,
    assemble,
    check_rows,
    content_of,
    loss_mask_for,
    pack_frame,
    pack_ids,
    rows_frame,
)
from curate.stages.stage import Stage

__all__ = [
    "assemble", "best_fit_decreasing", "check_rows", "COLUMNS", "content_of", "Layout", "layout", "LONG_DOCS",
    "loss_mask_for", "MAX_ROW_PROBLEMS", "pack_frame", "pack_ids", "pack_pair", "PackPlan", "PackSettings",
    "PackStage", "resolve_plan", "ROW_GROUP_TOKENS", "row_schema", "rows_frame", "segments", "TOO_LONG",
    "UINT16_MAX_VOCAB", "verify",
]


log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- one pair (a task)


def row_schema(dtype: str):
    import pyarrow as pa

    return pa.schema([
        ("input_ids", pa.list_(pa.uint16() if dtype == "uint16" else pa.uint32())),
        ("loss_mask", pa.list_(pa.uint8())),
        ("doc_starts", pa.list_(pa.uint32())),
        ("doc_index", pa.list_(pa.int64())),
        ("doc_offset", pa.list_(pa.int64())),
        ("valid_token_count", pa.int32()),
        ("pack_id", pa.int64()),
    ])


def _table(arrays, doc, off, ids_of_rows, dtype: str):
    """A pyarrow table straight from the row arrays (no per-row Python objects)."""
    import pyarrow as pa

    ids, valid, pos, counts, mask = arrays
    n, seq = ids.shape
    fixed = pa.array(np.arange(0, n * seq + 1, seq, dtype=np.int32))
    seg = pa.array(np.r_[0, np.cumsum(counts)].astype(np.int32))
    return pa.Table.from_arrays([
        pa.ListArray.from_arrays(fixed, pa.array(ids.reshape(-1))),
        pa.ListArray.from_arrays(fixed, pa.array(mask.reshape(-1))),
        pa.ListArray.from_arrays(seg, pa.array(pos.astype(np.uint32))),
        pa.ListArray.from_arrays(seg, pa.array(doc.astype(np.int64))),
        pa.ListArray.from_arrays(seg, pa.array(off.astype(np.int64))),
        pa.array(valid.astype(np.int32)),
        pa.array(ids_of_rows),
    ], schema=row_schema(dtype))


def pack_pair(ts, file_no: int, plan: PackPlan, out, run: str) -> dict:
    """Pack input pair ``file_no`` of token set ``ts`` into ``<pair>.parquet``, journaled; its stats."""
    import pyarrow.parquet as pq

    from curate.stages.dataset import DETAIL, REASON, REJECTS
    from curate.stages.tokenize.docs import docs_dir_name
    from curate.stages.tokenize.read import document_bounds

    started = time.perf_counter()
    pair = ts.pairs[file_no]
    name = f"{pair.name}.parquet"
    rejects = f"{REJECTS}/{pair.name}.parquet"
    docs_rel = docs_dir_name(name) if ts.docs_columns else None
    out.intend(pair.name, [name, rejects, *([docs_rel] if docs_rel else [])])
    index = ts.index(pair)
    tokens = ts.tokens(pair, index)
    starts, lengths = document_bounds(index)
    cstart, clen = content_of(starts, lengths, plan)
    if plan.has_bos and len(lengths):
        firsts = np.asarray(tokens[starts[lengths > 0]])
        if (firsts != plan.bos_id).any():
            k = int(np.flatnonzero(lengths > 0)[np.argmax(firsts != plan.bos_id)])
            raise DataError(f"{ts.path(pair.name + '.bin')}: document {k} does not start with the BOS id "
                            f"{plan.bos_id} the manifest promises (add_bos)")
    lay = layout(clen, plan, file_no)
    step = max(1, ROW_GROUP_TOKENS // plan.seq_length)
    records = []
    valid_tokens = 0
    with out.open(name) as sink:
        writer = pq.ParquetWriter(sink, row_schema(plan.dtype), compression="zstd")
        try:
            for r0 in range(0, lay.rows, step):
                r1 = min(r0 + step, lay.rows)
                arrays = assemble(lay, r0, r1, cstart, tokens, plan)
                _assert_rows(arrays, plan, out.path(name), file_no, r0)
                a, b = np.searchsorted(lay.row, [r0, r1])
                writer.write_table(_table(arrays, lay.doc[a:b], lay.offset[a:b], pack_ids(file_no, r0, r1),
                                          plan.dtype))
                valid_tokens += int(arrays[1].sum())
        finally:
            writer.close()
    records.append(sink.record)
    if docs_rel:
        data, table = ts.docs(pair)
        records.append({**out.write_bytes(docs_rel, data), "rows": table.num_rows})
    dropped = {}
    if len(lay.dropped):
        frame = pd.DataFrame({
            "pair": pair.name, "document": lay.dropped.astype(np.int64),
            "tokens": lengths[lay.dropped].astype(np.int64),
            REASON: TOO_LONG,
            DETAIL: [f"{int(c) + 1} tokens with its BOS > seq_length {plan.seq_length}" for c in clen[lay.dropped]],
        })
        records.append({**out.write_frame(rejects, frame, "parquet")})
        dropped[TOO_LONG] = len(lay.dropped)
    seconds = round(time.perf_counter() - started, 3)
    stats = {
        "partition": file_no, "in": int(len(lengths)), "out": int(len(lengths) - len(lay.dropped)),
        "dropped": dropped,
        "file": {"name": name, "pair": pair.name, "set": pair.set, "rows": lay.rows,
                 "valid_tokens": valid_tokens, "segments": int(len(lay.doc)),
                 "long_documents": lay.long_documents, "input_tokens": int(lengths.sum()),
                 "documents": int(len(lengths)), "dropped": int(len(lay.dropped)), "docs": docs_rel},
        "seconds": seconds,
    }
    out.record_done(pair.name, run, records, stats=stats)
    return {**stats, "outputs": records}


# --------------------------------------------------------------------------- the stage


class PackStage(Stage):
    """Pack a token set (curate tokenize's output) into fixed-length rows: Parquet, one file per pair."""

    name = "pack"
    needs = ()

    def columns(self, settings):
        from curate.stages.stage import Columns

        return Columns(unknown=True)  # a token set in, packed rows or shards out: no dataset columns
    Settings = PackSettings
    help = "pack tokenized documents into rows of exactly --seq-length tokens (Parquet)"
    reads_raw_files = True  # a token set, not a document dataset
    reads, writes = ("tokens",), "rows"

    def check(self, settings: PackSettings, inputs) -> None:
        from curate.stages.tokenize.read import one_input, open_token_set

        spec = one_input(inputs, self.name)
        if "://" in spec or os.path.exists(spec):  # only the manifest is read: the ids against the vocabulary
            resolve_plan(settings, open_token_set(spec, settings.input_prefix, allow_incomplete=True))

    def check_planned_input(self, settings: PackSettings, planned) -> None:
        # the token set a tokenize earlier in the job will write: the same refusals as check's, before
        # that tokenize runs (a bos_id outside the vocabulary was refused only after it had)
        if planned is None:
            return
        if settings.input_prefix is not None and settings.input_prefix != planned.prefix:
            raise SettingsError(f"input_prefix {settings.input_prefix!r}: the tokenize before it writes the token set "
                                f"{planned.prefix!r}")
        resolve_plan(settings, planned)

    def run(self, settings: PackSettings, ctx) -> dict:
        import dask

        from curate.stages import dataset
        from curate.stages.output import Output
        from curate.stages.tokenize.read import one_input, open_token_set

        started = time.time()
        ts = open_token_set(one_input(ctx.input, self.name), settings.input_prefix, ctx.io.allow_incomplete)
        plan = resolve_plan(settings, ts)
        if ts.docs_columns is None:
            log.warning("pack: %s has no document sidecars (written before curate recorded them): the rows "
                        "cannot be traced to document ids", ts.url)
        out = Output.at(ctx.output)
        out.begin(dataset.stage_owner(ctx, self.name))
        run = ctx.fingerprint
        listing = out.listing()
        done = {}
        if not ctx.force:
            for i, pair in enumerate(ts.pairs):
                rec = out.finished(pair.name, run, listing)
                if rec is not None:
                    done[i] = {**rec["stats"], "outputs": rec["files"]}
        if done:
            log.info("pack: %d of %d pairs already packed; skipped", len(done), len(ts.pairs))
        tasks = [dask.delayed(pack_pair, pure=False)(ts, i, plan, out, run, dask_key_name=f"pack-{i:05d}")
                 for i in range(len(ts.pairs)) if i not in done]
        computed = list(ctx.run_compute(*tasks)) if tasks else []
        stats = sorted([*done.values(), *computed], key=lambda s: s["partition"])
        extra = _manifest_extra(ts, settings, plan, stats, len(done))
        return dataset.finish_output(ctx, stage=self.name, settings=settings, partition_stats=stats,
                                     schema=None, started=started, extra=extra, run=run)


def _manifest_extra(ts, settings, plan: PackPlan, stats, resumed: int) -> dict:
    files = [s["file"] for s in stats]
    rows = sum(f["rows"] for f in files)
    valid = sum(f["valid_tokens"] for f in files)
    total = rows * plan.seq_length
    sets: dict[str, dict] = {}
    for f in files:
        s = sets.setdefault(f["set"], {"files": 0, "rows": 0, "valid_tokens": 0})
        s["files"] += 1
        s["rows"] += f["rows"]
        s["valid_tokens"] += f["valid_tokens"]
    return {
        "format": "packed-rows",
        "row_schema": {f.name: str(f.type) for f in row_schema(plan.dtype)},
        "seq_length": plan.seq_length,
        "dtype": plan.dtype,
        "bos_id": plan.bos_id,
        "pad_id": plan.pad_id,
        "eod_id": ts.eod_id,
        "bos_added": not plan.has_bos,
        "eod_stripped": plan.strip_eod,
        "vocab_size": ts.vocab_size,
        "tokenizer": {"name": ts.tokenizer},
        "long_docs": plan.long_docs,
        "stride": plan.stride if plan.long_docs == "window" else None,
        "seed": plan.seed,
        "totals": {
            "rows": rows, "tokens": total, "valid_tokens": valid, "pad_tokens": total - valid,
            "fill_ratio": round(valid / total, 6) if total else None,
            "documents": int(sum(s["in"] for s in stats)),
            "segments": int(sum(f["segments"] for f in files)),
            "long_documents": int(sum(f["long_documents"] for f in files)),
            "input_tokens": int(sum(f["input_tokens"] for f in files)),
        },
        "sets": sets,
        "files": files,
        "resumed_partitions": resumed,
        "input_token_set": {"url": ts.url, "prefix": ts.prefix, "fingerprint": ts.fingerprint},
        "docs_columns": list(ts.docs_columns) if ts.docs_columns else None,
        "target_ids": "input_ids shifted left by one, pad_id last; loss_mask marks the real ones",
    }


# --------------------------------------------------------------------------- the verify gate


