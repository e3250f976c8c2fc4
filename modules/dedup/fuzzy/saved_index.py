"""``--save-index``: the tables of a fuzzy dedup index written from a finished run (the union with the
``--against`` bases, see :mod:`curate.stages.dedup.index`)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from curate.stages import dedup


def save_index(settings, ctx, steps, joint, bases, inputs, sig_files, record) -> dict:
    """Write ``--save-index``: the union of the bases and this run (see the index module)."""
    import dask

    from curate.stages.dedup import index
    from curate.stages.output import Output

    offset, nparts = joint.offset, len(inputs)
    parts = bases[0].parts if bases else nparts
    first = joint.bases[0] if bases else None
    isteps = dedup.Steps(ctx, out=Output.at(settings.save_index), root="", owner=index.OWNER)
    decided = dedup.read_parts(steps.path("duplicates"), columns=["doc", "component", "removed"])
    decided = decided.rename(columns={"component": "comp"})

    shingles = isteps.path(index.SHINGLES)

    def docs(folder):
        records = [index.listed_files(b) for b in bases]

        def listed(p):  # the manifest records of the base parts part p copies
            if p >= offset:
                return {}
            k, b = next((k, b) for k, b in enumerate(joint.bases) if b.offset <= p < b.offset + b.partitions)
            return {t: records[k].get(b.rel(t, p - b.offset)) for t in ("docs", index.SHINGLES)}

        task = dask.delayed(_index_docs_task, pure=False)
        return [task(p, joint, sig_files, steps.side("shingles", "signatures"), folder, shingles, listed(p))
                for p in range(offset + nparts)]

    def labels(folder):
        task = dask.delayed(_index_labels_task, pure=False)
        routed = dedup.route_to_input(decided, "doc", offset + nparts)
        return [task(r, p, joint, folder) for p, r in enumerate(routed)]

    def comps(folder):
        frames = [decided[["comp", "doc"]].assign(origin=np.int64(NEW))]
        frames += [f.assign(origin=np.int64(OLD))
                   for f in index.base_frames(list(joint.bases), "components", ["comp", "doc"], ("comp", "doc"))]
        if bases:
            retired = dedup.read_parts(steps.path("expanded"), columns=["label"])
            frames.append(retired.rename(columns={"label": "comp"}).assign(doc=np.int64(-1), origin=np.int64(RETIRED)))
        task = dask.delayed(_index_components_task, pure=False)
        return [task(first, i, r, folder) for i, r in enumerate(index.routed_rows(frames, "comp", parts))]

    def centers(folder):
        frames = [dedup.read_parts(steps.side("centers", "edges"))]
        meta = frames[0]._meta
        for b, f in zip(joint.bases[1:], index.base_frames(list(joint.bases), "buckets", BUCKET_COLUMNS)):
            frames.append(f.map_partitions(anchor_rows, b.offset << dedup.DOC_SHIFT, meta=meta))
        task = dask.delayed(_index_buckets_task, pure=False)
        return [task(first, i, r, folder) for i, r in enumerate(index.routed_rows(frames, "bucket", parts))]

    info = isteps.run("docs", docs, extra_dirs=(shingles,))
    isteps.run("labels", labels)
    isteps.run("components", comps)
    isteps.run("buckets", centers)
    tiers = [t + b.offset for b in bases for t in b.tiers] + [offset + nparts]
    entry = index.info_entry("fuzzy", record, parts=parts, partitions=offset + nparts, tiers=tiers,
                             documents=info["rows"], ctx=ctx, bases=bases, keep=settings.keep)
    index.finish(isteps, entry)
    return {"path": settings.save_index, "documents": info["rows"], "parts": parts, "partitions": offset + nparts}


def _index_docs_task(p, joint, sig_files, run_sets, folder, shingles, listed):
    """Part ``p`` of a saved index's ``docs`` and ``shingles``: a base's, copied (the first base's, byte
    for byte; ``listed``: their records in its manifest) or renumbered; or this run's documents: their
    signatures part's columns, and the shingle sets the signatures step wrote beside it, copied
    (``run_sets``: that folder; the texts are not read again)."""
    import pyarrow.parquet as pq

    from curate.stages.dedup import index, shingles as sets_files

    if p < joint.offset:
        b = joint.base_of(p)
        sets = index.copy_part(b, index.SHINGLES, p - b.offset, shingles, p, listed.get(index.SHINGLES))
        if b.offset == 0:
            docs = index.copy_part(b, "docs", p, folder, p, listed.get("docs"))
            return {**docs, "outputs": docs["outputs"] + sets["outputs"]}
        table = pq.read_table(b.path("docs", p - b.offset))
        doc = pa.array(table.column("doc").to_numpy() + (b.offset << dedup.DOC_SHIFT))
        table = table.set_column(table.schema.get_field_index("doc"), "doc", doc)
        outputs = sets["outputs"]
    else:
        table = pq.read_table(sig_files[p - joint.offset], columns=["doc", "id", "key", "sig", "start", "count"])
        outputs = [sets_files.copy_file(run_sets.out, f"{run_sets.rel}/{sets_files.part_name(p)}", shingles.out,
                                        index.part_name(index.SHINGLES, p))]
    stats = dedup.save_table(table, folder, p)
    for r in stats.get("outputs", []):
        r["rows"] = table.num_rows
    stats["outputs"] = stats.get("outputs", []) + outputs
    return stats


def _index_labels_task(decided, p, joint, folder):
    """Part ``p`` of a saved index's ``labels``: the base's, where this run did not decide its documents
    again, and this run's decisions (every member of every component it touched)."""
    from curate.stages.dedup import index

    frames = []
    if p < joint.offset:
        b = joint.base_of(p)
        old = b.shifted(b.read("labels", p - b.offset, ["doc", "comp", "removed"]), ("doc", "comp"))
        frames.append(old[~old["doc"].isin(decided["doc"].to_numpy())])
    frames.append(decided[["doc", "comp", "removed"]])
    rows = pd.concat(frames, ignore_index=True).astype({"doc": "int64", "comp": "int64", "removed": "bool"})
    return index.write_table(rows, folder, p, sort=("doc",))


