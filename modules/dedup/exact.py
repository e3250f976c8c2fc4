"""``exact_dedup``: remove documents whose text is byte-for-byte identical to another's.

``curate dedup exact --input D --output OUT [--hash md5|xxh3]``

The hash is 128 bits of the UTF-8 text, unchanged (no normalisation): ``md5`` by default, as NeMo
Curator does, or ``xxh3`` (XXH3-128, several times faster, not cryptographic; at 128 bits accidental
collisions are as unlikely as with md5). Steps, each Parquet under ``OUT/_work/`` and resumable:

1. ``hashes``: per input partition, (doc, id, h1, h2, key, weight) for every document not already
   dropped (``h1``/``h2`` are the two 64-bit halves of the hash, ``key`` and ``weight`` the keep policy's
   rank and what the document stands for, :mod:`curate.stages.dedup.keep`).
2. ``duplicates``: shuffle on ``h1``; in each partition, every group of two or more documents with the
   same hash keeps its first by ``--keep`` (default the smallest id; ties: the smallest id, then the
   first document read). Writes (doc, id, hash, kept_id, removed, size) and, for audit,
   ``OUT/_duplicates/`` with (id, hash, kept_id, removed) for every member of every such group (the
   kept document has ``id == kept_id``; ``size`` is its group's ``dup_cluster_size``).
3. The removed documents go back to their input partitions (a range shuffle on the document number)
   and the dataset is written with them dropped as ``exact_duplicate`` (``_rejects/`` holds their
   ids, ``_detail`` names the kept id) and ``dup_cluster_size`` on every kept document. Output
   partition i is input partition i.
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


def duplicate_groups(df: pd.DataFrame) -> pd.DataFrame:
    """The members of every hash group of two or more, with the kept id (the first by the keep rank:
    key, then smallest id, then doc) and, on the kept member, the group's size (its weights added)."""
    from curate.stages.dataset import STRING

    df = keeping.rank_order(df, ("h1", "h2"))
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
    return out.astype({"id": STRING, "hash": STRING, "kept_id": STRING})


def _hashes_task(df: pd.DataFrame, i: int, folder: str, method: str, policy: keeping.Policy, where: str) -> dict:
    return dedup.save_part(hashes(df, i, method, policy, where), folder, i)


def _duplicates_task(df: pd.DataFrame, folder: str, audit: str, i: int) -> dict:
    groups = duplicate_groups(df)
    audit_stats = dedup.save_part(groups.drop(columns=["doc", "size"]), audit, i)
    stats = dedup.save_part(groups, folder, i)
    stats["outputs"] = stats.get("outputs", []) + audit_stats.get("outputs", [])
    stats["removed"] = int(groups["removed"].sum())
    stats.update(duplicate_ids(df))
    return stats


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
    """Remove exact duplicates (same text bytes), keeping the smallest id of each group."""

    name = "exact_dedup"
    Settings = ExactDedupSettings
    cli = ("dedup", "exact")
    help = "remove documents with identical text (128-bit hash), keep the smallest id"

    def check(self, settings, inputs) -> None:
        keeping.check_inputs(keeping.parse(settings.keep), inputs)

    def run(self, settings, ctx) -> dict:
        import dask

        from curate.stages import dataset

        ddf = dataset.read_dataset(ctx.input, ctx.io, rejects_dir=ctx.output)
        steps = dedup.Steps(ctx, self.name)
        audit = steps.folder(dedup.DUPLICATES)

        inputs = dedup.Inputs(ctx, ddf)
        policy = keeping.parse(settings.keep)
        hash_task = dask.delayed(_hashes_task, pure=False)
        steps.run("hashes", lambda folder: [hash_task(part, i, folder, settings.hash, policy, inputs.pieces[i].path)
                                            for i, part in enumerate(ddf.to_delayed())])

        def find_duplicates(folder):
            shuffled = dedup.read_parts(steps.path("hashes")).shuffle(on="h1")
            task = dask.delayed(_duplicates_task, pure=False)
            return [task(part, folder, audit, i) for i, part in enumerate(shuffled.to_delayed())]

        info = steps.run("duplicates", find_duplicates, extra_dirs=(audit,))
        marked = dedup.removal_frame(inputs, steps, "duplicates", REASON)
        removed = sum(p.get("removed", 0) for p in info["parts"])
        extra = {"dedup": {"hash": settings.hash, "documents_in_groups": info["rows"],
                           "groups": info["rows"] - removed, "removed": removed,
                           "duplicate_ids": _report_duplicate_ids(info["parts"], ctx.output)},
                 "steps": steps.timings}
        manifest = dataset.write_dataset(marked, ctx, stage=self.name, settings=settings,
                                         reject_columns=("id",), extra=extra, records=steps.records())
        return manifest


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
