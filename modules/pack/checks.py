"""The verify gate of packed rows: every row's shape, ids within the vocabulary, bos/pad/eod where the manifest says, documents traced to their token set."""

from __future__ import annotations

import numpy as np

from curate.stages.errors import DataError
from curate.stages.pack.plan import COLUMNS, UINT16_MAX_VOCAB
from curate.stages.pack.rows import check_rows

#: rows named per file before the rest is only counted
MAX_ROW_PROBLEMS = 10


def verify(path: str, vocab_size: int | None = None, tokenizer=None, first_tokens: int = 64):
    """Check a pack output (``curate verify DIR``): files present and parseable, the schema, the dtype
    against the vocabulary, on every row the invariant of :func:`check_rows`, and each file's
    document sidecar against its rows (see the module doc)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from curate.stages.output import Output
    from curate.stages.tokenize.read import CheckReport, listed_files, vocab_for_check

    out = Output.at(path)
    manifest = out.manifest()
    problems: list[str] = []
    files = listed_files(out, manifest, ".parquet", problems)
    manifest = manifest or {}
    vocab, source = vocab_for_check(vocab_size, tokenizer, manifest, out.manifest_name)
    seq, bos, pad = manifest.get("seq_length"), manifest.get("bos_id"), manifest.get("pad_id")
    if not all(isinstance(v, int) for v in (seq, bos, pad)):
        problems.append(f"{out.path(out.manifest_name)}: manifest: seq_length, bos_id and pad_id are required")
        return CheckReport(problems, [], vocab_size=vocab, vocab_source=source)
    rows_total, valid_total, first = 0, 0, None
    entries = {f.get("name"): f for f in manifest.get("files") or [] if isinstance(f, dict)}
    notes = []
    if manifest.get("docs_columns") is None:
        notes.append(f"{out.path(out.manifest_name)}: no document sidecars (its token set was written before curate "
                     "recorded them): the rows cannot be traced to document ids")
    for rec in files:
        where = out.path(rec["path"])
        entry = entries.get(rec["path"], {})
        documents = _docs_rows(out, manifest, entry, problems) if manifest.get("docs_columns") else None
        seen = np.zeros(documents or 0, dtype=bool)
        try:
            with out.open_read(rec["path"]) as fh:
                pf = pq.ParquetFile(fh)
                missing = [c for c in COLUMNS if c not in pf.schema_arrow.names]
                if missing:
                    problems.append(f"{where}: schema: missing column(s) {', '.join(missing)}")
                    continue
                id_type = pf.schema_arrow.field("input_ids").type
                if not pa.types.is_list(id_type) or id_type.value_type not in (pa.uint16(), pa.uint32()):
                    problems.append(f"{where}: dtype: input_ids is {id_type}, expected list<uint32> or list<uint16>")
                    continue
                if id_type.value_type == pa.uint16() and vocab is not None and vocab > UINT16_MAX_VOCAB:
                    problems.append(f"{where}: dtype: uint16 ids cannot hold a {vocab:,}-id vocabulary "
                                    "(more than 65,535)")
                if manifest.get("dtype") and str(id_type.value_type) != manifest["dtype"]:
                    problems.append(f"{where}: dtype: {id_type.value_type}, {out.manifest_name} says "
                                    f"{manifest['dtype']}")
                bad_rows, row0 = 0, 0
                for rg in range(pf.num_row_groups):
                    t = pf.read_row_group(rg, columns=list(COLUMNS))
                    found = _check_table(t, seq, bos, pad, vocab)
                    for r, text in found:
                        bad_rows += 1
                        if bad_rows <= MAX_ROW_PROBLEMS:
                            pid = t.column("pack_id")[r].as_py() if r < t.num_rows else None
                            problems.append(f"{where}: row {row0 + r} (pack_id {pid}): {text}")
                    if first is None and t.num_rows and not found:
                        ids = t.column("input_ids")[0].values.to_numpy()
                        first = (f"row 0 of {rec['path']} ({t.column('valid_token_count')[0].as_py()} valid tokens)",
                                 ids[:first_tokens])
                    if documents is not None:
                        index = pc.list_flatten(t.column("doc_index")).to_numpy()
                        wrong = (index < 0) | (index >= documents)
                        if wrong.any():
                            r = int(np.searchsorted(np.cumsum(_segments_per_row(t)), np.argmax(wrong), side="right"))
                            problems.append(f"{where}: row {row0 + r}: doc_index {int(index[wrong][0])} is not a row "
                                            f"of its document sidecar {entry['docs']} ({documents} documents)")
                            documents = None
                        else:
                            seen[index] = True
                    row0 += t.num_rows
                    valid_total += int(t.column("valid_token_count").to_numpy(zero_copy_only=False).sum())
                if bad_rows > MAX_ROW_PROBLEMS:
                    problems.append(f"{where}: and {bad_rows - MAX_ROW_PROBLEMS} more rows break the invariant")
                if documents is not None and documents - int(seen.sum()) != entry.get("dropped", 0):
                    problems.append(f"{where}: documents: {documents - int(seen.sum())} documents of "
                                    f"{entry['docs']} are in no row, but {entry.get('dropped', 0)} were dropped")
                rows_total += row0
        except (OSError, pa.ArrowException) as e:
            problems.append(f"{where}: parse: not a readable Parquet file ({str(e).splitlines()[0][:200]})")
    totals = manifest.get("totals") or {}
    if not problems and totals.get("rows") is not None and totals["rows"] != rows_total:
        problems.append(f"{out.path(out.manifest_name)}: counts: {rows_total} rows in the files, "
                        f"manifest says {totals['rows']}")
    fill = valid_total / (rows_total * seq) if rows_total else 0.0
    summary = [f"packed rows: {len(files)} files, {rows_total:,} rows of {seq} tokens, "
               f"{valid_total:,} valid tokens (fill {fill:.2%}), bos {bos}, pad {pad}, {manifest.get('dtype')}"]
    return CheckReport(problems, summary, first, (manifest.get("tokenizer") or {}).get("name"), vocab, source,
                       notes)


def _segments_per_row(t) -> np.ndarray:
    import pyarrow.compute as pc

    return pc.list_value_length(t.column("doc_index")).to_numpy()


def _docs_rows(out, manifest: dict, entry: dict, problems: list) -> int | None:
    """Rows of a row file's document sidecar when it is sound: present, its checksum the manifest's,
    the manifest's columns, one row per document of the input pair; else None and a problem."""
    from curate.stages.output import CHECKSUM
    from curate.stages.tokenize.docs import read_checked

    rel = entry.get("docs")
    if not rel:
        problems.append(f"{out.path(out.manifest_name)}: files: {entry.get('name')} names no document sidecar")
        return None
    if not out.exists(rel):
        problems.append(f"{out.path(rel)}: missing: listed in {out.manifest_name}")
        return None
    record = next((r for r in manifest.get("outputs", []) if r.get("path") == rel), {})
    try:
        _, table = read_checked(out.fs()[0], out.path(rel), record.get(CHECKSUM), entry.get("documents"),
                                f"input pair {entry.get('pair')} ({entry.get('name')})")
    except DataError as e:
        problems.append(str(e))
        return None
    if table.column_names != list(manifest["docs_columns"]):
        problems.append(f"{out.path(rel)}: columns: {', '.join(table.column_names)}, {out.manifest_name} says "
                        f"{', '.join(manifest['docs_columns'])}")
        return None
    return table.num_rows


