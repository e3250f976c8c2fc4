"""Which rows of a table are erased documents, and the references to them (dedup's kept_id and _detail)."""

from __future__ import annotations

import numpy as np

from curate.stages.erase.request import Request, domain_of, host_of

#: columns that name the document a row is (or is a piece of)
ID, URL, DOCUMENT_ID, REASON = "id", "url", "document_id", "_reason"


#: dedup names the document each removed duplicate was removed for; erase replaces an erased one's id
KEPT_ID, DETAIL, DUPLICATE_OF = "kept_id", "_detail", "duplicate of "


ERASED_DETAIL = "duplicate of an erased document"


#: dedup intermediates address documents by number (input partition << 32 | row)
NUMBERS = ("doc", "u", "v")


_PIECE = r"(#\d+)+$"


def _strings(column):
    import pyarrow as pa

    return column.combine_chunks().cast(pa.large_string()) if column.num_chunks else pa.array([], pa.large_string())


def _isin(column, values) -> np.ndarray:
    import pyarrow.compute as pc

    if not len(values) or not len(column):
        return np.zeros(len(column), dtype=bool)
    return pc.is_in(column, value_set=values).fill_null(False).to_numpy(zero_copy_only=False)


class Matcher:
    """Which rows of a table are erased documents (see the module doc)."""

    def __init__(self, request: Request, ids, aliases=()):
        import pyarrow as pa

        self.request = request
        self.ids = frozenset(ids)
        self.aliases = tuple(aliases)
        self._ids = pa.array(sorted(self.ids), pa.large_string())
        self._entries = pa.array(list(request.entries), pa.large_string())
        self._details = pa.array([DUPLICATE_OF + i for i in sorted(self.ids)], pa.large_string())
        self._domains = frozenset(request.entries) if request.by == "domains" else frozenset()

    def columns(self) -> tuple[str, ...]:
        return (ID, URL, DOCUMENT_ID, *self.aliases)

    def mask(self, table) -> np.ndarray:
        import pyarrow as pa
        import pyarrow.compute as pc

        m = np.zeros(table.num_rows, dtype=bool)
        names = table.column_names
        if len(self._ids):
            if ID in names:
                ids = _strings(table[ID])
                m |= _isin(ids, self._ids) | _isin(pc.replace_substring_regex(ids, _PIECE, ""), self._ids)
            for c in (DOCUMENT_ID, *self.aliases):
                if c in names:
                    m |= _isin(_strings(table[c]), self._ids)
        if URL in names and self.request.by == "urls":
            m |= _isin(_strings(table[URL]), self._entries)
        elif URL in names and self.request.by == "domains":
            m |= _isin(_strings(table[URL]), pa.array(list(self._hits(table[URL])), pa.large_string()))
        return m

    def _hits(self, column) -> dict[str, str]:
        """The distinct URLs of ``column`` whose host is a listed domain or below one -> that domain."""
        import pyarrow.compute as pc

        hits = {}
        for url in pc.unique(_strings(column)).to_pylist():
            domain = domain_of(host_of(url), self._domains)
            if domain:
                hits[url] = domain
        return hits

    def found(self, table) -> set[str]:
        """The request's entries that rows of ``table`` match."""
        import pyarrow.compute as pc

        names = table.column_names
        if self.request.by == "domains":
            if URL not in names:
                return set()
            return set(self._hits(table[URL]).values())
        found = set()
        for c in [URL] if self.request.by == "urls" else [ID, DOCUMENT_ID, *self.aliases]:
            if c in names:
                values = pc.unique(_strings(table[c]))
                found |= self._present(values)
                if c == ID:
                    found |= self._present(pc.unique(pc.replace_substring_regex(values, _PIECE, "")))
        return found

    def references(self, table) -> np.ndarray:
        """Rows of other documents that name an erased one as the duplicate they were removed for
        (dedup's ``kept_id`` and ``_detail``)."""
        m = np.zeros(table.num_rows, dtype=bool)
        if KEPT_ID in table.column_names:
            m |= _isin(_strings(table[KEPT_ID]), self._ids)
        if DETAIL in table.column_names:
            m |= _isin(_strings(table[DETAIL]), self._details)
        return m

    def scrub(self, table):
        """``table`` with the references to erased documents replaced: ``kept_id`` null, ``_detail``
        "duplicate of an erased document"; and how many rows changed."""
        import pyarrow as pa
        import pyarrow.compute as pc

        n = int(self.references(table).sum())
        for name, values, new in ((KEPT_ID, self._ids, None), (DETAIL, self._details, ERASED_DETAIL)):
            if n and name in table.column_names:
                k = table.column_names.index(name)
                column = table.column(k).combine_chunks()
                hit = pa.array(_isin(_strings(table[name]), values))
                column = pc.if_else(hit, pa.scalar(new, column.type), column)
                table = table.set_column(k, table.schema.field(k), column)
        return table, n

    def _present(self, values) -> set[str]:
        return set(_where(self._entries, _isin(self._entries, values)))


def _where(column, mask: np.ndarray) -> list:
    """The non-null values of ``column`` where ``mask`` is set."""
    import pyarrow as pa

    if not mask.any():
        return []
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    return [v for v in column.filter(pa.array(mask)).to_pylist() if v is not None]


def numbers_mask(table, numbers) -> np.ndarray:
    """Rows of a dedup intermediate that name one of the document ``numbers`` (``doc``, ``u`` or ``v``)."""
    import pyarrow as pa

    m = np.zeros(table.num_rows, dtype=bool)
    if not len(numbers):
        return m
    values = pa.array(np.asarray(sorted(numbers), dtype=np.int64))
    for c in NUMBERS:
        if c in table.column_names:
            m |= _isin(table[c].combine_chunks().cast(pa.int64()), values)
    return m
