"""What an erase does: the request resolved to ids (repeated until no new id turns up), each unit's plan of files, pairs and shrinking cluster sizes, and the consumers' checks."""

from __future__ import annotations

from collections import Counter

import numpy as np

from curate.stages.erase.files import read_table
from curate.stages.erase.match import (
    DETAIL,
    ID,
    KEPT_ID,
    NUMBERS,
    REASON,
    Matcher,
    _strings,
    _where,
    numbers_mask,
)
from curate.stages.erase.request import Request
from curate.stages.erase.units import Unit, _sets_locator, scan_files
from curate.stages.errors import DataError, SettingsError
from curate.stages.output import (
    Output,
)


def _aliases(units: list[Unit]) -> list[str]:
    """Columns where ``add_id --keep-original-as`` kept a previous id."""
    return sorted({u.manifest.get("settings", {}).get("keep_original_as") for u in units
                   if u.stage == "add_id"} - {None})


def resolve(units: list[Unit], request: Request, known=()) -> tuple[Matcher, list[str]]:
    """(the matcher of every erased row, the request's entries that match nothing). ``known``: ids a
    killed erase of this request resolved (the files may no longer show them)."""
    aliases = _aliases(units)
    ids = set(known) | (set(request.entries) if request.by == "ids" else set())
    found: set[str] = set()
    first = True
    while True:
        matcher = Matcher(request, ids, aliases)
        new: set[str] = set()
        for u in units:
            for rel in scan_files(u):
                table = read_table(u.out, rel, matcher.columns())
                if first:
                    found |= matcher.found(table)
                m = matcher.mask(table)
                if ID in table.column_names:
                    new.update(_where(_strings(table[ID]), m))
        first = False
        if new <= ids:
            return matcher, [e for e in request.entries if e not in found]
        ids |= new


CLUSTER_SIZE = "dup_cluster_size"


def cluster_shrinks(units: list[Unit], matcher: Matcher) -> dict[int, dict[str, int]]:
    """Per unit (by ``id``), how much each kept document's ``dup_cluster_size`` falls: by the erased
    documents a dedup stage removed for it (its ``_duplicates/``), in that stage's output and in the
    outputs after it in the same job (the column travels on), so the parts equal a run without them."""
    out: dict[int, dict[str, int]] = {}
    for u in units:
        if u.kind != "dataset" or u.stage not in ("exact_dedup", "fuzzy_dedup"):
            continue
        shrink: dict[str, int] = {}
        for rel in scan_files(u):
            if not rel.startswith("_duplicates/"):
                continue
            table = read_table(u.out, rel, (*matcher.columns(), KEPT_ID, "removed"))
            if KEPT_ID not in table.column_names or "removed" not in table.column_names:
                continue
            erased = matcher.mask(table) & np.asarray(table["removed"].to_pylist(), dtype=bool)
            kept_ids = table[KEPT_ID].to_pylist()
            ids = table[ID].to_pylist()
            gone = set(_where(table[ID], matcher.mask(table)))
            for i in np.flatnonzero(erased):
                k = kept_ids[i]
                if k is not None and k not in gone and k != ids[i]:
                    shrink[k] = shrink.get(k, 0) + 1
        if not shrink:
            continue
        later = [u]
        if u.job is not None and u in u.job.stages:
            later = u.job.stages[u.job.stages.index(u):]
        for v in later:
            mine = out.setdefault(id(v), {})
            for k, n in shrink.items():
                mine[k] = mine.get(k, 0) + n
    return out


def shrink_sizes(table, shrink: dict[str, int]):
    """``table`` with ``dup_cluster_size`` lowered per ``shrink`` (id -> documents erased from its
    cluster); the table itself when nothing changes."""
    import pyarrow as pa

    if not shrink or CLUSTER_SIZE not in table.column_names or ID not in table.column_names:
        return table
    ids = table[ID].to_pylist()
    minus = np.array([shrink.get(i, 0) for i in ids], dtype=np.int64)
    if not minus.any():
        return table
    col = table[CLUSTER_SIZE]
    values = np.asarray(col.to_pylist(), dtype=object)
    new = [None if v is None else int(v) - int(m) for v, m in zip(values, minus)]
    k = table.column_names.index(CLUSTER_SIZE)
    return table.set_column(k, table.schema.field(k), pa.array(new, type=col.type))


