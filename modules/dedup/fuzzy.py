"""``fuzzy_dedup``: remove near duplicates with MinHash-LSH, on CPU workers, every step distributed.

``curate dedup fuzzy --input D --output OUT [--threshold 0.8] [--num-perm 128] [--bands B --rows R]
[--ngram 5] [--shingle word|char] [--seed 42] [--false-positive-check]``

Steps, each writing Parquet under ``OUT/_work/<step>/`` (resumable, see :mod:`curate.stages.dedup`):

1. ``signatures``: per input partition, (doc, id, sig) where ``sig`` is the MinHash signature
   (``num_perm`` little-endian uint32 as one fixed-size binary value) of the document's shingles
   (:mod:`curate.stages.dedup.minhash`: datasketch's definition, computed by a numba kernel). Documents
   already dropped upstream and documents without shingles (empty after normalising) are left out.
2. ``buckets``: per signatures part, one (bucket, doc) row per band (:mod:`curate.stages.dedup.lsh`).
3. ``edges``: shuffle on ``bucket``; in every bucket of two or more documents each member is linked
   to the bucket's smallest document (star edges: k - 1 edges per bucket, not k(k-1)/2 pairs);
   shuffle on the edge's larger end to drop repeats. Rows (u, v), u > v.
4. ``verified`` (``--false-positive-check`` only): the true Jaccard similarity of each edge's two
   shingle sets; edges below the threshold are dropped. The texts come from the input partitions:
   edges are range-partitioned by ``u`` next to their input partition, then by ``v``.
5. ``components``: connected components (:mod:`curate.stages.dedup.components`), distributed large-star /
   small-star, or union-find in one task when there are at most ``in_memory_edges`` edges.
6. ``members``: components go back to their input partitions to pick up ids, then a shuffle on the
   component: (doc, comp, id), every component in one partition.
7. ``refine/round-NN`` (``--false-positive-check`` only): a document is removed only if its own true
   Jaccard similarity to the document it is removed for reaches the threshold (see below), so a
   chain A ~ B ~ C never removes C for a far-away A; a component can then keep more than one document.
8. ``duplicates``: without the check, each component keeps its smallest id and the rest are removed.
   Writes (doc, id, component, kept_id, removed) and, for audit, ``OUT/_duplicates/`` with (id,
   component, kept_id, removed) for every document of every component of two or more
   (``component`` is the smallest document number in it, ``kept_id`` the document it was removed for).
9. The dataset, with the removed documents dropped as ``fuzzy_duplicate`` (``_rejects/`` holds their
   ids, ``_detail`` names the kept id). Output partition i is input partition i.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from curate.stages import dedup
from curate.stages.dedup import keep as keeping
from curate.stages.errors import SettingsError
from curate.stages.stage import Stage, check_choice, check_range

REASON = "fuzzy_duplicate"


@dataclass(frozen=True)
class FuzzyDedupSettings:
    threshold: float = field(default=0.8, metadata={
        "help": "Jaccard similarity of near duplicates; chooses bands x rows unless both are given "
                "(the most rows per band that make a pair at the threshold a candidate with p >= 0.99)",
        "metavar": "T"})
    num_perm: int = field(default=128, metadata={"help": "MinHash permutations (signature length)",
                                                    "metavar": "N"})
    bands: int | None = field(default=None, metadata={"help": "LSH bands (with --rows)", "metavar": "B"})
    rows: int | None = field(default=None, metadata={"help": "LSH rows per band (with --bands)", "metavar": "R"})
    ngram: int = field(default=5, metadata={"help": "shingle size in words (or characters)", "metavar": "N"})
    shingle: str = field(default="word", metadata={"help": "shingles of words or of characters",
                                                   "choices": ("word", "char")})
    seed: int = field(default=42, metadata={"help": "seed of the MinHash permutations", "metavar": "S"})
    false_positive_check: bool = field(default=True, metadata={
        "help": "compute the true Jaccard of candidate pairs and drop those below the threshold; remove a "
                "document only for one it is itself similar to (--no-false-positive-check: trust the bands)"})
    in_memory_edges: int = field(default=1_000_000, metadata={
        "help": "connected components in one task when there are at most this many edges (0: always distributed)",
        "metavar": "N"})
    keep: str = field(default=keeping.DEFAULT, metadata={
        "help": "the survivor of each group: smallest-id, newest[:COLUMN] / oldest[:COLUMN] (a date column, "
                "default warc_date), longest (text), priority:COLUMN (largest value); ties: smallest id",
        "metavar": "POLICY"})

    def __post_init__(self):
        keeping.parse(self.keep)
        if not 0.0 < self.threshold < 1.0:
            raise SettingsError(f"threshold must be between 0 and 1 (exclusive); got {self.threshold!r}")
        check_range(self, "num_perm", 1, 8192)
        check_range(self, "ngram", 1, 1000)
        check_range(self, "seed", 0, 2**32 - 1)
        check_range(self, "in_memory_edges", 0)
        check_choice(self, "shingle")
        if (self.bands is None) != (self.rows is None):
            raise SettingsError(f"bands and rows go together; got bands={self.bands!r} rows={self.rows!r}")
        if self.bands is not None:
            check_range(self, "bands", 1)
            check_range(self, "rows", 1)
            if self.bands * self.rows > self.num_perm:
                raise SettingsError(
                    f"bands x rows must be at most num_perm ({self.num_perm}); got {self.bands} x {self.rows}")

    def lsh_params(self) -> tuple[int, int]:
        """(bands, rows): given, or derived from the threshold (call once, on the client)."""
        if self.bands is not None:
            return self.bands, self.rows
        from curate.stages.dedup.lsh import recall_params

        return recall_params(self.threshold, self.num_perm)


# --------------------------------------------------------------------------- per-partition work


def signature_table(df: pd.DataFrame, partition: int, settings: FuzzyDedupSettings, where: str = ""):
    """(doc, id, sig, key, weight) of the documents of one input partition that have shingles, as an
    Arrow table (``key``: the keep policy's, smaller is kept; ``weight``: what the document stands for)."""
    import pyarrow as pa

    from curate.stages.dataset import STRING
    from curate.stages.dedup import minhash

    pos = dedup.good_rows(df)
    sig, counts = minhash.signatures(df["text"].iloc[pos], settings.num_perm, settings.seed, settings.ngram,
                                     settings.shingle)
    keep = counts > 0
    sig = np.ascontiguousarray(sig[keep])
    width = 4 * settings.num_perm
    arr = pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), len(sig), [None, pa.py_buffer(sig.astype("<u4"))])
    ids = pa.array(df["id"].iloc[pos[keep]].astype(STRING).array)
    rows = pos[keep]
    key = keeping.keys(df, rows, keeping.parse(settings.keep), where or f"input partition {partition}")
    return pa.table({"doc": pa.array(dedup.doc_numbers(partition, rows)), "id": ids, "sig": arr,
                     "key": pa.array(key, type=pa.float64()), "weight": pa.array(keeping.weights(df, rows))})


