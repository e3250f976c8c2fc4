"""What the reader checks before it builds frames: a record's type and size, its id's type, a Parquet file's text and id columns."""

from __future__ import annotations

from curate.stages.dataset.budget import format_size
from curate.stages.dataset.contract import DETAIL, OFFSET, REASON, RESERVED
from curate.stages.errors import DataError
from curate.stages.settings import IOSettings


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__


_JSON_TYPES = {dict: "object", list: "array", bool: "boolean", int: "number", float: "number", str: "string"}


def _json_type(value) -> str:
    return _JSON_TYPES.get(type(value), type(value).__name__)


class TooLarge(Exception):
    """A line longer than the document budget; its bytes were skipped, never held."""

    def __init__(self, size: int):
        super().__init__(size)
        self.size = size


def _record_problem(rec, io_settings: IOSettings) -> tuple[str, str] | None:
    """(reason, message) when a parsed JSONL line is not a usable document, else None."""
    if type(rec) is dict and type(rec.get(io_settings.text_field)) is str:  # the common case, first
        ident = rec.get(io_settings.id_field)
        if ident is None or type(ident) is str:
            return None
    if isinstance(rec, TooLarge):
        return "too_large", f"{format_size(rec.size)} line"
    if isinstance(rec, UnicodeDecodeError):
        return "invalid_utf8", str(rec)
    if isinstance(rec, DataError):
        return "truncated_file", str(rec)
    if isinstance(rec, Exception):
        return "invalid_json", str(rec)
    if not isinstance(rec, dict):
        return "not_an_object", f"a JSON {type(rec).__name__}, not an object"
    tf, idf = io_settings.text_field, io_settings.id_field
    if rec.get(tf) is None:
        return "missing_text", f"no {tf!r} field" if tf not in rec else f"{tf!r} is null"
    if not isinstance(rec[tf], str):
        return "bad_type", f"{tf!r} is a JSON {_json_type(rec[tf])}, not a string"
    ident = rec.get(idf)
    if ident is not None and not isinstance(ident, str):
        if io_settings.convert_ids and type(ident) is int:
            return None
        hint = "" if io_settings.convert_ids else " (--convert-ids accepts integer ids)"
        return "bad_id", f"{idf!r} is a JSON {_json_type(ident)}, not a string{hint}"
    return None


def _converted(rec: dict, io_settings: IOSettings) -> dict:
    """The record with an integer id as its decimal string (only reached with ``convert_ids``)."""
    ident = rec.get(io_settings.id_field)
    if ident is None or isinstance(ident, str):
        return rec
    return {**rec, io_settings.id_field: str(ident)}


def _is_string_type(t) -> bool:
    import pyarrow as pa

    if pa.types.is_dictionary(t):
        t = t.value_type
    return pa.types.is_string(t) or pa.types.is_large_string(t) or getattr(pa.types, "is_string_view", bool)(t)


def _column_problem(schema, io_settings: IOSettings) -> tuple[str, str] | None:
    """(reason, message) when a Parquet file's text or id column cannot hold documents, else None."""
    import pyarrow as pa

    tf, idf = io_settings.text_field, io_settings.id_field
    if tf not in schema.names:
        return "missing_text", f"no {tf!r} column (columns: {', '.join(schema.names)}; --text-field names another)"
    if not _is_string_type(schema.field(tf).type):
        return "bad_type", f"column {tf!r} is {schema.field(tf).type}, not a string"
    if idf in schema.names and not _is_string_type(t := schema.field(idf).type):
        if io_settings.convert_ids and pa.types.is_integer(t):
            return None
        hint = "" if io_settings.convert_ids or not pa.types.is_integer(t) else " (--convert-ids accepts integer ids)"
        return "bad_id", f"column {idf!r} is {t}, not a string{hint}"
    return None


def reserved_problem(names, io_settings: IOSettings) -> str | None:
    """A message naming the input columns that are curate's own names (``RESERVED``), else None.

    Taken for curate's, a user's ``_reason`` would send its documents to ``_rejects/`` and a
    ``_detail`` or ``__offset`` would vanish, so such an input is refused rather than read. The text
    and id fields are exempt: the reader renames them to ``text`` and ``id`` first."""
    clash = [c for c in RESERVED if c in set(map(str, names)) and c not in (io_settings.text_field, io_settings.id_field)]
    if not clash:
        return None
    cols = ", ".join(repr(c) for c in clash)
    return (f"column{'s' if len(clash) > 1 else ''} {cols} {'are' if len(clash) > 1 else 'is'} curate's own "
            f"({REASON!r} and {DETAIL!r} mark dropped documents, {OFFSET!r} is the reader's): rename "
            f"{'them' if len(clash) > 1 else 'it'} in the input, e.g. {clash[0]!r} to {clash[0].strip('_') + '_in'!r}, "
            "before curate reads it (docs/concepts/dataset.md lists the reserved names)")