#: ``origin`` of the rows of a saved index's ``components`` while it is merged
RETIRED, OLD, NEW = 0, 1, 2


def _index_components_task(first, i, routed, folder):
    """Part ``i`` of a saved index's ``components``: the first base's part and the rows routed here
    (``origin``: this run's components, other bases' rows, or the labels of the bases' components this
    run merged into bigger ones, whose old rows go)."""
    from curate.stages.dedup import index

    frames = [first.read("components", i, ["comp", "doc"]).assign(origin=np.int64(OLD))] if first is not None else []
    rows = pd.concat([*frames, routed], ignore_index=True)
    origin = rows["origin"].to_numpy(dtype=np.int64)
    retired = rows["comp"].to_numpy()[origin == RETIRED]
    keep = (origin == NEW) | ((origin == OLD) & ~np.isin(rows["comp"].to_numpy(), retired))
    out = rows[keep][["comp", "doc"]].astype({"comp": "int64", "doc": "int64"})
    return index.write_table(out, folder, i, sort=("comp", "doc"))


#: a saved index's ``buckets`` table: each bucket key's two smallest documents (``second`` -1: none)
BUCKET_COLUMNS = ["bucket", "center", "second"]


def anchor_rows(table: pd.DataFrame, shift: int = 0) -> pd.DataFrame:
    """(bucket, center): one row per anchor of a ``buckets`` table part, moved by ``shift``."""
    second = table["second"].to_numpy(dtype=np.int64)
    has = second >= 0
    return pd.DataFrame({"bucket": np.concatenate([table["bucket"].to_numpy(dtype=np.uint64),
                                                   table["bucket"].to_numpy(dtype=np.uint64)[has]]),
                         "center": np.concatenate([table["center"].to_numpy(dtype=np.int64), second[has]]) + shift})


def _index_buckets_task(first, i, routed, folder):
    """Part ``i`` of a saved index's ``buckets``: per bucket key the two smallest anchors of the first
    base's part and the rows routed here (this run's anchors, other bases' rows)."""
    from curate.stages.dedup import index

    frames = [anchor_rows(first.read("buckets", i, BUCKET_COLUMNS))] if first is not None else []
    rows = pd.concat([*frames, routed[["bucket", "center"]]], ignore_index=True)
    rows = rows.astype({"bucket": "uint64", "center": "int64"}).drop_duplicates().sort_values(["bucket", "center"])
    rank = rows.groupby("bucket", sort=False).cumcount().to_numpy()
    one, two = rows[rank == 0], rows[rank == 1]
    out = pd.DataFrame({"bucket": one["bucket"].to_numpy(), "center": one["center"].to_numpy()})
    at = np.searchsorted(out["bucket"].to_numpy(), two["bucket"].to_numpy())
    second = np.full(len(out), -1, dtype=np.int64)
    second[at] = two["center"].to_numpy()
    out["second"] = second
    return index.write_table(out, folder, i, sort=("bucket",))
