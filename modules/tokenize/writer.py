"""``tokenize``: documents to Megatron ``.bin``/``.idx`` pairs, one pair per input partition.

Output directory (``--output``, a local path or an fsspec URL such as ``s3://bucket/prefix``)::

    part_00000.bin, part_00000.idx  one pair per input partition (see megatron.py for the bytes);
                                    with --split: train_00000, validation_00000, test_00000 ...
    part_00000.docs.parquet         the pair's document sidecar: which document each sequence is
    _rejects/part-00000.parquet     documents not tokenized: rejected upstream (their _reason) or
                                    without any token ("empty"); in the side folder OUT.side/
    _manifest.json                   tokenizer (name, hash of its files, vocabulary size, eod/bos ids;
                                    for a hub name the revision), dtype, per file documents/tokens/bytes
                                    and the XXH3-128 checksum of every file
    _SUCCESS                        written last

Ownership (``modules/output.py``): the pairs of one ``--prefix`` are one unit. The default prefix
``part`` owns the directory's ``_manifest.json``/``_SUCCESS``; another prefix ``web`` has its own
``manifest.web.json``, ``_SUCCESS.web``, ``_state.web/`` and rejects ``_rejects/web-part-00000.parquet``,
so several corpora can be tokenized into one folder, each verifiable and mergeable on its own.

Each document becomes one sequence: ``[bos] tokens [eod]`` (bos with --add-bos, eod unless
--no-append-eod), special tokens never come from the text itself, nothing is truncated. A document
without tokens is skipped (not even an eod) and counted; with --keep-empty it is written as its special
tokens alone, as NeMo Curator's MegatronTokenizerWriter writes it. Pairs with no document are not written.

Document sidecar (``PREFIX_NNNNN.docs.parquet``, one per pair, same prefix, set and number). A
Parquet table (zstd, no pandas metadata), column by column::

    column  Arrow type  meaning
    id      string      the ``id`` of the document sequence k was made from (never null)
    url     string      its ``url`` (null where the document had none); only when the input dataset
                        has a ``url`` column, then in every sidecar of the unit

Invariants (checked by ``curate verify``, naming the pair when they fail): row k is sequence k of
the ``.idx`` (we write one sequence per document, so also document k), so the sidecar has exactly
as many rows as the ``.idx`` has sequences; its XXH3-128 is the one in the manifest. A document
without tokens has a row only with --keep-empty (then it is a sequence, perhaps of length 0); with
--split each set's pair lists the documents of that set, in input order. Sequence k of the pair is
the ``.bin`` bytes ``[pointer[k], pointer[k] + length[k] * itemsize)``, so (pair, token position) ->
sequence (``searchsorted`` on the pointers) -> row -> document id. The manifest names each pair's sidecar
(``files[].docs``, ``files[].docs_xxh3_128``) and the columns (``docs_columns``); it is journaled
with its pair and written after it, so a killed partition is redone whole. ``modules/tokenize/docs.py``
holds what readers share.

Resume: every partition is a journal entry of the output: its file names are recorded before it
writes, its files (sizes, checksums) and counts when done. A partition whose done record belongs to
this run's settings, tokenizer files and partitioning and whose files are all there with their sizes
is not recomputed. Files are written under temporary names and renamed (on an object store: PUT
whole), so a killed run never leaves a half-written pair under a final name.

Splits (``--split validation=0.01,test=0.01``): a document goes to validation when
``u < 0.01``, to test when ``0.01 <= u < 0.02``, else to train, where ``u`` is
``(xxh64(id as UTF-8, seed SPLIT_SEED) >> 11) / 2**53``: stable across runs, partitionings and
machines. ``SPLIT_SEED`` is ``xxh64(b"curate-split", seed 0)``, a fixed constant that differs from
the ``shuffle`` stage's seeds (0 by default): with the same seed the held-out documents would be
exactly those with the smallest shuffle keys, i.e. the first shuffle partition(s).

What needs no files lives beside this module, one concern a module, and every name stays importable
from here, where the tests import it: ``splits`` (the sets and the leakage between them) and
``framing`` (a batch of token lists as range-checked Megatron sequences).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from curate.stages.errors import DataError, SettingsError
from curate.stages.output import Output
from curate.stages.stage import REASON, Stage, check_range
from curate.stages.tokenize import docs, megatron
from curate.stages.tokenize.framing import TokenRangeError, frame_documents
from curate.stages.tokenize.load import HubSnapshot
from curate.stages.tokenize.splits import (
    LEAKAGE,
    SPLIT_NAMES,
    SPLIT_SEED as SPLIT_SEED,
    _leaks,
    assign_sets,
    held_out,
    leakage_index,
    parse_split,
)

log = logging.getLogger(__name__)

REJECTS = "_rejects"
PAIR_RE = re.compile(r"^(?P<prefix>.+)_(?P<index>\d{5})\.(?P<ext>bin|idx)$")
_PREFIX_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]*(_[A-Za-z0-9.-]+)*$")


@dataclass(frozen=True)
class TokenizeSettings:
    tokenizer: str = field(metadata={
        "help": "Hugging Face tokenizer name or directory, or tiktoken:ENCODING (e.g. tiktoken:cl100k_base)",
        "metavar": "TOK",
    })
    append_eod: bool = field(default=True, metadata={"help": "append the end-of-document token to every document"})
    add_bos: bool = field(default=False, metadata={"help": "prepend the beginning-of-sequence token, if the tokenizer has one"})
    keep_empty: bool = field(default=False, metadata={
        "help": "write a document without tokens as a sequence of its special tokens only (just eod, or "
                "nothing with --no-append-eod) instead of skipping it, as NeMo Curator's MegatronTokenizerWriter "
                "does; with --no-append-eod the output is byte-identical to NeMo's"})
    batch_size: int = field(default=1000, metadata={"help": "documents per encode call", "metavar": "N"})
    prefix: str = field(default="part", metadata={"help": "file name prefix: PREFIX_00000.bin", "metavar": "NAME"})
    split: dict[str, float] | None = field(default=None, metadata={
        "help": "hold out fractions by a hash of the document id, e.g. validation=0.01,test=0.01",
        "metavar": "NAME=FRACTION,...",
        "parse": parse_split,
    })
    hold_out_leakage: bool = field(default=False, metadata={
        "help": "with --split: a train document that duplicates a held-out one (the same normalised text, or word "
                "5-gram Jaccard >= --leakage-threshold) goes to _rejects/ with reason leakage instead of into train"})
    leakage_threshold: float = field(default=0.8, metadata={
        "help": "--hold-out-leakage: the Jaccard similarity from which a train document leaks", "metavar": "J"})

    def __post_init__(self):
        if not isinstance(self.tokenizer, str) or not self.tokenizer.strip():
            raise SettingsError(f"tokenizer must be a name, a directory or tiktoken:ENCODING; got {self.tokenizer!r}")
        from curate.stages.tokenize.load import check_spec

        check_spec(self.tokenizer)  # a missing directory or unknown encoding fails before a cluster starts
        check_range(self, "batch_size", lo=1)
        if not _PREFIX_RE.match(self.prefix) or re.search(r"_\d{5}$", self.prefix):
            raise SettingsError(f"prefix must be letters, digits, '.', '-' or '_' (not ending in _NNNNN); got {self.prefix!r}")
        if self.split is not None:
            if not isinstance(self.split, dict) or not self.split:
                raise SettingsError(f"split must name at least one of {', '.join(SPLIT_NAMES)}; got {self.split!r}")
            for name, frac in self.split.items():
                if name not in SPLIT_NAMES:
                    raise SettingsError(f"split: unknown set {name!r} (known: {', '.join(SPLIT_NAMES)}; train is the rest)")
                if not 0 < frac < 1:
                    raise SettingsError(f"split: {name} must be a fraction between 0 and 1; got {frac!r}")
            if sum(self.split.values()) >= 1:
                raise SettingsError(f"split: fractions add up to {sum(self.split.values())}, leaving nothing to train on")
        if self.hold_out_leakage and not self.split:
            raise SettingsError("hold_out_leakage needs --split: it keeps the held-out sets' duplicates out of train")
        if not 0 < self.leakage_threshold <= 1:
            raise SettingsError(f"leakage_threshold must be in (0, 1]; got {self.leakage_threshold!r}")


# --------------------------------------------------------------------------- one partition


@dataclass(frozen=True)
class Plan:
    """Everything a partition task needs (pickled to the workers; the tokenizer is loaded there)."""

    tokenizer: str
    dtype: str
    vocab_size: int
    eod_id: int | None  # None when not appended
    bos_id: int | None  # None when not prepended
    batch_size: int
    sets: tuple[tuple[str, str], ...]  # (set, file prefix)
    split: dict | None
    output: Output
    key: str  # identifies settings + tokenizer files + partitioning: records with another key are stale
    fmt: str  # rejects format
    hub: HubSnapshot | None = None  # a hub tokenizer: the snapshot the client resolved (tokenizer is its folder)
    keep_empty: bool = False  # documents without tokens become sequences instead of rejects
    url: bool = False  # the dataset has a url column: the sidecars carry it


def pair_name(prefix: str, i: int) -> str:
    return f"{prefix}_{i:05d}"


def rejects_name(unit: str, i: int, fmt: str) -> str:
    from curate.stages import dataset

    part = dataset.part_name(i, fmt)
    return f"{REJECTS}/{unit}-{part}" if unit else f"{REJECTS}/{part}"


def tokenize_partition(df: pd.DataFrame, i: int, plan: Plan, leakage=None) -> dict:
    """Tokenize partition ``i`` into its pair(s), journaled in the output; return what was written.
    ``leakage``: the held-out documents' index (``--hold-out-leakage``)."""
    from curate.stages.tokenize.load import hub_directory, load_tokenizer

    tok = load_tokenizer(plan.tokenizer if plan.hub is None else hub_directory(plan.hub))
    started = time.perf_counter()
    out = plan.output
    key = f"part-{i:05d}"
    names = [pair_name(prefix, i) + ext for _, prefix in plan.sets for ext in (".bin", ".idx", docs.DOCS_SUFFIX)]
    out.intend(key, [*names, rejects_name(out.unit, i, plan.fmt)])
    stats = _write_partition(df, i, plan, tok, out, leakage)
    stats["seconds"] = round(time.perf_counter() - started, 3)
    out.record_done(key, plan.key, stats["outputs"], stats={k: v for k, v in stats.items() if k != "outputs"})
    return stats


