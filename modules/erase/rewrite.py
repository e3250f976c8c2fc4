"""Rewriting the files of a unit per kind: dataset parts and their side folders, token pairs (bin, idx, sidecar), packed rows and shards rebuilt by their own writers."""

from __future__ import annotations

import io
from collections import Counter

import numpy as np

from curate.stages.erase.files import disk_record, rewrite_table
from curate.stages.erase.match import Matcher, numbers_mask
from curate.stages.erase.plan import shrink_sizes
from curate.stages.erase.units import Unit
from curate.stages.errors import DataError
from curate.stages.output import (
    CHECKSUM,
    Output,
)


def apply_dataset(u: Unit, matcher: Matcher, written: dict) -> None:
    numbers = set(u.plan["numbers"])
    recorded = {r["path"]: r.get(CHECKSUM) for r in u.manifest.get("outputs") or []}
    for f in u.plan["files"]:
        rel = f["path"]
        if not u.out.exists(rel):
            continue  # an empty _rejects/ file a killed erase removed
        if f.get("sets"):  # order-free: a killed erase that zeroed it already changes nothing more
            from curate.stages.dedup import shingles

            rec = shingles.erase_sets(u.out, rel, f["sets"], numbers)
            if rec is not None:
                written[rel] = rec
            continue
        if u.resumed and disk_record(u.out, rel)[CHECKSUM] != recorded.get(rel):
            # a killed erase wrote it already (the manifest is rewritten last): its rows are gone, but
            # the sizes would be lowered again (dup_cluster_size 2 -> 0 for one erased duplicate)
            continue
        adjust = (lambda t: shrink_sizes(t, u.plan.get("shrink") or {})) if f.get("shrink") else None
        rec = rewrite_table(u.out, rel, lambda t: matcher.mask(t) | numbers_mask(t, numbers),
                            drop_empty=rel.startswith("_rejects/"), matcher=matcher, adjust=adjust)
        if isinstance(rec, dict):
            written[rel] = rec


def apply_tokens(u: Unit, matcher: Matcher, written: dict) -> None:
    entries = {f["name"]: f for f in u.manifest.get("files") or []}
    for p in u.plan["pairs"]:
        rewrite_pair(u.out, entries[p["pair"]], matcher, written)
    apply_dataset(u, matcher, written)


def rewrite_pair(out: Output, entry: dict, matcher: Matcher, written: dict) -> None:
    """Drop the erased sequences of one tokenize pair: ``.bin``, ``.idx``, then the sidecar, each
    step skipped when a killed erase did it already (its checksum is no longer the manifest's)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    import xxhash

    from curate.stages.tokenize import docs, megatron

    name = entry["name"]
    bin_rel, idx_rel, docs_rel = name + ".bin", name + ".idx", entry["docs"]
    if not out.exists(docs_rel):
        return  # the whole pair was erased (its sidecar goes last)
    raw = out.read_bytes(docs_rel)
    if xxhash.xxh3_128_hexdigest(raw) != entry["docs_xxh3_128"]:
        return  # written already
    table = pq.read_table(io.BytesIO(raw))
    erase = matcher.mask(table)
    if not erase.any():
        return
    keep = ~erase
    if not keep.any():  # tokenize writes no pair without documents
        for rel in (bin_rel, idx_rel, docs_rel):
            if out.exists(rel):
                out.remove(rel)
        return
    idx_raw = out.read_bytes(idx_rel)
    if xxhash.xxh3_128_hexdigest(idx_raw) == entry["idx_xxh3_128"]:
        index = megatron.parse_index(idx_raw, out.path(idx_rel))
        lengths = index.sequence_lengths.astype(np.int64)
        if lengths[erase].sum() and out.size(bin_rel) == index.bin_size:
            written[bin_rel] = copy_sequences(out, bin_rel, index, keep)
        written[idx_rel] = out.write_bytes(idx_rel, megatron.index_bytes(lengths[keep], index.dtype))
    written[docs_rel] = docs.write_table(out, docs_rel, table.filter(pa.array(keep)).combine_chunks())


def copy_sequences(out: Output, rel: str, index, keep: np.ndarray, chunk: int = 8 << 20) -> dict:
    """Write ``rel`` (a ``.bin``) again with only the sequences ``keep`` marks, copied in order."""
    edges = np.diff(np.r_[0, keep.astype(np.int8), 0])
    starts, stops = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    pointers = index.sequence_pointers.astype(np.int64)
    sizes = index.sequence_lengths.astype(np.int64) * index.dtype.itemsize
    with out.open_read(rel) as src, out.open(rel) as dst:
        for a, b in zip(starts.tolist(), stops.tolist()):
            pos, end = int(pointers[a]), int(pointers[b - 1] + sizes[b - 1])
            src.seek(pos)
            while pos < end:
                data = src.read(min(chunk, end - pos))
                if not data:
                    raise DataError(f"{out.path(rel)}: ends at byte {pos}, its index says {end}")
                dst.write(data)
                pos += len(data)
    return dst.record


def apply_pack(u: Unit, written: dict) -> dict:
    """Pack again every pair whose input pair changed or moved; the stage's summary of the result."""
    from curate.stages import pack
    from curate.stages.dataset import REJECTS
    from curate.stages.settings import settings_from_mapping
    from curate.stages.tokenize.read import open_token_set

    m = u.out.manifest()
    source = m["input_token_set"]
    ts = open_token_set(source["url"], source.get("prefix"))
    settings = settings_from_mapping(pack.PackSettings, m["settings"], u.where)
    plan = pack.resolve_plan(settings, ts)
    records = {r["path"]: r for r in m["outputs"]}
    before = {f["pair"]: (i, f) for i, f in enumerate(m["files"])}
    stats = []
    for i, pair in enumerate(ts.pairs):
        k, f = before.get(pair.name, (None, None))
        if k == i and records.get(f["docs"], {}).get(CHECKSUM) == pair.docs_xxh3_128:
            rels = (f["name"], f["docs"], f"{REJECTS}/{pair.name}.parquet")
            stats.append({"partition": i, "in": f["documents"], "out": f["documents"] - f["dropped"],
                          "dropped": {pack.TOO_LONG: f["dropped"]} if f["dropped"] else {}, "file": f,
                          "outputs": [records[r] for r in rels if r in records]})
        else:
            stats.append(pack.pack_pair(ts, i, plan, u.out, m["fingerprint"]))
            written.update({r["path"]: r for r in stats[-1]["outputs"]})
    _drop_unlisted(u, stats, [p.name for p in ts.pairs])
    extra = pack._manifest_extra(ts, settings, plan, stats, m.get("resumed_partitions", 0))
    return {**extra, "counts": _counts(stats), "outputs": [r for s in stats for r in s["outputs"]]}


