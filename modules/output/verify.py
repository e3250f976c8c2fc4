"""What curate verify checks of a unit: every listed file present with its size (and checksum), rows, counts, completeness; files no manifest lists."""

from __future__ import annotations

from curate.stages.errors import DataError
from curate.stages.output.files import file_checksum
from curate.stages.output.names import CHECKSUM, is_control, is_side, units_in
from curate.stages.output.unit import Output


def verify_unit(out: Output, checksums: bool = False, listing: dict[str, int] | None = None) -> list[str]:
    """Problems of one unit against its manifest, one line each: ``FILE: CHECK: detail``.

    Every listed file present with its size (and, with ``checksums``, its XXH3-128 re-read); a data
    part's row count equal to the manifest's; the unit complete (manifest status, ``_SUCCESS``); for
    a dataset, the parts' rows adding up to the manifest's ``counts.out`` and the rejects' rows to
    the dropped documents.
    """
    listing = out.listing() if listing is None else listing
    problems = []
    try:
        manifest = out.manifest()
    except DataError as e:
        return [str(e)]
    if manifest is None:
        return [f"{out.path(out.manifest_name)}: missing manifest: not a curate output"]
    if out.success_name not in listing:
        problems.append(f"{out.path(out.success_name)}: missing {out.success_name}: the run did not finish")
    if manifest.get("curate_output") and manifest.get("status") != "complete":
        problems.append(f"{out.path(out.manifest_name)}: status: {manifest.get('status')!r}, not complete")
    records = manifest.get("outputs")
    if records is None and manifest.get("status") == "running":  # begin() wrote it; the run never finished
        return [f"{out.path(out.manifest_name)}: status: 'running': the run did not finish (killed, or still "
                "running); run it again to finish it"]
    if records is None:
        return problems + [f"{out.path(out.manifest_name)}: outputs: the manifest lists no files (written by an "
                           "older curate?); rerun the stage"]
    part_rows, reject_rows = 0, 0
    links = set(out.links())
    for r in records:
        rel = r["path"]
        if rel in links or any(rel.startswith(link + "/") for link in links):
            problems.append(f"{out.path(rel)}: a symbolic link (or below one): curate never reads through a link")
            continue
        if rel not in listing:
            # a copy of the folder alone leaves its side folder behind
            hint = f" (a side file: copy or move {out.side_url} with the output)" if is_side(rel) else ""
            problems.append(f"{out.path(rel)}: missing: listed in {out.manifest_name}{hint}")
            continue
        if listing[rel] != r["bytes"]:
            problems.append(f"{out.path(rel)}: size: {listing[rel]} bytes, {out.manifest_name} says {r['bytes']}")
            continue
        if checksums:
            with out.open_read(rel) as f:
                _, digest = file_checksum(f)
            if digest != r.get(CHECKSUM):
                problems.append(f"{out.path(rel)}: checksum: XXH3-128 {digest} differs from {out.manifest_name}")
                continue
        if "rows" in r:
            try:
                rows = _count_rows(out, rel)
            except Exception as e:  # a damaged part: the one line says so
                problems.append(f"{out.path(rel)}: unreadable: {type(e).__name__}: {e}")
                continue
            if rows != r["rows"]:
                problems.append(f"{out.path(rel)}: rows: {rows}, {out.manifest_name} says {r['rows']}")
            if "/" not in rel:
                part_rows += r["rows"]
            elif rel.startswith("_rejects/"):
                reject_rows += r["rows"]
    counts = manifest.get("counts") or {}
    if manifest.get("schema") is not None and "out" in counts and not problems:
        if part_rows != counts["out"]:
            problems.append(f"{out.path(out.manifest_name)}: counts: the parts hold {part_rows} rows, "
                            f"counts.out says {counts['out']}")
        dropped = sum((counts.get("dropped") or {}).values())
        if reject_rows != dropped:
            problems.append(f"{out.path(out.manifest_name)}: counts: _rejects/ holds {reject_rows} rows, "
                            f"{dropped} documents were dropped")
    return problems


def _count_rows(out: Output, rel: str) -> int:
    if rel.endswith(".parquet"):
        import pyarrow.parquet as pq

        with out.open_read(rel) as f:
            return pq.ParquetFile(f).metadata.num_rows
    if rel.endswith((".jsonl", ".ndjson")):
        n, size = 0, 0
        with out.open_read(rel) as f:
            for chunk in iter(lambda: f.read(8 << 20), b""):
                n += chunk.count(b"\n")
                size += len(chunk)
        # pandas writes an empty frame as one newline: a part without documents, not one blank record
        return 0 if size == 1 and n == 1 else n
    raise ValueError("not a data part")


def unlisted(out: Output, listing: dict[str, int] | None = None) -> list[str]:
    """Files in the directory that no unit's manifest or journal names (strays, foreign files)."""
    listing = out.listing() if listing is None else listing
    owned: set[str] = set()
    for unit in units_in(listing):
        owned |= Output(out.url, unit).owned(listing)
    return [rel for rel in sorted(listing) if rel not in owned and not is_control(rel)]