def _write_partition(df: pd.DataFrame, i: int, plan: Plan, tok, out: Output, leakage=None) -> dict:
    from curate.stages import dataset

    df = df.reset_index(drop=True)  # positions from here on: an upstream index may repeat values
    reason = df[REASON] if REASON in df.columns else pd.Series(pd.NA, index=df.index, dtype=dataset.STRING)
    reason = reason.mask(reason.isna() & df["text"].isna(), "missing_text")
    detail = df[dataset.DETAIL] if dataset.DETAIL in df.columns else pd.Series(pd.NA, index=df.index,
                                                                                dtype=dataset.STRING)
    good = reason.isna().to_numpy()
    kept = df[good]
    sets = assign_sets(kept["id"], plan.split)
    if leakage is not None:
        leaks = _leaks(kept, sets, leakage)
        if leaks:
            rows = np.flatnonzero(good)[list(leaks)]
            mask = np.zeros(len(df), dtype=bool)
            mask[rows] = True
            reason = reason.mask(mask, LEAKAGE)
            detail = detail.astype(object).copy()
            detail.iloc[rows] = list(leaks.values())
            detail = detail.astype(dataset.STRING)
            good = reason.isna().to_numpy()
            kept = df[good]
            sets = assign_sets(kept["id"], plan.split)
    texts = kept["text"].to_numpy(dtype=object)
    dtype = np.dtype(plan.dtype)
    empty_rows: list[np.ndarray] = []  # positions in `kept`
    files, records = [], []
    for set_name, prefix in plan.sets:
        positions = np.flatnonzero(sets == set_name)
        if not len(positions):
            continue
        name = pair_name(prefix, i)
        written: list[np.ndarray] = []  # positions in `kept` of the documents that became sequences
        with out.open(name + ".bin") as sink:
            w = megatron.PairWriter(name, dtype, sink=sink)
            for start in range(0, len(positions), plan.batch_size):
                chunk = positions[start:start + plan.batch_size]
                lists = tok.encode_sequences(texts[chunk].tolist())
                try:
                    tokens, lengths, empty = frame_documents(lists, dtype, plan.vocab_size, plan.eod_id,
                                                             plan.bos_id, plan.keep_empty)
                except TokenRangeError as e:
                    doc_id = kept["id"].iloc[chunk[e.document]]
                    raise DataError(f"partition {i} document id {doc_id!r}: {e.detail}") from None
                w.add(tokens, lengths)
                written.append(chunk[~empty])
                if empty.any():
                    empty_rows.append(chunk[empty])
            if w.documents == 0:
                sink.abandon()
        if w.documents == 0:
            continue
        idx = out.write_bytes(name + ".idx", w.index_bytes())
        side = docs.write_table(out, docs.docs_name(name), sidecar(kept, np.concatenate(written), plan.url))
        records += [sink.record, idx, side]
        files.append({"set": set_name if plan.split else None, "partition": i, **w.stats(),
                      "idx_bytes": idx["bytes"], "bin_xxh3_128": sink.record["xxh3_128"],
                      "idx_xxh3_128": idx["xxh3_128"], "docs": side["path"], "docs_xxh3_128": side["xxh3_128"]})
    # documents that were not tokenized keep every column and say why
    empty_mask = np.zeros(len(df), dtype=bool)
    if empty_rows:
        empty_mask[np.flatnonzero(good)[np.concatenate(empty_rows)]] = True
    dropped_reason = reason.mask(empty_mask, "empty")
    rejected = df.assign(**{REASON: dropped_reason.astype(dataset.STRING)})
    if leakage is not None:
        rejected = rejected.assign(**{dataset.DETAIL: detail})
    rejected = rejected[dropped_reason.notna().to_numpy()]
    rejects = None
    if len(rejected):
        rejects = rejects_name(out.unit, i, plan.fmt)
        records.append(out.write_frame(rejects, rejected, plan.fmt))
    counts = {str(k): int(v) for k, v in rejected[REASON].value_counts().items()} if len(rejected) else {}
    return {
        "partition": i,
        "key": plan.key,
        "in": len(df),
        "out": int(sum(f["documents"] for f in files)),
        "dropped": dict(sorted(counts.items())),
        "files": files,
        "rejects": rejects,
        "outputs": records,
    }