def apply_shards(u: Unit, written: dict) -> dict:
    """Write again every shard from the first one that held an erased token; the stage's summary."""
    from curate.stages import shards
    from curate.stages.settings import settings_from_mapping
    from curate.stages.tokenize.read import open_token_set

    m = u.out.manifest()
    source = m["input_token_set"]
    ts = open_token_set(source["url"], source.get("prefix"))
    settings = settings_from_mapping(shards.ShardsSettings, m["settings"], u.where)
    plan = shards.resolve_stream(settings, ts)
    lengths = shards.stream_lengths(plan.pairs, plan.add_eot)
    planned = shards.plan_shards(lengths, settings.shard_tokens, settings.holdout_shards, settings.name)
    records = {r["path"]: r for r in m["outputs"]}
    before = m.get("shards") or []
    stats = []
    for s in planned:
        if s.index < u.plan["first_shard"]:  # the stream before the first erased token is unchanged
            e = before[s.index]
            stats.append({**e, "shard": s.index, "outputs": [records[e["name"]], records[e["docs"]]]})
        else:
            stats.append(shards.write_shard(ts, s, plan, u.out, m["fingerprint"]))
            written.update({r["path"]: r for r in stats[-1]["outputs"]})
    _drop_unlisted(u, stats, [s.name[:-len(".npy")] for s in planned])
    documents = sum(p.documents for p in plan.pairs)
    extra = shards.manifest_extra(settings, plan, ts, stats, m.get("resumed_partitions", 0))
    return {**extra, "counts": {"in": documents, "out": documents, "dropped": {}},
            "outputs": [r for s in stats for r in s["outputs"]]}


def _drop_unlisted(u: Unit, stats: list[dict], keys: list[str]) -> None:
    """Remove the files (and journal records) of the unit that the rebuilt summary no longer lists:
    rows of a pair that is gone, a ``too_long`` reject no longer written, shards past the new last."""
    keep = {r["path"] for s in stats for r in s["outputs"]}
    for r in u.out.manifest()["outputs"]:
        if r["path"] not in keep and u.out.exists(r["path"]):
            u.out.remove(r["path"])
    for key, rec in u.out.journal().items():
        if key not in keys and not key.startswith("erase-") and rec.get("status") == "done":
            u.out.forget(key)


def _counts(stats: list[dict]) -> dict:
    dropped: Counter = Counter()
    for s in stats:
        dropped.update(s.get("dropped") or {})
    return {"in": int(sum(s.get("in", 0) for s in stats)), "out": int(sum(s.get("out", 0) for s in stats)),
            "dropped": dict(sorted(dropped.items()))}