def read_signatures(path: str, num_perm: int) -> tuple[np.ndarray, np.ndarray]:
    """(doc numbers, uint32 signatures (n, num_perm)) of one signatures part."""
    import pyarrow.parquet as pq

    table = pq.read_table(path, columns=["doc", "sig"])
    doc = table.column("doc").to_numpy()
    col = table.column("sig").combine_chunks()
    if len(col) == 0:
        return doc, np.zeros((0, num_perm), dtype=np.uint32)
    flat = np.frombuffer(col.buffers()[1], dtype="<u4")
    return doc, flat[col.offset * num_perm:(col.offset + len(col)) * num_perm].reshape(-1, num_perm)


def bucket_frame(path: str, settings: FuzzyDedupSettings, bands: int, rows: int) -> pd.DataFrame:
    """(bucket, doc): one row per document and band (``bands`` x ``rows`` resolved on the client)."""
    from curate.stages.dedup.lsh import band_keys

    doc, sig = read_signatures(path, settings.num_perm)
    keys = band_keys(sig, bands, rows)
    return pd.DataFrame({"bucket": keys.ravel(), "doc": np.repeat(doc.astype(np.int64), bands)})


def star_edges(buckets: pd.DataFrame) -> pd.DataFrame:
    """Within each bucket, an edge from every member to the bucket's smallest document."""
    b = buckets["bucket"].to_numpy(dtype=np.uint64)
    d = buckets["doc"].to_numpy(dtype=np.int64)
    order = np.lexsort((d, b))
    b, d = b[order], d[order]
    first = np.ones(len(b), dtype=bool)
    first[1:] = b[1:] != b[:-1]
    anchor = d[np.maximum.accumulate(np.where(first, np.arange(len(b)), 0))] if len(b) else d
    return pd.DataFrame({"u": d[~first], "v": anchor[~first]})


