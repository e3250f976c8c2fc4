"""``exact_dedup``: remove documents whose text is byte-for-byte identical to another's.

``curate dedup exact --input D --output OUT [--hash md5|xxh3] [--keep POLICY] [--save-index IDX]
[--against IDX [IDX ...]]``

The hash is 128 bits of the UTF-8 text, unchanged (no normalisation): ``md5`` by default, as NeMo
Curator does, or ``xxh3`` (XXH3-128, several times faster, not cryptographic; at 128 bits accidental
collisions are as unlikely as with md5). Steps, each Parquet under ``OUT.side/_work/`` and resumable:

1. ``hashes``: per input partition, (doc, id, h1, h2, key, weight) for every document not already
   dropped (``h1``/``h2`` are the two 64-bit halves of the hash, ``key`` and ``weight`` the keep policy's
   rank and what the document stands for, :mod:`curate.stages.dedup.keep`).
2. ``duplicates``: shuffle on ``h1``; in each partition, every group of two or more documents with the
   same hash keeps its first by ``--keep`` (default the smallest id; ties: the smallest id, then the
   first document read). Writes (doc, id, hash, kept_id, removed, size) and, for audit,
   ``OUT.side/_duplicates/`` with (id, hash, kept_id, removed) for every member of every such group (the
   kept document has ``id == kept_id``; ``size`` is its group's ``dup_cluster_size``).
3. The removed documents go back to their input partitions (a range shuffle on the document number)
   and the dataset is written with them dropped as ``exact_duplicate`` (``_rejects/`` holds their
   ids, ``_detail`` names the kept id) and ``dup_cluster_size`` on every kept document. Output
   partition i is input partition i.

``--save-index IDX`` also writes the text hash and id of every kept document, partitioned by hash
(:mod:`curate.stages.dedup.index`). ``--against IDX ...`` adds the step ``indexed`` before
``duplicates``: this run's hashes go to the index parts that may hold them (a range shuffle per index),
and each index row of a hash this run has joins that hash group as a member ranked before this run's
documents (``tier``; doc -1). So every document whose text an index holds is removed for the index's
kept id (``_detail``: ``duplicate of ID in index IDX``) and the others are deduplicated among
themselves as without an index: exactly what ``dedup(A + B)`` removes from B when A's documents are
preferred, since A's kept document of each text is the first of its group there too.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from curate.stages import dedup
from curate.stages.dedup import keep as keeping
from curate.stages.stage import Stage, check_choice

REASON = "exact_duplicate"


@dataclass(frozen=True)
class ExactDedupSettings:
    hash: str = field(default="md5", metadata={
        "help": "128-bit hash of the text: md5 (as NeMo Curator) or xxh3 (XXH3-128, faster)",
        "choices": ("md5", "xxh3"),
    })
    keep: str = field(default=keeping.DEFAULT, metadata={
        "help": "the survivor of each duplicate group: smallest-id, newest[:COLUMN] / oldest[:COLUMN] (a date "
                "column, default warc_date), longest (text), priority:COLUMN (largest value); ties: smallest id",
        "metavar": "POLICY"})

    save_index: str | None = field(default=None, metadata={
        "help": "also write the dedup index of the kept documents (text hashes and ids) to this directory, a "
                "curate output of its own (manifest, checksums, _SUCCESS, curate verify); with --against: the "
                "index of the union", "metavar": "IDX"})
    against: tuple[str, ...] = field(default=(), metadata={
        "help": "saved indexes (--save-index) to deduplicate against: a document whose text one of them holds is "
                "removed; they are not read whole and the data they came from not at all", "metavar": "IDX",
        "nargs": "+", "input_file": True})

    def __post_init__(self):
        check_choice(self, "hash")
        keeping.parse(self.keep)


def hash_texts(texts, method: str = "md5") -> np.ndarray:
    """uint64 array (n, 2): the 128-bit hash of each text's UTF-8 bytes, big-endian halves."""
    if method == "md5":
        digests = [hashlib.md5(t.encode("utf-8", "surrogatepass")).digest() for t in texts]
    else:
        import xxhash

        digests = [xxhash.xxh3_128_digest(t.encode("utf-8", "surrogatepass")) for t in texts]
    if not digests:
        return np.zeros((0, 2), dtype=np.uint64)
    return np.frombuffer(b"".join(digests), dtype=">u8").astype(np.uint64).reshape(-1, 2)


def hex_hash(h1: np.ndarray, h2: np.ndarray) -> list[str]:
    return [f"{a:016x}{b:016x}" for a, b in zip(h1.tolist(), h2.tolist())]