def _check_table(t, seq: int, bos: int, pad: int, vocab: int | None) -> list:
    """(row, problem) of a row group read back from a file."""

    def lists(name):
        col = t.column(name).combine_chunks()
        return col.offsets.to_numpy(), col.values.to_numpy(zero_copy_only=False)

    n = t.num_rows
    offsets, values = lists("input_ids")
    lengths = np.diff(offsets)
    if (lengths != seq).any():
        return [(int(r), f"input_ids has {int(lengths[r])} tokens, not seq_length {seq}")
                for r in np.flatnonzero(lengths != seq)]
    m_off, mask = lists("loss_mask")
    if (np.diff(m_off) != seq).any():
        return [(int(r), "loss_mask length differs from seq_length") for r in np.flatnonzero(np.diff(m_off) != seq)]
    s_off, starts = lists("doc_starts")
    counts = np.diff(s_off)
    for name in ("doc_index", "doc_offset"):
        if (np.diff(lists(name)[0]) != counts).any():
            r = int(np.argmax(np.diff(lists(name)[0]) != counts))
            return [(r, f"{name} has not one entry per document (doc_starts)")]
    valid = t.column("valid_token_count").to_numpy(zero_copy_only=False)
    if t.column("valid_token_count").null_count or t.column("input_ids").null_count:
        return [(0, "null values")]
    ids = values[offsets[0]:offsets[0] + n * seq].reshape(n, seq)
    mask2 = mask[m_off[0]:m_off[0] + n * seq].reshape(n, seq)
    return check_rows(ids, valid, starts[s_off[0]:s_off[-1]], counts, bos, pad, vocab, mask2)
