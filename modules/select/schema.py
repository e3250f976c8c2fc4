"""An input's schema before any work (a curate output's manifest, a Parquet footer, the JSONL records the reader samples), so select refuses a bad expression before a cluster starts."""

from __future__ import annotations

import os

from curate.stages.select.tokens import BOOL, NUMBER, OTHER, STRING_T
from curate.stages.select.types import kind_of_dtype_name


def input_schema(spec: str) -> tuple[dict[str, str | None], str] | None:
    """(column -> kind, where it was read) of a dataset input without reading its documents: a
    curate output's manifest, a Parquet footer, or the JSON values of the records the reader samples
    for its schema (the first :data:`~curate.stages.dataset.SCHEMA_SAMPLE` of the first file; a key
    that is null in all of them says nothing about its type yet). None when the input is not there
    yet (a later stage of a job): the run checks it then."""
    from curate.stages import dataset

    if "://" not in spec and not os.path.exists(spec) and not dataset.globlib.has_magic(spec):
        return None
    if os.path.isdir(spec) or "://" in spec:
        manifest = dataset.read_manifest(spec)
        if manifest and isinstance(manifest.get("schema"), dict):
            schema = {str(c): kind_of_dtype_name(str(t)) for c, t in manifest["schema"].items()}
            return _with_id_text(schema), f"{spec} ({dataset.MANIFEST})"
    files = dataset.expand_named([spec], allow_incomplete=True)
    path = files[0][0]
    if dataset._kind(path) == "parquet":
        import pyarrow.parquet as pq

        arrow = pq.ParquetFile(dataset.parquet_source(path)).schema_arrow
        return _with_id_text({name: _arrow_kind(t) for name, t in zip(arrow.names, arrow.types)}), path
    kinds: dict[str, set] = {}
    records = 0
    # the records the reader samples for its schema (dataset.infer_meta): most of the first file, the
    # first ones of each further file
    known = None
    for piece in dataset.plan_pieces(files[:16], 1 << 62):
        if piece.start:
            continue
        if records and known is None:
            known = set(kinds)
        budget, taken = (dataset.SCHEMA_SAMPLE if known is None else dataset.SCHEMA_PEEK), 0
        for _, _, _, rec in dataset._iter_jsonl(piece, dataset.SCHEMA_LINE_LIMIT):
            if not isinstance(rec, dict):
                continue  # a broken line: the reader names it
            for k, v in rec.items():
                if known is None or str(k) not in known:  # later files add columns, as the reader's schema
                    kinds.setdefault(str(k), set()).add(_json_kind(v))
            records += 1
            taken += 1
            if taken >= budget:
                break
    schema = {k: _merged_kind(v) for k, v in kinds.items()}
    if len(files) == 1:
        return _with_id_text(schema), f"{path} (its first {records} records)"
    return _with_id_text(schema), f"{path} and {len(files[:16]) - 1} more file(s) (their first {records} records)"


def _merged_kind(kinds: set) -> str | None:
    """The kind of a JSON key over the sampled records, as the reader's dtype inference decides it."""
    kinds = kinds - {None}
    if not kinds:
        return None
    return kinds.pop() if len(kinds) == 1 else OTHER


def _with_id_text(schema: dict) -> dict:
    # every dataset has them once read (the text field renamed to text, ids generated when missing)
    return {**schema, "id": STRING_T, "text": STRING_T}


def _arrow_kind(t) -> str:
    import pyarrow as pa

    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_boolean(t):
        return BOOL
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return NUMBER
    if pa.types.is_string(t) or pa.types.is_large_string(t) or getattr(pa.types, "is_string_view", bool)(t):
        return STRING_T
    if pa.types.is_null(t):
        return None
    return OTHER


def _json_kind(v) -> str | None:
    if v is None:
        return None
    if isinstance(v, bool):
        return BOOL
    if isinstance(v, (int, float)):
        return NUMBER
    if isinstance(v, str):
        return STRING_T
    return OTHER
