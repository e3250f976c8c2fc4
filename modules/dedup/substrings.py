"""substring_dedup: exact-substring dedup (Lee et al. 2022, "Deduplicating Training Data Makes
Language Models Better"). Every span of at least ``--min-tokens`` tokens (default 50, as theirs)
that occurs more than once in the corpus is removed from every occurrence but the first; documents
are ordered by document number (input partition, then row), and inside a document by position.

The design: hashed windows with exact verification, no suffix array. Every window of exactly
``min-tokens`` consecutive tokens of a document gets a 64-bit hash (:mod:`.windows`); a span of ``L >=
min-tokens`` tokens repeated is exactly a run of repeated windows, so "remove every window occurrence
but the first of its content, then take the union" removes the repeated spans' later occurrences.

First occurrences are never cut. Windows overlap, so a later occurrence can share tokens with the
first occurrence of another window: "ha" 60 times is 58 windows that repeat the first few, and
cutting every later window whole left "haha", where none of them survives; d2 = A B C after d1 = A B,
with d3 = B C D, lost B C everywhere. So a document loses the tokens of its verified later windows
less those of first occurrences of repeated windows (and of windows whose verification failed: the
hash paired them with another content, so one of them may be the first of its own). Then, for any
input and partitioning: every window that occurs more than once stays whole where it first occurs;
every removed token lies in a later occurrence whose first stays whole; the tokens of later windows
kept so are counted (``repeated_tokens_kept``). A document holding a first occurrence is never
dropped for ``--min-words``. Without overlapping repeats this is the plain rule. Why not suffix arrays: a suffix array needs the whole corpus (or a shard and then a
cross-shard pass anyway) in one process's memory, while windows shuffle like every other dedup step of
curate, one bounded partition per task. Tokens are tiktoken's (``cl100k_base``, what the sample's
tokenize step writes, offline): BPE tokens are the unit Lee et al. count, a token carries its leading
space, so cutting tokens leaves no doubled spaces, and ids are integers, so windows compare as arrays.

Steps, each Parquet under ``OUT.side/_work/``:

1. ``windows`` (per input partition): tokens of every document (``tokens/``: ``doc``, ``tokens``, kept
   for the later steps so no text is tokenized twice), the window hashes, and inside the partition the
   first window of each hash; the partition's later windows are compared with their first right away
   (``local/``: verified token ranges). Only first windows (``hash``, ``doc``, ``pos``) go on.
2. ``matches``: first windows shuffled on the hash, with ``repeats`` (the partition holds the hash
   again); per hash the smallest (doc, pos) is the first occurrence, the other partitions' windows are
   candidates (``doc``, ``pos``, ``first_doc``, ``first_pos``), and the first, when the hash repeats,
   a row with ``first_doc`` -1: a window to keep whole. A hash has at most one row per input partition.
3. ``runs``: candidates routed to their document's partition and joined into runs (consecutive
   windows matched to consecutive windows of one earlier document: one row per repeated span); the
   windows to keep whole as token ranges (``anchors/``: ``doc``, ``start``, ``end``).
4. ``fetched``: runs routed to the partition of their first occurrence, which cuts the claimed tokens
   out of its ``tokens/`` once per (requesting partition, span).
5. ``verified`` (per input partition): every run compared token by token with what was fetched; only
   equal windows are removed, so a hash collision can never remove text, and the tokens of
   ``anchors/`` and of unequal windows are never removed. Token ranges become byte
   ranges (``removals/``: ``doc``, ``start``, ``end``; a range is shrunk to whole UTF-8 characters where
   cl100k splits one), and ``OUT.side/_duplicates/`` gets each changed document's ``removed_spans``,
   ``removed_bytes``, ``bytes``, ``words_left``, ``dropped``.
6. the dataset: each partition's texts with those byte ranges cut. A range never crosses a document
   boundary (windows are cut per document). A document left with fewer than ``--min-words`` words
   (or none) is dropped as ``substring_duplicate``.

Memory: a task holds one input partition and its tokens (4 bytes a token) and window rows (16 bytes a
window), or one shuffled partition of window rows: about 46 bytes per token of a partition at the
peak (measured with tracemalloc: the sort of the window hashes), 15 times the partition's text, and
the ``matches`` shuffle splits a partition's first windows (20 bytes a token) several times over. So
the stage reads its input in partitions of at most ``MAX_PARTITION_BYTES`` (8 MiB, about 2.7M tokens
of English) whatever ``--blocksize`` says (a smaller one applies; the manifest's ``io`` records the
one used): at the default 128 MiB a worker died at ``--memory-limit 2GiB`` on 100 MB of text, at 32
MiB on 1 GB (in the shuffle); at 8 MiB 1 GB peaks at 1.7 GiB (``jobs/bench_dedup.py substrings``). The
one exception grows with the corpus slowly: a first occurrence copied into every partition is
fetched once per partition (the peak was 1.2 GiB at 100 MB of the same corpus).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from curate.stages import dedup
from curate.stages.dedup import segments, windows as win
from curate.stages.errors import SettingsError
from curate.stages.stage import Stage, check_range

REASON = "substring_duplicate"
#: the largest input partition this stage reads (the module doc: memory)
MAX_PARTITION_BYTES = 8 << 20
STRING_DTYPE = pd.StringDtype("pyarrow")


@dataclass(frozen=True)
class SubstringDedupSettings:
    min_tokens: int = field(default=50, metadata={
        "help": "remove spans of at least this many tokens that occur earlier in the corpus (Lee et al.: 50)",
        "metavar": "N"})
    tokenizer: str = field(default="tiktoken:cl100k_base", metadata={
        "help": "the tokens spans are counted in: a tiktoken encoding (tiktoken:NAME; offline copies are used)",
        "metavar": "TOK"})
    min_words: int = field(default=0, metadata={
        "help": "a document that lost a span and has fewer words left is dropped (with none left it always is)",
        "metavar": "N"})

    def __post_init__(self):
        check_range(self, "min_tokens", 2, 100_000)
        check_range(self, "min_words", 0)
        if not self.tokenizer.startswith("tiktoken:"):
            raise SettingsError(f"tokenizer must be tiktoken:ENCODING (e.g. tiktoken:cl100k_base); got {self.tokenizer!r}")
        from curate.stages.tokenize.load import check_spec

        # here, with the job's settings: the stage's check runs only once its input exists, so an
        # unknown encoding after another stage was refused only once that stage had run
        check_spec(self.tokenizer)


# --------------------------------------------------------------------------- per-partition work


def read_tokens(path: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(doc numbers, flat tokens, offsets) of a ``tokens/`` part."""
    import pyarrow.parquet as pq

    t = pq.read_table(path)
    col = t.column("tokens").combine_chunks()
    docs = t.column("doc").to_numpy()
    if not len(docs):
        return docs.astype(np.int64), np.zeros(0, dtype=np.uint32), np.zeros(1, dtype=np.int64)
    offsets = col.offsets.to_numpy().astype(np.int64)
    flat = col.values.to_numpy(zero_copy_only=False).astype(np.uint32, copy=False)
    return docs.astype(np.int64), flat[offsets[0]:offsets[-1]], offsets - offsets[0]