def hashes(df: pd.DataFrame, partition: int, method: str, policy: keeping.Policy | None = None,
           where: str = "") -> pd.DataFrame:
    """(doc, id, h1, h2, key, weight) for the documents of input partition ``partition`` not already
    dropped (``key``: the keep policy's, smaller is kept; ``weight``: what the document stands for)."""
    from curate.stages.dataset import STRING

    pos = dedup.good_rows(df)
    texts = df["text"].iloc[pos]
    h = hash_texts(texts.fillna("").tolist(), method)
    return pd.DataFrame({
        "doc": dedup.doc_numbers(partition, pos),
        "id": df["id"].iloc[pos].astype(STRING).to_numpy(),
        "h1": h[:, 0],
        "h2": h[:, 1],
        "key": keeping.keys(df, pos, policy or keeping.parse(keeping.DEFAULT), where or f"input partition {partition}"),
        "weight": keeping.weights(df, pos),
    }).astype({"id": STRING})


def duplicate_groups(df: pd.DataFrame, labels: tuple[str, ...] = ()) -> pd.DataFrame:
    """The members of every hash group of two or more, with the kept id (the first by the keep rank:
    tier, key, smallest id, doc) and, on the kept member, the group's size (its weights added).

    In an ``--against`` run the saved indexes' rows of these hashes are members too (``doc`` -1, ``tier``
    the index's position, ``labels`` its name): ranked first, they are kept, so every document of the
    run with such a hash is removed for them (``kept_in`` names the index); they are not listed."""
    from curate.stages.dataset import STRING
    from curate.stages.dedup.shared import rows_sharing

    # only rows whose h1 another row has can be in a group: most texts are one document's
    df = keeping.rank_order(df.iloc[rows_sharing(df["h1"].to_numpy(dtype=np.uint64))], ("h1", "h2"))
    size = df.groupby(["h1", "h2"], sort=False)["doc"].transform("size")
    df = df[size.to_numpy() > 1]
    first = df.groupby(["h1", "h2"], sort=False)
    kept_id = first["id"].transform("first")
    kept_doc = first["doc"].transform("first")
    weight = df["weight"] if "weight" in df.columns else pd.Series(1, index=df.index)
    total = weight.groupby([df["h1"], df["h2"]], sort=False).transform("sum")
    removed = (df["doc"] != kept_doc).to_numpy()
    out = pd.DataFrame({
        "doc": df["doc"].to_numpy(dtype=np.int64),
        "id": df["id"].to_numpy(),
        "hash": hex_hash(df["h1"].to_numpy(), df["h2"].to_numpy()),
        "kept_id": kept_id.to_numpy(),
        "removed": removed,
        "size": np.where(removed, 0, total.to_numpy(dtype=np.int64)),
    })
    if labels:
        tier = first["tier"].transform("first").to_numpy(dtype=np.int64)
        names = np.array([*labels, None], dtype=object)
        out["kept_in"] = pd.array(names[np.minimum(tier, len(labels))], dtype=STRING)
        out = out[out["doc"].to_numpy() >= 0]
    return out.astype({"id": STRING, "hash": STRING, "kept_id": STRING}).reset_index(drop=True)


def kept_hashes(df: pd.DataFrame) -> pd.DataFrame:
    """(h1, h2, id) of the documents of a shuffled partition that stay: the first of each hash by the
    keep rank, when it is one of this run's (what a saved index holds)."""
    df = keeping.rank_order(df, ("h1", "h2"))
    first = ~df.duplicated(["h1", "h2"]).to_numpy()
    mine = df["doc"].to_numpy() >= 0
    return df[first & mine][["h1", "h2", "id"]].reset_index(drop=True)


def indexed_rows(rows: pd.DataFrame, ix, i: int) -> pd.DataFrame:
    """The rows of part ``i`` of index ``ix`` whose hashes ``rows`` (this run's, routed there) also hold,
    as members of their hash groups (doc -1, tier: the index's)."""
    from curate.stages.dataset import STRING

    table = ix.read("hashes", i, ["h1", "h2", "id"])
    wanted = rows[["h1", "h2"]].drop_duplicates()
    hit = table.merge(wanted, on=["h1", "h2"], how="inner")
    return pd.DataFrame({
        "doc": np.full(len(hit), -1, dtype=np.int64), "id": hit["id"].astype(STRING).to_numpy(),
        "h1": hit["h1"].to_numpy(dtype=np.uint64), "h2": hit["h2"].to_numpy(dtype=np.uint64),
        "key": np.zeros(len(hit)), "weight": np.zeros(len(hit), dtype=np.int64),
        "tier": np.full(len(hit), ix.tier0, dtype=np.int64),
    }).astype({"id": STRING})