def attach_text(edges: pd.DataFrame, part: pd.DataFrame, key: str, name: str) -> pd.DataFrame:
    """``edges`` with the text of the document numbered ``edges[key]`` (all in this input partition)."""
    from curate.stages.dataset import STRING

    rows = edges[key].to_numpy(dtype=np.int64) & dedup.ROW_MASK
    return edges.assign(**{name: part["text"].iloc[rows].astype(STRING).to_numpy()})


def verify_edges(edges: pd.DataFrame, settings: FuzzyDedupSettings) -> pd.DataFrame:
    """(u, v, jaccard) of the edges whose true Jaccard similarity reaches the threshold."""
    from curate.stages.dedup import minhash

    jac = minhash.jaccard(edges["text_u"], edges["text_v"], settings.ngram, settings.shingle)
    keep = jac >= settings.threshold
    return pd.DataFrame({"u": edges["u"].to_numpy(dtype=np.int64)[keep],
                         "v": edges["v"].to_numpy(dtype=np.int64)[keep], "jaccard": jac[keep]})


#: what a member of a component carries: its rank (key, id, doc) and what it stands for (weight)
MEMBER_COLUMNS = ["doc", "comp", "id", "key", "weight"]


def attach_ids(comps: pd.DataFrame, sig_path: str) -> pd.DataFrame:
    """(doc, comp, id, key, weight): the components of one input partition's documents, with their
    ids, keep keys and weights."""
    comps = comps.drop_duplicates("doc")
    ids = dedup.load_part(sig_path, ["doc", "id", "key", "weight"])
    return comps.merge(ids, on="doc", how="left", validate="one_to_one")


def component_duplicates(df: pd.DataFrame) -> pd.DataFrame:
    """Per component: the kept id (the first by the keep rank: key, smallest id, document number) and
    who is removed (without the false-positive check: all the others)."""
    from curate.stages.dataset import STRING

    df = keeping.rank_order(df, ("comp",))
    first = df.groupby("comp", sort=False)
    kept_doc = first["doc"].transform("first").to_numpy()
    return pd.DataFrame({
        "doc": df["doc"].to_numpy(dtype=np.int64),
        "id": df["id"].to_numpy(),
        "component": df["comp"].to_numpy(dtype=np.int64),
        "kept_id": first["id"].transform("first").to_numpy(),
        "kept_doc": kept_doc.astype(np.int64),
        "removed": df["doc"].to_numpy() != kept_doc,
        "weight": df["weight"].to_numpy(dtype=np.int64),
    }).astype({"id": STRING, "kept_id": STRING})


def group_sizes(df: pd.DataFrame) -> np.ndarray:
    """int64 per row: on a kept document, its weight plus the weights of the documents removed for it
    (every member of its component must be in ``df``); 0 on a removed one."""
    total = df.groupby("kept_doc", sort=False)["weight"].transform("sum").to_numpy(dtype=np.int64)
    return np.where(df["removed"].to_numpy(dtype=bool), 0, total)


# --------------------------------------------------------------------------- false-positive check of removals
# Edges that pass the check are similar pairs, but a component is their transitive closure: along a
# chain A ~ B ~ C, A and C can be far apart. With the check on, a document is removed only when its
# own similarity to the kept document reaches the threshold. Each round, the undecided members of
# every component take the smallest of them as representative; members close enough to it are
# removed (kept_id = the representative), the representative is kept, the others stay undecided.
# Most components are decided in one round; a chain needs about one round per threshold-sized step.

#: after this many rounds the still undecided documents are kept (never removed unverified)
MAX_REFINE_ROUNDS = 16


def pick_representatives(df: pd.DataFrame) -> pd.DataFrame:
    """(doc, comp, id, key, weight, rep, rep_id): each undecided member with its component's first
    member by the keep rank (key, smallest id, document number)."""
    df = keeping.rank_order(df, ("comp",))
    first = df.groupby("comp", sort=False)
    columns = [c for c in (*MEMBER_COLUMNS, "tier") if c in df.columns]
    return df[columns].assign(rep=first["doc"].transform("first").to_numpy(dtype=np.int64),
                              rep_id=first["id"].transform("first").to_numpy())


def split_pairs(df: pd.DataFrame, pairs: bool) -> pd.DataFrame:
    """The members of components of exactly two documents (``pairs``) or of the larger ones."""
    size = df.groupby("comp", sort=False)["doc"].transform("size").to_numpy()
    return df[(size == 2) == pairs]