def tokens_table(docs, flat, offsets):
    import pyarrow as pa

    tokens = pa.LargeListArray.from_arrays(pa.array(offsets.astype(np.int64)), pa.array(flat, type=pa.uint32()))
    return pa.table({"doc": pa.array(np.asarray(docs, dtype=np.int64)), "tokens": tokens})


def local_ranges(flat, offsets, pairs: dict, width: int) -> pd.DataFrame:
    """Token ranges (doc index, start, end, keep) of candidate runs inside one partition: verified
    repeats (``keep`` False) and windows whose verification failed (``keep`` True: never cut)."""
    rows = []
    for d, s, n, fd, fs in zip(*(pairs[k].tolist() for k in ("doc", "start", "windows", "first_doc", "first_start"))):
        length = n + width - 1
        a = flat[offsets[d] + s: offsets[d] + s + length]
        b = flat[offsets[fd] + fs: offsets[fd] + fs + length]
        ok, failed = win.verify_windows(a, b, s, width)
        rows += [(d, x, y, False) for x, y in ok] + [(d, x, y, True) for x, y in failed]
    return pd.DataFrame(rows, columns=["doc", "start", "end", "keep"]).astype(
        {"doc": np.int64, "start": np.int64, "end": np.int64, "keep": bool})


def window_rows(df: pd.DataFrame, partition: int, settings) -> tuple[pd.DataFrame, pd.DataFrame, object, dict]:
    """(first windows of each hash in this partition: hash, doc, pos; verified local token ranges:
    doc, start, end; the tokens table; stats)."""
    width = settings.min_tokens
    pos = dedup.good_rows(df)
    flat, offsets = win.tokenize(df["text"].iloc[pos].tolist(), settings.tokenizer)
    docs = dedup.doc_numbers(partition, pos)
    keep = np.diff(offsets) >= width  # shorter documents hold no window: not needed later
    if not keep.all():
        idx = np.flatnonzero(keep)
        flat = np.concatenate([flat[offsets[d]:offsets[d + 1]] for d in idx]) if len(idx) else flat[:0]
        offsets = np.r_[0, np.cumsum(np.diff(offsets)[idx])].astype(np.int64)
        docs = docs[idx]
    h, d, p = win.window_hashes(flat, offsets, width, win.token_tables(settings.tokenizer)[2])
    firsts, first_row = win.first_of_hash(h)
    # the hash repeats inside this partition: its first, if first in the corpus too, must stay whole
    repeats = np.bincount(first_row, minlength=len(h))[firsts] > 1
    firsts_df = pd.DataFrame({"hash": h[firsts], "doc": docs[d[firsts]], "pos": p[firsts], "repeats": repeats},
                             copy=False)
    del h, firsts  # the largest arrays go before the next ones are made
    later = np.flatnonzero(first_row != np.arange(len(first_row), dtype=np.int32))
    pairs = win.runs(d[later], p[later], d[first_row[later]], p[first_row[later]])
    del first_row, later
    local = local_ranges(flat, offsets, pairs, width)
    local["doc"] = docs[local["doc"].to_numpy()] if len(local) else local["doc"]
    stats = {"tokens": int(offsets[-1]) if len(offsets) else 0, "windows": int(len(d)), "local_runs": len(pairs["doc"])}
    return firsts_df, local, tokens_table(docs, flat, offsets), stats