def _indexed_task(rows, ix, i, folder, j) -> dict:
    return dedup.save_part(indexed_rows(rows, ix, i), folder, j)


def _hashes_task(inputs, i: int, folder: str, method: str, policy: keeping.Policy, where: str) -> dict:
    # the task reads its partition itself: one task per input partition, not a read and a hash
    return dedup.save_part(hashes(inputs.read(i), i, method, policy, where), folder, i)


def _duplicates_task(df: pd.DataFrame, folder: str, audit: str, i: int, labels=(), kept=None) -> dict:
    groups = duplicate_groups(df, labels)
    audit_stats = dedup.save_part(groups.drop(columns=["doc", "size"]), audit, i)
    stats = dedup.save_part(groups, folder, i)
    stats["outputs"] = stats.get("outputs", []) + audit_stats.get("outputs", [])
    if kept is not None:
        stats["outputs"] += dedup.save_part(kept_hashes(df), kept, i).get("outputs", [])
    stats["removed"] = int(groups["removed"].sum())
    if labels:
        stats["removed_for_index"] = int(groups["kept_in"].notna().sum())
    stats.update(duplicate_ids(df[df["doc"].to_numpy() >= 0]))
    return stats


def _index_task(base, i: int, routed: pd.DataFrame, folder) -> dict:
    """Part ``i`` of a saved exact index: the first base's part (if any) and the rows routed to it;
    a hash in two bases keeps the earlier's row."""
    from curate.stages.dedup import index

    parts = [base.read("hashes", i, ["h1", "h2", "id"]).assign(tier=np.int64(base.tier0))] if base else []
    rows = pd.concat([*parts, routed], ignore_index=True)
    rows = rows.sort_values(["h1", "h2", "tier"], kind="stable").drop_duplicates(["h1", "h2"])
    return index.write_table(rows.drop(columns=["tier"]), folder, i, sort=("h1", "h2"))


#: how many duplicate ids the manifest lists as examples
ID_EXAMPLES = 10


def duplicate_ids(df: pd.DataFrame) -> dict:
    """Ids this shuffled partition holds more than once. Every copy of a document (same text) lands
    in the same partition, so an input read twice is always caught; ids shared by different texts
    only when their hashes meet (``curate verify --unique-ids`` checks them all)."""
    counts = df["id"].value_counts()
    dup = counts[counts > 1].sort_index()
    return {"duplicate_ids": int(len(dup)),
            "duplicate_id_examples": [[str(k), int(v)] for k, v in dup.head(ID_EXAMPLES).items()]}