def sidecar(kept: pd.DataFrame, positions: np.ndarray, url: bool):
    """The document sidecar of a pair whose sequences are the documents ``kept.iloc[positions]``."""
    import pyarrow as pa

    from curate.stages.dataset import STRING

    columns = docs.ID_COLUMNS if url else docs.ID_COLUMNS[:1]
    rows = kept.iloc[positions]
    return pa.table([pa.array(rows[c].astype(STRING), type=pa.string()) for c in columns],
                    schema=docs.schema(columns))


def completed(plan: Plan, n: int) -> dict[int, dict]:
    """Stats of the partitions (of ``n``) an earlier run of the same plan finished: done journal
    records of this plan's key whose files are all present with their sizes (one listing)."""
    out = plan.output
    listing = out.listing()
    done = {}
    for i in range(n):
        rec = out.finished(f"part-{i:05d}", plan.key, listing)
        if rec is not None:
            done[i] = {**rec["stats"], "outputs": rec["files"]}
    return done


# --------------------------------------------------------------------------- the stage


class TokenizeStage(Stage):
    worker_imports = ("tiktoken",)
    name = "tokenize"
    needs = ("text", "id")

    def columns(self, settings):
        from curate.stages.stage import Columns

        return Columns(needs=self.needs, unknown=True)  # pairs out: no dataset columns follow
    Settings = TokenizeSettings
    help = "tokenize into Megatron .bin/.idx pairs (one per partition)"
    writes = "tokens"

    def planned_output(self, settings: TokenizeSettings):
        """The token set this stage will write, without its pairs: the vocabulary and ids its manifest
        will record (as run does below), for a later stage's check before any work (pack's bos_id).
        None for a hub tokenizer that is not cached: nothing is downloaded before the run."""
        from curate.stages.tokenize.load import (
            HUB_TOKENIZER_FILES,
            _has_tokenizer_files,
            is_hub_name,
            load_tokenizer,
        )
        from curate.stages.tokenize.read import TokenSet

        spec = settings.tokenizer
        if is_hub_name(spec):
            from huggingface_hub import snapshot_download

            try:
                spec = snapshot_download(spec, allow_patterns=list(HUB_TOKENIZER_FILES), local_files_only=True)
            except Exception:  # not cached
                return None
            if not _has_tokenizer_files(spec):
                return None
        tok = load_tokenizer(spec)
        return TokenSet(url="", prefix=settings.prefix, pairs=(), vocab_size=tok.vocab_size,
                        dtype=str(megatron.token_dtype(tok.vocab_size)), eod_id=tok.eod_id, bos_id=tok.bos_id,
                        add_bos=settings.add_bos and tok.bos_id is not None,
                        append_eod=settings.append_eod and tok.eod_id is not None,
                        tokenizer=settings.tokenizer, fingerprint=None)

    def prepare_head(self, settings: TokenizeSettings) -> None:
        from curate.stages.tokenize.load import is_hub_name, load_tokenizer

        if not is_hub_name(settings.tokenizer):  # a hub name is pinned to a snapshot when the stage runs
            load_tokenizer(settings.tokenizer).describe()

    def check_output(self, settings, inputs, output) -> None:
        # here, not in check: a job calls this for every stage before any work, also for a tokenize whose
        # input is a later stage's output (a hub name not in the cache failed after four stages had run)
        from curate.stages.tokenize.load import check_loadable

        check_loadable(settings.tokenizer)

    def run(self, settings: TokenizeSettings, ctx) -> dict:
        from curate.stages import dataset
        from curate.stages.tokenize.load import is_hub_name, load_tokenizer, resolve_hub

        started = time.time()
        # a hub name is pinned here, once: the workers load this snapshot, not whatever the hub has
        # when each of them starts
        hub = resolve_hub(settings.tokenizer) if is_hub_name(settings.tokenizer) else None
        spec = hub.directory if hub else settings.tokenizer
        tok = load_tokenizer(spec)
        desc = tok.describe()
        if hub:
            desc.update(name=settings.tokenizer, revision=hub.revision, files_sha256=hub.files_sha256())
        warnings = []
        eod_id = tok.eod_id if settings.append_eod else None
        if settings.append_eod and tok.eod_id is None:
            warnings.append(f"tokenizer {settings.tokenizer} has no end-of-document token: eod not appended")
        bos_id = tok.bos_id if settings.add_bos else None
        if settings.add_bos and tok.bos_id is None:
            warnings.append(f"tokenizer {settings.tokenizer} has no beginning-of-sequence token: bos not added")
        for w in warnings:
            log.warning(w)
        dtype = megatron.token_dtype(tok.vocab_size)
        for what, tid in (("eod", eod_id), ("bos", bos_id)):
            if tid is not None and not 0 <= tid < min(tok.vocab_size, np.iinfo(dtype).max + 1):
                raise SettingsError(f"tokenizer {settings.tokenizer}: {what} id {tid} is outside the vocabulary")

        unit = "" if settings.prefix == "part" else settings.prefix
        out = Output.at(ctx.output, unit)
        # pieces, not a Dask DataFrame: each partition is read and tokenized whole in one task, and a
        # small run does not pay dask.dataframe's import for it
        schema, pieces = dataset.read_pieces(ctx.input, ctx.io)
        n = len(pieces)
        if settings.split:
            names = ("train", *[s for s in SPLIT_NAMES if s in settings.split])
            sets = tuple((s, s if settings.prefix == "part" else f"{settings.prefix}_{s}") for s in names)
        else:
            sets = (("train", settings.prefix),)
        url = "url" in schema.columns
        # "docs": partitions journaled before sidecars existed are redone, not reused without one
        key = hashlib.sha256(json.dumps(
            [ctx.fingerprint, ctx.io.blocksize, n, desc["files_sha256"], str(dtype), eod_id, bos_id, "docs", url],
            default=str).encode()).hexdigest()[:16]
        plan = Plan(spec, str(dtype), tok.vocab_size, eod_id, bos_id, settings.batch_size,
                    sets, dict(settings.split) if settings.split else None, out, key, ctx.io.format, hub,
                    settings.keep_empty, url)

        out.begin(dataset.stage_owner(ctx, self.name))
        done = {} if ctx.force else completed(plan, n)
        if done:
            log.info("tokenize: %d of %d partitions already written; skipped", len(done), n)
        import dask

        leakage, held = None, None
        if settings.hold_out_leakage and len(done) < n:
            # first pass: the held-out documents of every partition (a small share), indexed once
            read = dask.delayed(dataset.read_piece)
            frames = ctx.run_compute(*[dask.delayed(held_out)(read(pieces[i], ctx.io, schema), plan.split,
                                                              dask_key_name=f"held-out-{i:05d}") for i in range(n)])
            index = leakage_index(frames, settings.leakage_threshold)
            held = len(index)
            leakage = dask.delayed(index, name="tokenize-leakage-index")  # one key every task shares
        # small partitions several a task, by their bytes (dataset.groups); each its own .bin/.idx
        from curate.stages.dataset.groups import piece_bytes, task_groups
        from curate.stages.dataset.write import Opaque, group_key

        todo = [i for i in range(n) if i not in done]
        sizes = piece_bytes([pieces[i] for i in todo])
        runs = [[todo[j] for j in run] for run in task_groups(sizes, ctx.slots)]
        tasks = [dask.delayed(_read_and_tokenize_group, pure=False)(Opaque([pieces[i] for i in run]), ctx.io, schema, run,
                                                                     plan, leakage, dask_key_name=group_key("tokenize", run))
                 for run in runs]
        computed = [s for r in ctx.run_compute(*tasks) for s in r] if tasks else []
        stats = sorted([*done.values(), *computed], key=lambda s: s["partition"])
        extra = _manifest_extra(desc, settings, plan, stats, warnings, len(done), dtype)
        if settings.hold_out_leakage:
            extra["leakage"] = {"threshold": settings.leakage_threshold, "held_out_documents": held,
                                "held_out_of_train": int(sum(s["dropped"].get(LEAKAGE, 0) for s in stats))}
        return dataset.finish_output(ctx, stage="tokenize", settings=settings, partition_stats=stats,
                                     schema=None, started=started, extra=extra, unit=unit,
                                     run=plan.key)