def plan_unit(u: Unit, matcher: Matcher, shrink: dict[str, int] | None = None) -> dict | None:
    """What erasing ``matcher``'s documents does to ``u``; None when it holds none of them."""
    numbers: set[int] = set()
    if u.kind == "dataset":  # the numbers dedup intermediates give the erased documents
        for rel in scan_files(u):
            table = read_table(u.out, rel, (*matcher.columns(), "doc"))
            if ID in table.column_names and "doc" in table.column_names:
                numbers.update(_where(table["doc"], matcher.mask(table)))
    sidecars = {f.get("docs"): f for f in u.manifest.get("files") or []} if u.kind == "tokens" else {}
    ids: set[str] = set()
    files, pairs, first_shard, stream_tokens = [], [], None, 0
    for rel in scan_files(u):  # one file in memory at a time (its id columns only)
        table = read_table(u.out, rel, (*matcher.columns(), REASON, KEPT_ID, DETAIL, *NUMBERS, "length"))
        m = matcher.mask(table) | numbers_mask(table, numbers)
        references = int((matcher.references(table) & ~m).sum())
        shrinks = bool(shrink) and ID in table.column_names and not rel.startswith(("_duplicates/", "_work/")) \
            and any(i in shrink for i in _where(table[ID], ~m))
        if not m.any() and not references and not shrinks:
            continue
        if ID in table.column_names:
            ids.update(_where(table[ID], m))
        if rel in sidecars:
            pairs.append(_plan_pair(u, sidecars[rel], m))
        elif u.kind in ("dataset", "tokens"):
            reasons = Counter(_where(table[REASON], m)) if REASON in table.column_names else Counter()
            files.append({"path": rel, "rows": int(m.sum()), "reasons": dict(reasons), "references": references})
        elif u.kind == "shards":
            k = _shard_number(u, rel)
            first_shard = k if first_shard is None else min(first_shard, k)
            stream_tokens += int(table["length"].combine_chunks().to_numpy()[m].sum())
    if numbers:  # shingle sets of the documents dedup numbered: a raw file, located by its signatures part
        for rel in [r["path"] for r in u.manifest.get("outputs") or [] if r["path"].startswith("_work/")]:
            locator = _sets_locator(rel)
            if locator is not None:
                docs = read_table(u.out, locator, ("doc",))["doc"].to_numpy()
                hit = int(np.isin(docs, np.asarray(sorted(numbers), dtype=np.int64)).sum())
                if hit:
                    files.append({"path": rel, "rows": hit, "reasons": {}, "references": 0, "sets": locator})
    if not ids and not files and not pairs:
        return None
    if shrink:
        files = [{**f, "shrink": True} if not f["path"].startswith(("_duplicates/", "_work/", "_rejects/")) else f
                 for f in files]
    paths = [f["path"] for f in files] + [rel for p in pairs for rel in (p["pair"] + ".bin", p["pair"] + ".idx", p["path"])]
    plan = {"paths": paths, "files": files, "pairs": pairs, "ids": sorted(ids), "numbers": sorted(numbers),
            "documents": len(ids), "by": matcher.request.by, "shrink": dict(sorted((shrink or {}).items()))}
    if u.kind == "shards":
        plan.update(first_shard=first_shard, stream_tokens=stream_tokens)
    return plan


def _plan_pair(u: Unit, entry: dict, erase: np.ndarray) -> dict:
    from curate.stages.tokenize import megatron

    name = entry["name"]
    index = megatron.parse_index(u.out.read_bytes(name + ".idx"), u.out.path(name + ".idx"))
    if index.sequence_count != len(erase):
        raise DataError(f"{u.out.path(entry['docs'])}: rows: {len(erase)}, but {name}.idx has {index.sequence_count} "
                        f"sequences (the sidecar disagrees with its pair; curate verify names it); nothing changed")
    if not np.array_equal(index.document_indices, np.arange(index.sequence_count + 1)):
        raise DataError(f"{u.out.path(name + '.idx')}: documents of several sequences: not a pair tokenize wrote; "
                        "nothing changed")
    lengths = index.sequence_lengths.astype(np.int64)
    return {"pair": name, "path": entry["docs"], "sequences": int(erase.sum()), "kept": int((~erase).sum()),
            "tokens": int(lengths[erase].sum())}


def _shard_number(u: Unit, rel: str) -> int:
    for k, s in enumerate(u.manifest.get("shards") or []):
        if s.get("docs") == rel:
            return k
    raise DataError(f"{u.out.path(rel)}: no shard of {u.out.manifest_name} names this sidecar")


def check_consumers(units: list[Unit]) -> None:
    """Packed rows and shards are rebuilt from their token set: it must be part of this erase and be
    the one they were made from; shards must keep tokens to shard."""
    tokens = {(u.out.url, u.out.unit): u for u in units if u.kind == "tokens"}
    for u in units:
        if u.kind not in ("pack", "shards") or u.plan is None:
            continue
        source = u.manifest.get("input_token_set") or {}
        prefix = source.get("prefix") or "part"
        ts = tokens.get((Output.at(source.get("url", "")).url, "" if prefix == "part" else prefix))
        if ts is None:
            raise SettingsError(f"{u.where}: made from the token set {source.get('url')} (prefix {prefix}), which "
                                "this erase does not include: add it (or its job root) to the command")
        if ts.manifest.get("fingerprint") != source.get("fingerprint"):
            raise SettingsError(f"{u.where}: made from an earlier version of {ts.where} (its fingerprint changed "
                                f"since): run {u.stage} again instead of erasing it")
        if u.kind == "shards" and not u.resumed:
            totals = u.manifest.get("totals") or {}
            left = int(totals.get("tokens", 0)) - int(u.plan.get("stream_tokens", 0))
            size = int(u.manifest.get("shard_tokens") or 1)
            if left <= 0 or int(u.manifest.get("holdout_shards", 0)) >= -(-left // size):
                raise SettingsError(f"{u.where}: erasing leaves {max(left, 0):,} tokens, too few for one training "
                                    "shard after the held-out ones; remove the output (or run shards again) instead")