def cross_candidates(part: pd.DataFrame) -> pd.DataFrame:
    """The windows of a shuffled partition that are not the first of their hash, with that first; and
    the first of each hash that repeats (another partition's row or its own ``repeats``), with
    ``first_doc`` and ``first_pos`` -1: a first occurrence to keep whole. A hash collision can only make
    more of them (kept, never removed)."""
    part = part.sort_values(["doc", "pos"], kind="stable", ignore_index=True)
    h = part["hash"].to_numpy(dtype=np.uint64)
    heads, first = win.first_of_hash(h)
    later = np.flatnonzero(first != np.arange(len(h)))
    doc, pos = part["doc"].to_numpy(), part["pos"].to_numpy()
    repeats = part["repeats"].to_numpy(dtype=bool)[heads] | (np.bincount(first, minlength=len(h))[heads] > 1)
    anchors = heads[repeats]
    return pd.DataFrame({"doc": np.r_[doc[later], doc[anchors]], "pos": np.r_[pos[later], pos[anchors]],
                         "first_doc": np.r_[doc[first[later]], np.full(len(anchors), -1)],
                         "first_pos": np.r_[pos[first[later]], np.full(len(anchors), -1)]}).astype(np.int64)


def anchor_ranges(doc, pos, width: int) -> pd.DataFrame:
    """Token ranges (doc, start, end) that first-occurrence windows at (doc, pos), sorted, cover."""
    doc, pos = np.asarray(doc, dtype=np.int64), np.asarray(pos, dtype=np.int64)
    if not len(doc):
        return pd.DataFrame({"doc": doc, "start": pos, "end": pos})
    new = np.r_[True, (doc[1:] != doc[:-1]) | (pos[1:] > pos[:-1] + width)]
    f = np.flatnonzero(new)
    last = np.r_[f[1:] - 1, len(doc) - 1]
    return pd.DataFrame({"doc": doc[f], "start": pos[f], "end": pos[last] + width})