def decide_pairs(df: pd.DataFrame, threshold: float) -> pd.DataFrame:
    """Decisions for components of two documents, without their texts: such a component is one edge
    that passed the true-Jaccard check, so the larger id is removed for the smaller. (About nine in
    ten components are pairs; they no longer fetch two texts per member.)"""
    return decide(pick_representatives(df).assign(jaccard=1.0), threshold, last=True)


def verify_representatives(df: pd.DataFrame, settings: FuzzyDedupSettings) -> pd.DataFrame:
    """Drop the texts, add the true Jaccard similarity of each member to its representative."""
    from curate.stages.dedup import minhash

    jac = minhash.jaccard(df["text_doc"], df["text_rep"], settings.ngram, settings.shingle)
    jac[df["doc"].to_numpy() == df["rep"].to_numpy()] = 1.0
    return df.drop(columns=["text_doc", "text_rep"]).assign(jaccard=jac)


def decide(df: pd.DataFrame, threshold: float, last: bool) -> pd.DataFrame:
    """(doc, id, component, kept_id, kept_doc, removed, decided, key, weight) after one round."""
    from curate.stages.dataset import STRING

    df = keeping.rank_order(df, ("comp",))
    close = df["jaccard"].to_numpy() >= threshold
    is_rep = df["doc"].to_numpy() == df["rep"].to_numpy()
    doc = df["doc"].to_numpy(dtype=np.int64)
    out = pd.DataFrame({
        "doc": doc,
        "id": df["id"].to_numpy(),
        "component": df["comp"].to_numpy(dtype=np.int64),
        "kept_id": np.where(close, df["rep_id"].to_numpy(), df["id"].to_numpy()),
        "kept_doc": np.where(close, df["rep"].to_numpy(dtype=np.int64), doc),
        "removed": close & ~is_rep,
        "decided": close | last,
        "key": df["key"].to_numpy(dtype=np.float64) if "key" in df.columns else np.zeros(len(df)),
        "weight": df["weight"].to_numpy(dtype=np.int64) if "weight" in df.columns else np.ones(len(df), np.int64),
    })
    if "tier" in df.columns:
        out["tier"] = df["tier"].to_numpy()
    return out.astype({"id": STRING, "kept_id": STRING})


# --------------------------------------------------------------------------- tasks (one per partition)


def _signatures_task(df, i, folder, settings, where=""):
    return dedup.save_table(signature_table(df, i, settings, where), folder, i)


def _buckets_task(path, i, folder, settings, bands, rows):
    return dedup.save_part(bucket_frame(path, settings, bands, rows), folder, i)


def _dedupe_edges(df):
    from curate.stages.dedup.components import canonical

    return canonical(df["u"], df["v"])


def _members_task(df, folder, i):
    stats = dedup.save_part(keeping.rank_order(df, ("comp",)), folder, i)
    stats["components"] = int(df["comp"].nunique())
    return stats


def _decide_task(df, folder, i, threshold, last):
    out = decide(df, threshold, last)
    stats = dedup.save_part(out, folder, i)
    stats["undecided"] = int((~out["decided"]).sum())
    return stats


def _decide_pairs_task(df, folder, i, threshold):
    out = decide_pairs(df, threshold)
    stats = dedup.save_part(out, folder, i)
    stats["undecided"] = 0
    return stats


def _duplicates_task(df, folder, audit, i):
    out = df if "component" in df.columns else component_duplicates(df)
    out = out.assign(size=group_sizes(out))[["doc", "id", "component", "kept_id", "removed", "size"]]
    audit_stats = dedup.save_part(out.drop(columns=["doc", "size"]), audit, i)
    stats = dedup.save_part(out, folder, i)
    stats["outputs"] = stats.get("outputs", []) + audit_stats.get("outputs", [])
    stats["removed"] = int(out["removed"].sum())
    stats["kept"] = int((~out["removed"]).sum())
    return stats


def input_texts(inputs, i: int) -> pd.DataFrame:
    """The ``text`` column of input partition ``i``, rows at the positions ``read_dataset`` gives them.

    A Parquet piece is read for its text column alone (its row order does not depend on the other
    columns); JSONL has to be parsed whole anyway."""
    from curate.stages.dataset import parquet_source
    from curate.stages.errors import DataError

    piece = inputs.pieces[i]
    if piece.kind != "parquet":
        return inputs.read(i)[["text"]]
    import pyarrow.parquet as pq

    field = inputs.io.text_field
    try:
        pf = pq.ParquetFile(parquet_source(piece.path))
        table = (pf.read_row_groups(list(piece.row_groups), columns=[field]) if piece.row_groups is not None
                 else pf.read(columns=[field]))
    except Exception as e:
        raise DataError(f"{piece.path}: cannot read column {field!r} from Parquet: {e}") from e
    return pd.DataFrame({"text": table.column(field).to_pandas()})


