"""``shards``: a token set -> fixed-size token shards in the nanoGPT / JaxFormer layout.

Output directory::

    shard_val_000000.npy      the first --holdout-shards shards: the held-out split
    shard_train_000001.npy    then the training shards; the number counts on across both
    ...
    _docs/shard_val_000000.parquet  each shard's document sidecar: which document each token range is
    _manifest.json             shard size, dtype, eot id, per shard its split, tokens and first document
    _SUCCESS                  written last

Each shard is exactly what ``np.save(path, array)`` writes for a 1-D array (``.npy`` format 1.0):
the magic ``\\x93NUMPY``, version ``1 0``, a little-endian uint16 header length, the header dict
``{'descr': '<u2' or '<u4', 'fortran_order': False, 'shape': (n,), }`` padded with spaces to a
multiple of 64 bytes and ending in a newline, then ``n`` ids little-endian. ``np.load`` reads it,
and so does nanoGPT's loader (``np.load`` then ``astype``). ``n`` is ``--shard-tokens`` for every
shard but the last, which holds the rest. The dtype is uint16 when the vocabulary has at most 65,535
ids, else uint32 (``--dtype uint16`` with a larger vocabulary is refused).

The stream. The token set's documents, pair after pair in manifest order (one set of a ``--split``
token set: ``--input-set``), each followed by the end-of-text id (EOT) unless tokenize appended it
already (``eot_added`` in the manifest says which). So there is exactly one EOT between consecutive
documents and one after the last; a document may span two shards. Because every pair's stream
length is known from the manifest (its tokens, plus one per document when EOT is added), each shard
knows on the client which pairs and which of their tokens it holds: shards are independent tasks,
written in parallel, each journaled on its own (resume redoes only missing shards) and the files do
not depend on the cluster or its size.

Document sidecar (``_docs/<shard name>.parquet``, one per shard, written and journaled with it). A
document's *stream tokens* are its tokens followed by the EOT shards added (none when ``eot_added``
is false: then its own last token is the EOT). A Parquet table (zstd, no pandas metadata), one row
per document with stream tokens in the shard, in stream order, column by column::

    column  Arrow type  meaning
    id      string      the document's id (from the token set's sidecar, ``modules/tokenize/writer.py``)
    url     string      its url; only when the tokenized dataset had a ``url`` column
    start   int64       first position of its tokens in this shard (0 = the first id after the header)
    length  int64       how many of its stream tokens this shard holds (> 0)
    offset  int64       which of its stream tokens is at ``start`` (0 unless it began in the shard before)

Invariants (checked by ``curate verify``): the rows tile the shard, ``start`` of the first is 0,
each next one starts where the previous one ends and the lengths add up to the shard's tokens; a
first row with ``offset > 0`` continues the previous shard's last row (same id, its ``offset +
length``); every document of the streamed pairs has exactly one row with ``offset`` 0 across the
shards; the XXH3-128 is the manifest's. So token t of a shard belongs to the row whose ``[start,
start + length)`` holds it. It lives in ``_docs/`` so that globs of the shards (``shard_train_*``)
never meet it. A token set written before sidecars gives shards without them (``docs_columns`` null
in the manifest; verify notes it). A document without stream tokens would hold no position and so
have no row (verify then counts it missing); tokenize never writes one: every document it writes
ends with its EOD, or gets an EOT here.

Memory per task: the indexes of the pairs the shard touches, their document sidecars and one chunk
of ``CHUNK`` tokens; the shard is streamed into its file, never held whole.

The check of all this (``curate verify``) lives beside this module, in ``shards_verify``; ``verify``
and ``read_npy_header`` stay importable from here, where ``curate verify`` and the tests find them.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, field

import numpy as np

from curate.stages.errors import DataError, SettingsError
from curate.stages.shards_verify import (
    CHUNK,
    HOLDOUT_SPLIT,
    TRAIN_SPLIT,
    UINT16_MAX_VOCAB,
    read_npy_header as read_npy_header,
    verify as verify,
)
from curate.stages.stage import Stage, check_choice, check_range

log = logging.getLogger(__name__)

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]*$")


@dataclass(frozen=True)
class ShardsSettings:
    shard_tokens: int = field(default=100_000_000, metadata={"help": "tokens per shard", "metavar": "N"})
    holdout_shards: int = field(default=1, metadata={"help": "the first K shards are the held-out split",
                                                     "metavar": "K"})
    dtype: str = field(default="auto", metadata={
        "help": "auto: uint16 for vocabularies of at most 65,535 ids, else uint32",
        "choices": ("auto", "uint16", "uint32")})
    eot_id: int | None = field(default=None, metadata={
        "help": "end-of-text id between documents (default: the tokenizer's end-of-document id)", "metavar": "ID"})
    name: str = field(default="shard", metadata={"help": "file names: NAME_val_000000.npy ...", "metavar": "NAME"})
    input_prefix: str | None = field(default=None, metadata={
        "help": "the token set (tokenize --prefix) when the input directory holds several", "metavar": "NAME"})
    input_set: str | None = field(default=None, metadata={
        "help": "which set of a --split token set to shard (train, validation, test)", "metavar": "SET"})

    def __post_init__(self):
        check_range(self, "shard_tokens", lo=1)
        check_range(self, "holdout_shards", lo=0)
        check_choice(self, "dtype")
        check_range(self, "eot_id", lo=0)
        if not _NAME_RE.match(self.name):
            raise SettingsError(f"name must be letters, digits, '.' or '-'; got {self.name!r}")


@dataclass(frozen=True)
class Piece:
    """Part of one pair's stream that goes into a shard: stream positions [start, stop) of pair ``pair``."""

    pair: int
    start: int
    stop: int