def apply_byte_removals(df: pd.DataFrame, rows: pd.DataFrame, min_words: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(``df`` with the byte ranges in ``rows`` (doc, start, end, held) cut from their texts and documents
    left too short marked dropped, unless ``held``: they hold a first occurrence of a repeated window,
    whose only kept copy that is; the audit: one row per changed document)."""
    from curate.stages.dataset import DETAIL, STRING, mark_dropped

    docs = rows["doc"].to_numpy(dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, docs[1:] != docs[:-1]]) if len(docs) else np.zeros(0, dtype=np.int64)
    ends = np.r_[starts[1:], len(docs)].astype(np.int64)
    lo, hi = rows["start"].to_numpy(dtype=np.int64), rows["end"].to_numpy(dtype=np.int64)
    texts = df["text"].to_numpy(dtype=object, na_value=None).copy()
    audit = {"row": [], "removed_spans": [], "removed_bytes": [], "bytes": [], "words_left": []}
    for a, b in zip(starts.tolist(), ends.tolist()):
        row = int(docs[a] & dedup.ROW_MASK)
        raw = texts[row].encode("utf-8", "surrogatepass")
        new = segments.cut_ranges(raw, list(zip(lo[a:b].tolist(), hi[a:b].tolist())))
        texts[row] = new.decode("utf-8", "surrogatepass")
        audit["row"].append(row)
        audit["removed_spans"].append(b - a)
        audit["removed_bytes"].append(len(raw) - len(new))
        audit["bytes"].append(len(raw))
        audit["words_left"].append(len(texts[row].split()))
    audit = pd.DataFrame(audit)
    held = rows["held"].to_numpy(dtype=bool)[starts] if "held" in rows.columns else np.zeros(len(starts), dtype=bool)
    drop = (audit["words_left"].to_numpy() < max(min_words, 1)) & ~held
    changed = audit["row"].to_numpy(dtype=np.int64)
    out = df.assign(text=pd.array(texts, dtype=df["text"].dtype))
    mask = np.zeros(len(df), dtype=bool)
    mask[changed[drop]] = True
    out = mark_dropped(out, mask, REASON)
    if drop.any():
        detail = np.full(len(df), None, dtype=object)
        detail[changed[drop]] = [f"{r} of {n} bytes repeated earlier spans; {w} words left" for r, n, w in
                                 zip(audit["removed_bytes"][drop], audit["bytes"][drop], audit["words_left"][drop])]
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


# --------------------------------------------------------------------------- tasks


def _windows_task(df, i, folder, local, tokens, settings) -> dict:
    firsts, ranges, table, stats = window_rows(df, i, settings)
    out = dedup.save_part(firsts, folder, i)
    out["outputs"] = (out.get("outputs", []) + dedup.save_part(ranges, local, i).get("outputs", [])
                      + dedup.save_table(table, tokens, i).get("outputs", []))
    out.update(stats)
    return out


def _matches_task(part, folder, i) -> dict:
    return dedup.save_part(cross_candidates(part), folder, i)


def _runs_task(routed, folder, anchors, i, width) -> dict:
    routed = routed.sort_values(["doc", "pos"], kind="stable")
    first = routed["first_doc"].to_numpy() < 0
    kept = anchor_ranges(routed["doc"].to_numpy()[first], routed["pos"].to_numpy()[first], width)
    routed = routed[~first]
    r = pd.DataFrame(win.runs(routed["doc"], routed["pos"], routed["first_doc"], routed["first_pos"]))
    r["length"] = r["windows"] + (width - 1)
    stats = dedup.save_part(r.drop(columns=["windows"]), folder, i)
    stats["outputs"] = stats.get("outputs", []) + dedup.save_part(kept, anchors, i).get("outputs", [])
    return stats


def _fetch_task(requests, tokens_path, folder, j) -> dict:
    """The tokens runs claim from this partition's documents, once per requesting partition and span."""
    req = requests.assign(part=requests["doc"].to_numpy(dtype=np.int64) >> dedup.DOC_SHIFT)
    req = req[["part", "first_doc", "first_start", "length"]].drop_duplicates().sort_values(
        ["part", "first_doc", "first_start", "length"], ignore_index=True)
    docs, flat, offsets = read_tokens(tokens_path)
    at = np.searchsorted(docs, req["first_doc"].to_numpy(dtype=np.int64))
    begin = offsets[at] + req["first_start"].to_numpy(dtype=np.int64) if len(req) else at
    # base64 text: Dask turns object columns into strings, which raw bytes would not survive
    blobs = [base64.b64encode(flat[b:b + n].tobytes()).decode("ascii")
             for b, n in zip(np.asarray(begin).tolist(), req["length"].tolist())]
    return dedup.save_part(req.assign(tokens=pd.array(blobs, dtype=STRING_DTYPE)), folder, j)


def _verify_task(inputs, i, fetched, runs_path, tokens_path, local_path, anchors_path, folder, audit,
                 settings) -> dict:
    """Every run compared with its fetched first occurrence; each document loses its verified repeats
    less the tokens of first occurrences (and of failed comparisons); the partition's byte ranges and
    audit."""
    width = settings.min_tokens
    length, inside, _ = win.token_tables(settings.tokenizer)
    docs, flat, offsets = read_tokens(tokens_path)
    claimed = {(a, b, c): t for a, b, c, t in zip(fetched["first_doc"].tolist(), fetched["first_start"].tolist(),
                                                   fetched["length"].tolist(), fetched["tokens"].tolist())}
    r = dedup.load_part(runs_path)
    local = dedup.load_part(local_path)
    found = []
    for d, s, fd, fs, n in zip(*(r[k].tolist() for k in ("doc", "start", "first_doc", "first_start", "length"))):
        at = int(np.searchsorted(docs, d))
        a = flat[offsets[at] + s: offsets[at] + s + n]
        b = np.frombuffer(base64.b64decode(claimed.get((fd, fs, n), "")), dtype=np.uint32)
        ok, failed = win.verify_windows(a, b, s, width)
        found += [(d, x, y, False) for x, y in ok] + [(d, x, y, True) for x, y in failed]
    cross = pd.DataFrame(found, columns=["doc", "start", "end", "keep"]).astype(local.dtypes.to_dict())
    kept = dedup.load_part(anchors_path).assign(keep=True).astype(local.dtypes.to_dict())
    tok = pd.concat([local, cross, kept], ignore_index=True)
    keep_of = {d: list(zip(g["start"].tolist(), g["end"].tolist()))
               for d, g in tok[tok["keep"].to_numpy(dtype=bool)].groupby("doc", sort=False)}
    out, saved = [], 0
    for d, group in tok[~tok["keep"].to_numpy(dtype=bool)].groupby("doc", sort=True):
        at = int(np.searchsorted(docs, d))
        ids = flat[offsets[at]:offsets[at + 1]]
        ranges, n = win.removed_tokens(list(zip(group["start"].tolist(), group["end"].tolist())),
                                       keep_of.get(d, []), len(ids))
        saved += n
        out += [(d, a, b, d in keep_of) for a, b in win.byte_ranges(ids, ranges, length, inside)]
    removals = pd.DataFrame(out, columns=["doc", "start", "end", "held"]).astype(
        {"doc": np.int64, "start": np.int64, "end": np.int64, "held": bool})
    stats = dedup.save_part(removals, folder, i)
    df = inputs.read(i)
    _, table = apply_byte_removals(df, removals, settings.min_words)
    stats["outputs"] = stats.get("outputs", []) + dedup.save_part(table, audit, i).get("outputs", [])
    from curate.stages.dedup.spans import audit_stats, text_bytes

    stats.update(audit_stats(table))
    stats["bytes_in"] = text_bytes(df)
    stats["runs"] = len(r)
    stats["repeated_tokens_kept"] = saved
    held = removals.drop_duplicates("doc")
    short = table["words_left"].to_numpy() < max(settings.min_words, 1)
    stats["short_documents_kept"] = int((short & held["held"].to_numpy(dtype=bool)).sum()) if len(table) else 0
    return stats


def _final_task(inputs, i, removals_path, min_words) -> pd.DataFrame:
    return apply_byte_removals(inputs.read(i), dedup.load_part(removals_path), min_words)[0]


# --------------------------------------------------------------------------- the stage


def capped_partitions(ctx):
    """``ctx`` with its ``io.blocksize`` at most MAX_PARTITION_BYTES."""
    import dataclasses

    from curate.stages.stage import parse_bytes

    n = MAX_PARTITION_BYTES
    if parse_bytes(ctx.io.blocksize, "blocksize") <= n:
        return ctx
    return dataclasses.replace(ctx, io=dataclasses.replace(ctx.io, blocksize=f"{n >> 20}MiB" if n % (1 << 20) == 0 else str(n)))


class SubstringDedupStage(Stage):
    """Remove every span of at least --min-tokens tokens from all its occurrences but the first."""

    name = "substring_dedup"
    Settings = SubstringDedupSettings
    cli = ("dedup", "substrings")
    help = "remove every span of --min-tokens or more tokens (default 50) from all its occurrences but the first " \
           "(Lee et al. 2022), each match verified token by token"

    @staticmethod
    def partition_cap() -> int:
        """The largest input partition the stage reads (what an out-of-memory message names)."""
        return MAX_PARTITION_BYTES

    def check(self, settings, inputs) -> None:
        win.token_tables(settings.tokenizer)  # an unknown or unloadable encoding: refused before any work

    def run(self, settings, ctx) -> dict:
        import dask

        from curate.stages import dataset
        from curate.stages.dedup.spans import merge_stats

        ctx = capped_partitions(ctx)
        ddf = dataset.read_dataset(ctx.input, ctx.io, rejects_dir=ctx.output)
        inputs = dedup.Inputs(ctx, ddf)
        nparts = len(inputs)
        steps = dedup.Steps(ctx, self.name)
        local, tokens = steps.side("local", "windows"), steps.side("tokens", "windows")
        task = dask.delayed(_windows_task, pure=False)
        info = steps.run("windows", lambda folder: [task(part, i, folder, local, tokens, settings)
                                                    for i, part in enumerate(ddf.to_delayed())],
                         extra_dirs=(local, tokens))
        extra = {"min_tokens": settings.min_tokens, "tokenizer": settings.tokenizer,
                 "tokens": int(sum(p.get("tokens", 0) for p in info["parts"])),
                 "windows": int(sum(p.get("windows", 0) for p in info["parts"]))}

        def matches(folder):
            shuffled = dedup.read_parts(steps.path("windows")).shuffle(on="hash")
            t = dask.delayed(_matches_task, pure=False)
            return [t(part, folder, i) for i, part in enumerate(shuffled.to_delayed())]

        steps.run("matches", matches)

        anchors = steps.side("anchors", "runs")

        def runs(folder):
            routed = dedup.route_to_input(dedup.read_parts(steps.path("matches")), "doc", nparts)
            t = dask.delayed(_runs_task, pure=False)
            return [t(r, folder, anchors, i, settings.min_tokens) for i, r in enumerate(routed)]

        steps.run("runs", runs, extra_dirs=(anchors,))
        token_paths = dedup.list_parts(tokens)

        def fetch(folder):
            routed = dedup.route_to_input(dedup.read_parts(steps.path("runs")), "first_doc", nparts)
            t = dask.delayed(_fetch_task, pure=False)
            return [t(r, token_paths[j], folder, j) for j, r in enumerate(routed)]

        steps.run("fetched", fetch)
        audit = steps.folder(dedup.DUPLICATES)
        run_paths, local_paths = dedup.list_parts(steps.path("runs")), dedup.list_parts(local)
        anchor_paths = dedup.list_parts(anchors)

        def verify(folder):
            routed = dedup.route_to_parts(dedup.read_parts(steps.path("fetched")), "part", nparts)
            t = dask.delayed(_verify_task, pure=False)
            return [t(inputs.only(i), i, f, run_paths[i], token_paths[i], local_paths[i], anchor_paths[i], folder, audit,
                      settings) for i, f in enumerate(routed)]

        info = steps.run("verified", verify, extra_dirs=(audit,))
        extra.update(merge_stats(info["parts"]))
        paths = dedup.list_parts(steps.path("verified"))
        marked = dataset.Made(_final_task, [(inputs.only(i), i, paths[i], settings.min_words) for i in range(nparts)],
                              inputs.meta)
        return dataset.write_dataset(marked, ctx, stage=self.name, settings=settings, reject_columns=("id",),
                                     extra={"dedup": extra, "steps": steps.timings}, records=steps.records())