def _attach_text_task(edges, inputs, i, key, name):
    from curate.stages.dataset import STRING

    if edges.empty:  # no edge ends in this partition: nothing to read
        return edges.assign(**{name: pd.Series([], dtype=STRING, index=edges.index)})
    return attach_text(edges, input_texts(inputs, i), key, name)


def with_texts(frame, inputs, keys):
    """Delayed frames: ``frame`` with, for each (column, name) of ``keys``, the text of the document
    numbered by that column, fetched from its input partition (one range shuffle per key)."""
    import dask
    import dask.dataframe as dd

    from curate.stages.dataset import STRING

    attach = dask.delayed(_attach_text_task, pure=True)
    parts, meta = None, frame._meta
    for column, name in keys:
        if parts is not None:
            frame = dd.from_delayed(parts, meta=meta, divisions=[None] * (len(parts) + 1), verify_meta=False)
        parts = [attach(e, inputs, i, column, name)
                 for i, e in enumerate(dedup.route_to_input(frame, column, len(inputs)))]
        meta = meta.assign(**{name: pd.Series([], dtype=STRING)})
    return parts, meta


def refine_removals(steps, inputs, settings: FuzzyDedupSettings):
    """Rounds of representatives (``refine/round-NN`` steps) over the members of every component;
    returns (a Dask DataFrame of every member's decision, the number of rounds)."""
    import dask
    import dask.dataframe as dd

    from curate.stages.dataset import STRING
    from curate.stages.dedup.components import EDGE_META

    reps_meta = pd.DataFrame({"doc": EDGE_META["u"], "comp": EDGE_META["u"], "id": pd.Series([], dtype=STRING),
                              "key": pd.Series([], dtype="float64"), "weight": EDGE_META["u"],
                              "rep": EDGE_META["u"], "rep_id": pd.Series([], dtype=STRING)})
    source, rounds = steps.path("members"), []
    for k in range(1, MAX_REFINE_ROUNDS + 1):
        def refine(folder, source=source, last=(k == MAX_REFINE_ROUNDS)):
            undecided = dedup.read_parts(source)
            pairs = []
            if "decided" in undecided.columns:
                undecided = undecided[~undecided["decided"]].rename(columns={"component": "comp"})
                undecided = undecided[MEMBER_COLUMNS]
            else:  # round 1, on the members (every component within one partition): pairs need no text
                pair = dask.delayed(_decide_pairs_task, pure=False)
                pairs = [pair(part, folder, i, settings.threshold) for i, part in enumerate(
                    undecided.map_partitions(split_pairs, True, meta=undecided._meta).to_delayed())]
                undecided = undecided.map_partitions(split_pairs, False, meta=undecided._meta)
            reps = undecided.map_partitions(pick_representatives, meta=reps_meta)
            parts, meta = with_texts(reps, inputs, [("doc", "text_doc"), ("rep", "text_rep")])
            check = dask.delayed(verify_representatives, pure=True)
            meta = meta.drop(columns=["text_doc", "text_rep"]).assign(jaccard=pd.Series([], dtype="float64"))
            checked = dd.from_delayed([check(p, settings) for p in parts], meta=meta,
                                      divisions=[None] * (len(parts) + 1), verify_meta=False)
            task = dask.delayed(_decide_task, pure=False)
            return pairs + [task(part, folder, len(pairs) + i, settings.threshold, last)
                            for i, part in enumerate(checked.shuffle(on="comp").to_delayed())]

        name = f"refine/round-{k:02d}"
        info = steps.run(name, refine)
        source = steps.path(name)
        rounds.append(source)
        if sum(p["undecided"] for p in info["parts"]) == 0:
            break
    files = [f for d in rounds for f in dedup.list_parts(d)]
    decisions = dd.from_map(dedup.load_part, files, meta=dedup.load_part(files[0]).iloc[:0],
                            enforce_metadata=False, divisions=[None] * (len(files) + 1))
    return decisions[decisions["decided"]], len(rounds)