class ExactDedupStage(Stage):
    """Remove exact duplicates (same text bytes), keeping one document (--keep) of each group."""

    name = "exact_dedup"
    adds = ("dup_cluster_size",)

    def columns(self, settings):
        from curate.stages.dedup import keep as keeping
        from curate.stages.stage import Columns

        column = keeping.parse(settings.keep).column
        return Columns(needs=("text",) + ((column,) if column else ()), adds=self.adds)
    Settings = ExactDedupSettings
    cli = ("dedup", "exact")
    help = "remove documents with identical text (128-bit hash), keep one per group (--keep; default the smallest id)"

    def check(self, settings, inputs) -> None:
        keeping.check_inputs(keeping.parse(settings.keep), inputs)

    def check_output(self, settings, inputs, output) -> None:
        # here, not in check: a job calls this for every stage, also one whose input is not written yet
        from curate.stages.dedup import index

        index.check_against(settings.against, "exact", index.settings_record("exact", settings), inputs)
        index.check_save(settings.save_index, inputs, settings.against, output)

    def run(self, settings, ctx) -> dict:
        import contextlib

        from curate.stages.dedup import index

        saving = getattr(settings, "save_index", None)  # a stage built on this one may have no index
        with index.lock(saving) if saving else contextlib.nullcontext():
            return self._run(settings, ctx)

    #: the drop reason of a removed document
    reason = REASON

    def hash_tasks(self, settings, inputs, folder) -> list:
        """The ``hashes`` step's tasks: what a document is deduplicated by (here its text)."""
        policy = keeping.parse(settings.keep)
        return dedup.input_tasks(inputs, _hashes_task, [(inputs.only(i), i, folder, settings.hash, policy,
                                                         inputs.pieces[i].path) for i in range(len(inputs))])

    def _run(self, settings, ctx) -> dict:
        import dask

        from curate.stages import dataset
        from curate.stages.dedup import index

        record = index.settings_record("exact", settings)
        against, saving = getattr(settings, "against", ()), getattr(settings, "save_index", None)
        bases = index.check_against(against, "exact", record, ctx.input, verify=False)
        steps = dedup.Steps(ctx, self.name)
        audit = steps.folder(dedup.DUPLICATES)
        kept = steps.side("kept", "duplicates") if saving else None

        inputs = dedup.Inputs(ctx)  # the pieces, planned once; each task reads its own
        steps.run("hashes", lambda folder: self.hash_tasks(settings, inputs, folder))
        mine = dedup.read_compact(steps.path("hashes"))
        labels = tuple(b.label for b in bases)
        if bases:  # the indexes' rows of this run's hashes: the groups' first members
            def indexed(folder):
                task, tasks = dask.delayed(_indexed_task, pure=False), []
                for b in [x.slim() for x in bases]:
                    routed = index.routed_rows([mine[["h1", "h2"]]], "h1", b.parts)
                    tasks += [task(r, b, i, folder, len(tasks) + i) for i, r in enumerate(routed)]
                return tasks

            steps.run("indexed", indexed)
            tier = len(bases)
            mine = dd_concat([mine.assign(tier=np.int64(tier)), dedup.read_parts(steps.path("indexed"))])

        def find_duplicates(folder):
            # as many partitions as the hashes' bytes ask for: every copy of a text still meets in one
            shuffled = dedup.shuffle(mine, "h1", dedup.compact_partitions(steps.path("hashes")))
            task = dask.delayed(_duplicates_task, pure=False)
            return [task(part, folder, audit, i, labels, kept) for i, part in enumerate(shuffled.to_delayed())]

        info = steps.run("duplicates", find_duplicates, extra_dirs=(audit, *((kept,) if kept else ())))
        removed = sum(p.get("removed", 0) for p in info["parts"])
        extra = {"dedup": {"hash": settings.hash, "documents_in_groups": info["rows"],
                           "groups": info["rows"] - removed, "removed": removed,
                           "duplicate_ids": _report_duplicate_ids(info["parts"], ctx.output)},
                 "steps": steps.timings}
        if bases:
            extra["dedup"]["against"] = {"indexes": list(labels), "removed_for_index": sum(
                p.get("removed_for_index", 0) for p in info["parts"])}
        if saving:
            extra["dedup"]["saved_index"] = self._save_index(settings, ctx, steps, bases, len(inputs), record)
        from curate.stages.dedup import removal
        marked = removal.removal_frame(inputs, steps, "duplicates", self.reason)
        return dataset.write_dataset(marked, ctx, stage=self.name, settings=settings,
                                     reject_columns=("id",), extra=extra, records=steps.records())

    def _save_index(self, settings, ctx, steps, bases, nparts: int, record: dict) -> dict:
        """Write ``--save-index``: this run's kept hashes merged with the bases' (see the index module)."""
        import dask

        from curate.stages.dedup import index
        from curate.stages.output import Output

        parts = bases[0].parts if bases else nparts
        isteps = dedup.Steps(ctx, out=Output.at(settings.save_index), root="", owner=index.OWNER)
        new = dedup.read_parts(steps.side("kept", "duplicates")).assign(tier=np.int64(len(bases)))

        def build(folder):
            slim = [b.slim() for b in bases]
            frames = [new, *index.base_frames(slim, "hashes", ["h1", "h2", "id"], tier=True)]
            task = dask.delayed(_index_task, pure=False)
            base = slim[0] if slim else None
            return [task(base, i, r, folder) for i, r in enumerate(index.routed_rows(frames, "h1", parts))]

        info = isteps.run("hashes", build)
        entry = index.info_entry("exact", record, parts=parts, partitions=0, tiers=[], documents=info["rows"],
                                 ctx=ctx, bases=bases, keep=settings.keep)
        index.finish(isteps, entry)
        return {"path": settings.save_index, "documents": info["rows"], "parts": parts}


def dd_concat(frames):
    import dask.dataframe as dd

    return dd.concat(frames, ignore_unknown_divisions=True)


def _report_duplicate_ids(parts: list[dict], output: str) -> dict:
    """{"count", "examples": [[id, documents], ...]} of the duplicate ids met, and a warning line."""
    import logging

    count = sum(p.get("duplicate_ids", 0) for p in parts)
    examples = sorted(e for p in parts for e in p.get("duplicate_id_examples", []))[:ID_EXAMPLES]
    if count:
        shown = ", ".join(f"{i!r} x{n}" for i, n in examples[:3])
        logging.getLogger(__name__).warning(
            "%s: %d id(s) occur more than once (%s%s); ids should be unique: curate verify --unique-ids "
            "lists them all", output, count, shown, ", ..." if count > 3 else "")
    return {"count": count, "examples": examples}