def _read_and_tokenize(piece, io, schema, i, plan, leakage) -> dict:
    from curate.stages import dataset

    return tokenize_partition(dataset.read_piece(piece, io, schema), i, plan, leakage)


def _read_and_tokenize_group(pieces, io, schema, partitions, plan, leakage) -> list[dict]:
    from curate.stages.dataset.write import unwrap

    return [_read_and_tokenize(p, io, schema, i, plan, leakage) for p, i in zip(unwrap(pieces), partitions)]


def _manifest_extra(desc, settings, plan, stats, warnings, resumed, dtype) -> dict:
    files = [f for s in stats for f in s["files"]]
    sets: dict[str, dict] = {}
    for set_name, _prefix in plan.sets:
        fs = [f for f in files if (f["set"] or "train") == set_name]
        sets[set_name] = {
            "files": len(fs),
            "documents": int(sum(f["documents"] for f in fs)),
            "tokens": int(sum(f["tokens"] for f in fs)),
            "bytes": int(sum(f["bytes"] for f in fs)),
        }
    return {
        "tokenizer": desc,
        "vocab_size": desc["vocab_size"],
        "dtype": str(dtype),
        "dtype_code": megatron.dtype_code(dtype),
        "eod_id": desc["eod_id"],
        "bos_id": desc["bos_id"],
        "append_eod": plan.eod_id is not None,
        "add_bos": plan.bos_id is not None,
        "split": plan.split,
        "sets": sets,
        "totals": {k: int(sum(f[k] for f in files)) for k in ("documents", "tokens", "bytes")},
        "files": [{k: f[k] for k in ("name", "set", "partition", "documents", "tokens", "bytes", "idx_bytes",
                                     "bin_xxh3_128", "idx_xxh3_128", "docs", "docs_xxh3_128") if k in f}
                  for f in files],
        "docs_columns": list(docs.ID_COLUMNS if plan.url else docs.ID_COLUMNS[:1]),
        "resumed_partitions": resumed,
        "warnings": warnings,
        "output": plan.output.url,
        "prefix": settings.prefix,
    }