class FuzzyDedupStage(Stage):
    """Remove near duplicates (MinHash-LSH), keeping the smallest id of each connected component
    (with --false-positive-check: of each group of documents verified similar to the kept one)."""

    name = "fuzzy_dedup"
    Settings = FuzzyDedupSettings
    cli = ("dedup", "fuzzy")
    help = "remove near duplicates (MinHash-LSH + connected components), keep the smallest id"

    def check(self, settings, inputs) -> None:
        keeping.check_inputs(keeping.parse(settings.keep), inputs)

    def run(self, settings, ctx) -> dict:
        import dask
        import dask.dataframe as dd

        from curate.stages import dataset
        from curate.stages.dedup import components
        from curate.stages.dedup.components import EDGE_META

        ddf = dataset.read_dataset(ctx.input, ctx.io, rejects_dir=ctx.output)
        nparts = ddf.npartitions
        inputs = dedup.Inputs(ctx, ddf)
        steps = dedup.Steps(ctx, self.name)
        bands, rows = settings.lsh_params()
        save = dask.delayed(dedup.save_part, pure=False)

        sig_task = dask.delayed(_signatures_task, pure=False)
        steps.run("signatures", lambda folder: [sig_task(part, i, folder, settings, inputs.pieces[i].path)
                                                for i, part in enumerate(ddf.to_delayed())])
        sig_files = dedup.list_parts(steps.path("signatures"))

        bucket_task = dask.delayed(_buckets_task, pure=False)
        steps.run("buckets", lambda folder: [bucket_task(path, i, folder, settings, bands, rows)
                                             for i, path in enumerate(sig_files)])

        def edges(folder):
            shuffled = dedup.read_parts(steps.path("buckets")).shuffle(on="bucket")
            star = shuffled.map_partitions(star_edges, meta=EDGE_META)
            return dedup.save_tasks(star.shuffle(on="u"), folder, _dedupe_edges)

        steps.run("edges", edges)
        graph = "edges"

        if settings.false_positive_check:
            def verified(folder):
                parts, _ = with_texts(dedup.read_parts(steps.path("edges")), inputs,
                                      [("u", "text_u"), ("v", "text_v")])
                check = dask.delayed(verify_edges, pure=True)
                return [save(check(e, settings), folder, i) for i, e in enumerate(parts)]

            steps.run("verified", verified)
            graph = "verified"

        cc = components.run(steps, graph, "components", settings.in_memory_edges)

        def members(folder):
            comps = dedup.read_parts(steps.path("components"), columns=["doc", "comp"])
            attach = dask.delayed(attach_ids, pure=True)
            with_ids = [attach(c, path) for c, path in zip(dedup.route_to_input(comps, "doc", nparts), sig_files)]
            meta = pd.DataFrame({"doc": pd.Series([], dtype="int64"), "comp": pd.Series([], dtype="int64"),
                                 "id": pd.Series([], dtype=dataset.STRING), "key": pd.Series([], dtype="float64"),
                                 "weight": pd.Series([], dtype="int64")})
            by_comp = dd.from_delayed(with_ids, meta=meta, divisions=[None] * (nparts + 1),
                                      verify_meta=False).shuffle(on="comp")
            task = dask.delayed(_members_task, pure=False)
            return [task(part, folder, i) for i, part in enumerate(by_comp.to_delayed())]

        steps.run("members", members)

        if settings.false_positive_check:
            decisions, refine_rounds = refine_removals(steps, inputs, settings)
            decisions = decisions.shuffle(on="component")  # a group's size needs all its members
        else:
            decisions, refine_rounds = dedup.read_parts(steps.path("members")), 0

        audit = steps.folder(dedup.DUPLICATES)
        info = steps.run("duplicates", lambda folder: [
            dask.delayed(_duplicates_task, pure=False)(part, folder, audit, i)
            for i, part in enumerate(decisions.to_delayed())], extra_dirs=(audit,))
        marked = dedup.removal_frame(inputs, steps, "duplicates", REASON)
        removed = sum(p.get("removed", 0) for p in info["parts"])
        extra = {
            "dedup": {
                "bands": bands, "rows": rows, "threshold": settings.threshold,
                "signatures": steps.done("signatures")["rows"],
                "edges": steps.done("edges")["rows"],
                "verified_edges": steps.done("verified")["rows"] if settings.false_positive_check else None,
                "components": sum(p["components"] for p in steps.done("members")["parts"]),
                "documents_in_components": info["rows"],
                "kept_in_components": info["rows"] - removed,
                "removed": removed,
                "refine_rounds": refine_rounds,
                "connected_components": cc,
            },
            "steps": steps.timings,
        }
        return dataset.write_dataset(marked, ctx, stage=self.name, settings=settings,
                                     reject_columns=("id",), extra=extra, records=steps.records())
