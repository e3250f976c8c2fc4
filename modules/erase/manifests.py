"""A unit's manifest through an erase: marked erasing before any file changes, then its new records, counts and token totals and the erasure record, then _SUCCESS."""

from __future__ import annotations

import time
from collections import Counter

from curate.stages.erase.files import disk_record
from curate.stages.erase.request import Request
from curate.stages.erase.units import Unit
from curate.stages.output import (
    CHECKSUM,
    Output,
)


def _updated_records(u: Unit, m: dict, written: dict) -> None:
    """The manifest's file records of the planned files: new size, checksum and rows, or gone."""
    outputs = {r["path"]: r for r in m["outputs"]}
    removed_rows = {f["path"]: f["rows"] for f in u.plan["files"]}
    removed_rows.update({p["path"]: p["sequences"] for p in u.plan["pairs"]})
    for rel in u.plan["paths"]:
        old = outputs.get(rel)
        if old is None:
            continue
        if not u.out.exists(rel):
            del outputs[rel]
            continue
        new = {**old, **(written.get(rel) or disk_record(u.out, rel))}
        if "rows" in old:
            new["rows"] = old["rows"] - removed_rows.get(rel, 0)
        outputs[rel] = new
    m["outputs"] = sorted(outputs.values(), key=lambda r: r["path"])


def _updated_counts(u: Unit, m: dict) -> None:
    counts = dict(m.get("counts") or {})
    dropped = Counter(counts.get("dropped") or {})
    for f in u.plan["files"]:
        if "/" not in f["path"]:  # a part: kept documents
            counts["out"] = counts.get("out", 0) - f["rows"]
            counts["in"] = counts.get("in", 0) - f["rows"]
        elif f["path"].startswith("_rejects/"):
            counts["in"] = counts.get("in", 0) - f["rows"]
            dropped.subtract(f["reasons"])
    sequences = sum(p["sequences"] for p in u.plan["pairs"])
    if sequences:
        counts["out"] = counts.get("out", 0) - sequences
        counts["in"] = counts.get("in", 0) - sequences
    counts["dropped"] = {k: v for k, v in sorted(dropped.items()) if v > 0}
    m["counts"] = counts


def _updated_token_files(u: Unit, m: dict) -> None:
    """Tokenize's per-pair entries, sets and totals after the planned pairs lost sequences; a pair's
    bytes are its ``.bin``'s on disk, not derived from the manifest's ``dtype``."""
    records = {r["path"]: r for r in m["outputs"]}
    plans = {p["pair"]: p for p in u.plan["pairs"]}
    files = []
    for f in m["files"]:
        p = plans.get(f["name"])
        if p is None:
            files.append(f)
            continue
        if p["kept"] == 0:
            continue
        b, i, d = records[f["name"] + ".bin"], records[f["name"] + ".idx"], records[f["docs"]]
        tokens = f["tokens"] - p["tokens"]
        files.append({**f, "documents": f["documents"] - p["sequences"], "tokens": tokens, "bytes": b["bytes"],
                      "idx_bytes": i["bytes"], "bin_xxh3_128": b[CHECKSUM], "idx_xxh3_128": i[CHECKSUM],
                      "docs_xxh3_128": d[CHECKSUM]})
    m["files"] = files
    for name, s in (m.get("sets") or {}).items():
        fs = [f for f in files if (f.get("set") or "train") == name]
        s.update(files=len(fs), **{k: int(sum(f[k] for f in fs)) for k in ("documents", "tokens", "bytes")})
    m["totals"] = {k: int(sum(f[k] for f in files)) for k in ("documents", "tokens", "bytes")}


def _updated_index(u: Unit, m: dict) -> None:
    """A saved exact index's entry after its ``hashes`` parts lost rows: its document count and its
    digests (:func:`curate.stages.dedup.index.check_fields`), recomputed by erase as the owner of the
    change, so that ``--against`` takes the erased index instead of refusing it as tampered."""
    from curate.stages.dedup import index

    info = dict(m["index"])
    info["documents"] = info.get("documents", 0) - sum(f["rows"] for f in u.plan["files"])
    info["content"] = index.content_digest(m["outputs"])
    info.pop("sha256", None)
    info["sha256"] = index._digest(info)
    m["index"] = info


def _record(u: Unit, request: Request) -> dict:
    return {"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "request_sha256": request.sha256,
            "documents": u.plan["documents"], "by": request.by}


def _finished(manifest: dict, request: Request) -> bool:
    return manifest.get("status") == "complete" and \
        (manifest.get("erasures") or [{}])[-1].get("request_sha256") == request.sha256


def mark(u: Unit, request: Request) -> None:
    """Step 3 of the module doc: the unit's plan in its journal, then it is no longer complete."""
    if not u.resumed:
        u.out.intend(request.key, u.plan.get("paths", []), run=request.sha256, plan=u.plan)
    # the manifest says "erasing" before _SUCCESS goes: killed between the two, the unit still reads
    # as this erase's (and the journal record above says so too)
    m = u.out.manifest()
    if m.get("status") != "erasing":
        u.out.write_json(u.out.manifest_name, {**m, "status": "erasing", "erasing": request.sha256})
    if u.out.exists(u.out.success_name):
        u.out.remove(u.out.success_name)


def _without_ids(obj, ids: set):
    """A manifest with no list entry that names an erased document: a stage's examples (span dedup's
    ``largest``: [id, bytes] pairs) would otherwise keep the id, and the report shows them."""
    if not ids:
        return obj
    if isinstance(obj, dict):
        return {k: v if k in ("outputs", "erasures", "settings", "io", "input") else _without_ids(v, ids)
                for k, v in obj.items()}
    if isinstance(obj, list):
        def names(e) -> bool:
            first = e[0] if isinstance(e, (list, tuple)) and e else e.get("id") if isinstance(e, dict) else e
            return isinstance(first, str) and first in ids
        return [_without_ids(e, ids) for e in obj if not names(e)]
    return obj


def finish(u: Unit, request: Request, summary: dict | None, written: dict) -> dict:
    """Write the unit's manifest (records, counts, the erasure record), then ``_SUCCESS``, then drop
    its plan from the journal."""
    m = u.out.manifest()
    if m.get("status") == "erasing":
        m.pop("erasing", None)
        if u.kind in ("dataset", "tokens"):
            _updated_records(u, m, written)
            _updated_counts(u, m)
            m = _without_ids(m, set(u.plan.get("ids") or ()))
            if isinstance(m.get("index"), dict) and "content" in m["index"]:
                _updated_index(u, m)
            if u.kind == "tokens":
                _updated_token_files(u, m)
        elif u.kind in ("pack", "shards"):
            m.update(summary)
            m["outputs"] = sorted(m["outputs"], key=lambda r: r["path"])
        elif u.kind == "job":
            for stage in m.get("stages") or []:
                sub = Output.at(u.out.path(stage["output"])).manifest() or {}
                stage["counts"] = sub.get("counts", stage.get("counts"))
        m["erasures"] = [*m.get("erasures", []), _record(u, request)]
        m["status"] = "complete"
        u.out.write_json(u.out.manifest_name, m)
    u.out._remove_temporaries(u.out.listing())  # what a killed erase was writing when it died
    u.out.write_bytes(u.out.success_name, b"")
    u.out.forget(request.key)
    u.manifest = m
    return m