@dataclass(frozen=True)
class ShardPlan:
    index: int
    name: str  # file name
    split: str
    tokens: int
    pieces: tuple[Piece, ...]


@dataclass(frozen=True)
class StreamPlan:
    dtype: str
    eot_id: int
    add_eot: bool
    vocab_size: int
    pairs: tuple  # PairInfo of the streamed pairs, in order


def shard_name(name: str, split: str, index: int) -> str:
    return f"{name}_{split}_{index:06d}.npy"


def stream_lengths(pairs, add_eot: bool) -> np.ndarray:
    return np.array([p.tokens + (p.documents if add_eot else 0) for p in pairs], dtype=np.int64)


def plan_shards(lengths: np.ndarray, shard_tokens: int, holdout: int, name: str) -> list[ShardPlan]:
    """Cut the concatenated streams of the pairs (``lengths`` each) into shards (pure)."""
    ends = np.cumsum(lengths)
    starts = ends - lengths
    total = int(ends[-1]) if len(ends) else 0
    shards = []
    for k in range(-(-total // shard_tokens)):
        a, b = k * shard_tokens, min((k + 1) * shard_tokens, total)
        first = int(np.searchsorted(ends, a, side="right"))
        last = int(np.searchsorted(starts, b, side="left"))
        pieces = tuple(Piece(i, max(a, int(starts[i])) - int(starts[i]), min(b, int(ends[i])) - int(starts[i]))
                       for i in range(first, last) if lengths[i] > 0)
        split = HOLDOUT_SPLIT if k < holdout else TRAIN_SPLIT
        shards.append(ShardPlan(k, shard_name(name, split, k), split, b - a, pieces))
    return shards


def stream_slice(tokens, doc_starts: np.ndarray, doc_lengths: np.ndarray, start: int, stop: int,
                 add_eot: bool, eot_id: int) -> np.ndarray:
    """Stream positions [start, stop) of one pair (pure): its tokens, with ``eot_id`` after every
    document when ``add_eot``. Without EOT the stream is the tokens themselves."""
    if not add_eot:
        return np.asarray(tokens[start:stop])
    # document j occupies stream positions [s_j, s_j + len_j], s_j = doc_start_j + j, its EOT last
    s = doc_starts + np.arange(len(doc_starts), dtype=np.int64)
    p = np.arange(start, stop, dtype=np.int64)
    j = np.searchsorted(s, p, side="right") - 1
    eot = p - s[j] == doc_lengths[j]
    src = np.where(eot, 0, p - j)
    out = np.asarray(tokens[src]).astype(np.int64)
    out[eot] = eot_id
    return out


def stream_documents(doc_starts: np.ndarray, doc_lengths: np.ndarray, start: int, stop: int, add_eot: bool):
    """The documents of one pair with stream tokens in its stream positions [start, stop) (pure):
    (their numbers in the pair, where each one's range begins relative to ``start``, its length, and
    which of its stream tokens that is). A document's stream tokens are its tokens, plus its EOT when
    ``add_eot``."""
    k = np.arange(len(doc_starts), dtype=np.int64)
    s = doc_starts + (k if add_eot else 0)
    e = s + doc_lengths + int(add_eot)
    doc = k[(s < stop) & (e > start)]
    a, b = np.maximum(s[doc], start), np.minimum(e[doc], stop)
    return doc, a - start, b - a, a - s[doc]


def write_npy_header(f, dtype, n: int) -> None:
    """The ``.npy`` 1.0 header np.save writes for a 1-D little-endian array of ``n`` ``dtype``."""
    from numpy.lib import format as npy

    npy.write_array_header_1_0(f, {"descr": npy.dtype_to_descr(np.dtype(dtype).newbyteorder("<")),
                                   "fortran_order": False, "shape": (n,)})


def write_shard(ts, shard: ShardPlan, plan: StreamPlan, out, run: str) -> dict:
    """One shard file and its document sidecar, streamed chunk by chunk, journaled; its stats."""
    import pyarrow as pa

    from curate.stages.tokenize import docs
    from curate.stages.tokenize.read import document_bounds

    started = time.perf_counter()
    docs_rel = docs.docs_dir_name(shard.name) if ts.docs_columns else None
    out.intend(shard.name[:-len(".npy")], [shard.name, *([docs_rel] if docs_rel else [])])
    dtype = np.dtype(plan.dtype).newbyteorder("<")
    written = 0
    eots = 0
    first_doc = None
    ranges = []  # per piece: the sidecar rows of its documents
    if docs_rel:
        columns = [*ts.docs_columns, "start", "length", "offset"]
        layout = docs.schema(ts.docs_columns, [(c, pa.int64()) for c in columns[-3:]])
    with out.open(shard.name) as f:
        write_npy_header(f, dtype, shard.tokens)
        for piece in shard.pieces:
            pair = plan.pairs[piece.pair]
            index = ts.index(pair)
            tokens = ts.tokens(pair, index)
            starts, lengths = document_bounds(index)
            if docs_rel:
                doc, begin, length, offset = stream_documents(starts, lengths, piece.start, piece.stop, plan.add_eot)
                rows = ts.docs(pair)[1].take(doc).append_column("start", pa.array(begin + written)) \
                    .append_column("length", pa.array(length)).append_column("offset", pa.array(offset))
                ranges.append(rows.select(columns).cast(layout))
            if first_doc is None:
                s = starts + (np.arange(len(starts)) if plan.add_eot else 0)
                first_doc = {"pair": pair.name, "document": int(np.searchsorted(s, piece.start, side="right")) - 1,
                             "offset": piece.start}
            for a in range(piece.start, piece.stop, CHUNK):
                chunk = stream_slice(tokens, starts, lengths, a, min(a + CHUNK, piece.stop), plan.add_eot,
                                     plan.eot_id)
                if len(chunk) and (int(chunk.min()) < 0 or int(chunk.max()) >= plan.vocab_size):
                    bad = int(chunk.min()) if int(chunk.min()) < 0 else int(chunk.max())
                    raise DataError(f"{ts.path(pair.name + '.bin')}: token id {bad} is outside the vocabulary "
                                    f"(size {plan.vocab_size})")
                eots += int((chunk == plan.eot_id).sum())
                f.write(chunk.astype(dtype).data)
                written += len(chunk)
        if written != shard.tokens:  # the plan and the pairs disagree: never leave a short shard
            raise DataError(f"{out.path(shard.name)}: wrote {written} tokens, planned {shard.tokens}")
    records = [f.record]
    if docs_rel:
        records.append(docs.write_table(out, docs_rel, pa.concat_tables(ranges)))
    stats = {"shard": shard.index, "name": shard.name, "split": shard.split, "tokens": written, "eot": eots,
             "first": first_doc, "docs": docs_rel, "seconds": round(time.perf_counter() - started, 3)}
    out.record_done(shard.name[:-len(".npy")], run, records, stats=stats)
    return {**stats, "outputs": records}


def resolve_stream(settings: ShardsSettings, ts) -> StreamPlan:
    vocab = ts.vocab_size
    if settings.dtype == "uint16" and vocab > UINT16_MAX_VOCAB:
        raise SettingsError(f"dtype uint16 cannot hold the ids of a {vocab:,}-id vocabulary (more than 65,535); "
                            "use --dtype uint32 or auto")
    dtype = settings.dtype if settings.dtype != "auto" else ("uint16" if vocab <= UINT16_MAX_VOCAB else "uint32")
    eot = settings.eot_id if settings.eot_id is not None else ts.eod_id
    if eot is None:
        raise SettingsError("the tokenizer has no end-of-document token: pass --eot-id")
    if not 0 <= eot < vocab:
        raise SettingsError(f"eot_id {eot} is outside the vocabulary (size {vocab:,})")
    sets = ts.sets()
    if settings.input_set is not None:
        if settings.input_set not in sets:
            raise SettingsError(f"input_set {settings.input_set!r}: the token set has {', '.join(sets)}")
        chosen = settings.input_set
    elif len(sets) > 1:
        raise SettingsError(f"the token set has several sets ({', '.join(sets)}): choose one with --input-set")
    else:
        chosen = sets[0] if sets else "train"
    pairs = tuple(p for p in ts.pairs if p.set == chosen)
    add_eot = not (ts.append_eod and ts.eod_id == eot)
    return StreamPlan(dtype, int(eot), add_eot, vocab, pairs)


class ShardsStage(Stage):
    """Write a token set as fixed-size np.save token shards (nanoGPT / JaxFormer layout)."""

    name = "shards"
    needs = ()

    def columns(self, settings):
        from curate.stages.stage import Columns

        return Columns(unknown=True)  # a token set in, packed rows or shards out: no dataset columns
    Settings = ShardsSettings
    help = "write fixed-size .npy token shards, EOT between documents, the first ones held out"
    reads_raw_files = True  # a token set, not a document dataset
    reads, writes = ("tokens",), "shards"

    def run(self, settings: ShardsSettings, ctx) -> dict:
        import dask

        from curate.stages import dataset
        from curate.stages.output import Output
        from curate.stages.tokenize.read import one_input, open_token_set

        started = time.time()
        ts = open_token_set(one_input(ctx.input, self.name), settings.input_prefix, ctx.io.allow_incomplete)
        plan = resolve_stream(settings, ts)
        if ts.docs_columns is None:
            log.warning("shards: %s has no document sidecars (written before curate recorded them): the shards "
                        "cannot be traced to document ids", ts.url)
        lengths = stream_lengths(plan.pairs, plan.add_eot)
        shards = plan_shards(lengths, settings.shard_tokens, settings.holdout_shards, settings.name)
        if not shards:
            raise DataError(f"input {ts.url}: no tokens to shard")
        if settings.holdout_shards >= len(shards):
            raise SettingsError(f"holdout_shards {settings.holdout_shards}: the input makes only {len(shards)} "
                                f"shard(s) of {settings.shard_tokens:,} tokens, leaving none to train on")
        out = Output.at(ctx.output)
        out.begin(dataset.stage_owner(ctx, self.name))
        run = ctx.fingerprint
        listing = out.listing()
        done = {}
        if not ctx.force:
            for s in shards:
                rec = out.finished(s.name[:-len(".npy")], run, listing)
                if rec is not None:
                    done[s.index] = {**rec["stats"], "outputs": rec["files"]}
        if done:
            log.info("shards: %d of %d shards already written; skipped", len(done), len(shards))
        tasks = [dask.delayed(write_shard, pure=False)(ts, s, plan, out, run, dask_key_name=f"shard-{s.index:06d}")
                 for s in shards if s.index not in done]
        computed = list(ctx.run_compute(*tasks)) if tasks else []
        stats = sorted([*done.values(), *computed], key=lambda s: s["shard"])
        documents = sum(p.documents for p in plan.pairs)
        partition_stats = [{"outputs": s["outputs"]} for s in stats]
        partition_stats[0].update({"in": documents, "out": documents})
        extra = manifest_extra(settings, plan, ts, stats, len(done))
        return dataset.finish_output(ctx, stage=self.name, settings=settings, partition_stats=partition_stats,
                                     schema=None, started=started, extra=extra, run=run)


def manifest_extra(settings: ShardsSettings, plan: StreamPlan, ts, stats: list[dict], resumed: int) -> dict:
    """What a shards manifest says besides what every stage's does (also ``curate erase``'s rebuild)."""
    documents = sum(p.documents for p in plan.pairs)
    splits: dict[str, dict] = {}
    for s in stats:
        d = splits.setdefault(s["split"], {"shards": 0, "tokens": 0})
        d["shards"] += 1
        d["tokens"] += s["tokens"]
    return {
        "format": "npy-shards",
        "shard_tokens": settings.shard_tokens,
        "holdout_shards": settings.holdout_shards,
        "dtype": plan.dtype,
        "eot_id": plan.eot_id,
        "eot_added": plan.add_eot,
        "vocab_size": ts.vocab_size,
        "bos_id": ts.bos_id if ts.add_bos else None,
        "tokenizer": {"name": ts.tokenizer},
        "input_set": plan.pairs[0].set if plan.pairs else None,
        "totals": {"shards": len(stats), "tokens": int(sum(s["tokens"] for s in stats)),
                   "documents": documents, "input_tokens": int(sum(p.tokens for p in plan.pairs))},
        "splits": splits,
        "shards": [{k: s[k] for k in ("name", "split", "tokens", "eot", "first", "docs") if k in s}
                   for s in stats],
        "docs_columns": list(ts.docs_columns) if ts.docs_columns else None,
        "resumed_partitions": resumed,
        "input_token_set": {"url": ts.url, "prefix": ts.prefix, "fingerprint": ts.fingerprint},
    }
