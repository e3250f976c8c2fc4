"""``curate merge``: concatenate a directory's pairs into one ``.bin``/``.idx``, streaming.

The result is what Megatron's ``tools/merge_datasets.py`` (``IndexedDatasetBuilder.add_index``)
writes for the same pairs in name order: the ``.bin`` files concatenated; in the index the lengths
concatenated, the pointers recomputed as the running sum over all lengths, and each file's
document indices (without its leading 0) shifted by the number of sequences before it.

Megatron's builder keeps every length and document index of every file in Python lists until the
end, which needs hundreds of GB for a large corpus. Here the header counts come from the input
headers, and each array is written in chunks of ``megatron.CHUNK`` elements while reading the inputs
in the same order, so memory does not grow with the data.

The output is its own unit (``modules/output.py``): ``PREFIX.bin``, ``PREFIX.idx``,
``PREFIX.docs.parquet`` and beside them ``manifest.<name>.json`` (the pair's documents, tokens, bytes
and XXH3-128 checksums, and the input set) and ``_SUCCESS.<name>``, so ``curate verify PREFIX``
checks the merged pair like any other. The files are written under temporary names and renamed
when complete, the sidecar first, then the ``.idx``, then the ``.bin``; the journal names them
before the first byte, so the next merge to the same PREFIX removes what a killed one left. merge
refuses an output inside its input directory (it would become a stray pair of the set), files it
did not write, a symbolic link where it writes, and inputs that fail verify's structural checks;
the checksum of every input ``.bin`` is computed while copying it and compared with its manifest,
so a damaged input leaves no output.

Document sidecar (the tokenize sidecar's format, ``writer.py``): the inputs' sidecars concatenated
in merge order, so row k is still sequence k of the merged ``.idx``; each input's is checked against
its checksum and its ``.idx`` before it is copied, one input at a time. The manifest records, per
input, its row count and :func:`~curate.stages.tokenize.docs.content_digest` (``input_docs``), so
verify checks the concatenation without the inputs. Inputs written before sidecars existed give a
merged pair without one (said on the command line); a set where only some pairs have one is refused.
"""

from __future__ import annotations

import os

import numpy as np

from curate.stages.errors import DataError, SettingsError
from curate.stages.tokenize import docs, megatron
from curate.stages.tokenize.verify import check_docs, check_dtypes, check_structure, discover


class _Source:
    """One input pair: its header, and its index arrays read chunk by chunk."""

    def __init__(self, fs, idx_path: str, bin_path: str, checksum: str | None = None,
                 docs_path: str | None = None, docs_checksum: str | None = None):
        self.fs, self.idx_path, self.bin_path = fs, idx_path, bin_path
        self.checksum = checksum  # the .bin's XXH3-128 from its manifest, checked while copying
        self.docs_path, self.docs_checksum = docs_path, docs_checksum  # its document sidecar, if any
        with fs.open(idx_path, "rb") as f:
            head = f.read(megatron.HEADER.size)
        _, _, self.code, self.sequences, self.doc_entries = megatron.HEADER.unpack(head)
        self.dtype = megatron.DTYPES[self.code]
        self.bin_size = int(fs.size(bin_path))

    def chunks(self, what: str, chunk: int):
        """Arrays of at most ``chunk`` elements: 'lengths', 'pointers' or 'documents' (indices)."""
        s = self.sequences
        offset, count, dtype = {
            "lengths": (megatron.HEADER.size, s, "<i4"),
            "documents": (megatron.HEADER.size + 12 * s, self.doc_entries, "<i8"),
        }[what]
        item = np.dtype(dtype).itemsize
        with self.fs.open(self.idx_path, "rb") as f:
            f.seek(offset)
            done = 0
            while done < count:
                n = min(chunk, count - done)
                data = f.read(n * item)
                if len(data) != n * item:
                    raise DataError(f"{self.idx_path}: index size: file ends inside the {what} array")
                yield np.frombuffer(data, dtype=dtype)
                done += n


def merge_sources(sources: list[_Source], out_prefix: str, chunk: int = megatron.CHUNK, out=None) -> dict:
    """Write the merged pair ``out_prefix`` (through ``out``, an Output whose unit is the pair's
    name, or as plain files when None); the stats include both files' records."""
    import xxhash

    from curate.stages.output import Output

    if not sources:
        raise DataError(f"{out_prefix}: nothing to merge")
    dtypes = {s.dtype for s in sources}
    if len(dtypes) > 1:
        raise DataError(
            f"{sources[0].idx_path}: dtype code: the pairs mix {', '.join(sorted(map(str, dtypes)))}; "
            "cannot merge"
        )
    dtype = sources[0].dtype
    sequences = sum(s.sequences for s in sources)
    doc_entries = sum(max(s.doc_entries - 1, 0) for s in sources) + 1
    folder = os.path.dirname(os.path.abspath(out_prefix))
    os.makedirs(folder, exist_ok=True)
    name = os.path.basename(out_prefix)
    out = out or Output(folder)
    base = 0

    def write_idx(f) -> None:
        nonlocal base
        f.write(megatron.header_bytes(dtype, sequences, doc_entries))
        for s in sources:
            tokens = 0
            for lengths in s.chunks("lengths", chunk):
                f.write(lengths.tobytes())
                tokens += int(lengths.sum(dtype=np.int64))
            if tokens * dtype.itemsize != s.bin_size:
                raise DataError(
                    f"{s.bin_path}: bin size: {s.bin_size} bytes, but its index has {tokens} tokens of {dtype}"
                )
        for s in sources:
            for lengths in s.chunks("lengths", chunk):
                steps = lengths.astype(np.int64) * dtype.itemsize
                pointers = np.cumsum(steps) - steps + base
                f.write(pointers.astype("<i8").tobytes())
                base += int(steps.sum())
        f.write(np.zeros(1, dtype="<i8").tobytes())
        shift = 0
        for s in sources:
            first = True
            for indices in s.chunks("documents", chunk):
                if first:
                    indices, first = indices[1:], False
                f.write((indices + shift).astype("<i8").tobytes())
            shift += s.sequences

    with_docs = {s.docs_path is not None for s in sources}
    if len(with_docs) > 1:
        lacking = next(s for s in sources if s.docs_path is None)
        raise DataError(f"{lacking.idx_path}: no document sidecar, but other pairs of the set have one; cannot merge "
                        "the document ids")
    side, input_docs, columns = None, None, None
    with out.open(name + ".bin") as bin_file:
        for s in sources:
            hasher = xxhash.xxh3_128()
            with s.fs.open(s.bin_path, "rb") as f:
                while True:
                    data = f.read(8 << 20)
                    if not data:
                        break
                    hasher.update(data)
                    bin_file.write(data)
            if s.checksum and hasher.hexdigest() != s.checksum:
                raise DataError(f"{s.bin_path}: checksum: XXH3-128 differs from its manifest (the file changed "
                                "since it was written); nothing merged")
        # the index is complete before the .bin gets its name; an error in either leaves neither
        with out.open(name + ".idx") as idx_file:
            write_idx(idx_file)
            if with_docs == {True}:
                side, input_docs, columns = merge_docs(sources, out, docs.docs_name(name))
    return {
        "output": out_prefix,
        "files": len(sources),
        "documents": doc_entries - 1,
        "sequences": sequences,
        "tokens": base // dtype.itemsize,
        "bytes": base,
        "dtype": str(dtype),
        "records": [bin_file.record, idx_file.record, *([side] if side else [])],
        "docs": side,  # the sidecar's record (None: the inputs have none)
        "docs_columns": columns,
        "input_docs": input_docs,
    }


def merge_docs(sources: list[_Source], out, rel: str) -> tuple[dict, list[dict], list[str]]:
    """Write the inputs' document sidecars concatenated as ``rel``; (its record, per input its name,
    rows and content digest, the columns). Each input is checked (checksum, one row per sequence)
    before it is copied."""
    import pyarrow.parquet as pq

    first = None
    input_docs = []
    with out.open(rel) as f:
        writer = None
        try:
            for s in sources:
                pair = os.path.basename(s.idx_path)[:-len(".idx")]
                _, table = docs.read_checked(s.fs, s.docs_path, s.docs_checksum, s.sequences, f"pair {pair}")
                if first is None:
                    first = table.schema.remove_metadata()
                    writer = pq.ParquetWriter(f, first, compression="zstd")
                if table.column_names != first.names:
                    raise DataError(f"{s.docs_path}: columns: {', '.join(table.column_names)}, but the first pair's "
                                    f"sidecar has {', '.join(first.names)}; cannot merge them")
                writer.write_table(table.cast(first))
                input_docs.append({"name": pair, "rows": table.num_rows, "content_xxh3_128": docs.content_digest(table)})
        finally:
            if writer is not None:
                writer.close()
    return {**f.record, "rows": sum(d["rows"] for d in input_docs)}, input_docs, first.names


def merge(path: str, out_prefix: str, prefix: str | None = None) -> dict:
    """Merge every pair of the output directory ``path`` (or those of one set) into ``out_prefix``."""
    import time

    from curate.stages import output

    if "://" in out_prefix:
        raise SettingsError(f"--output {out_prefix}: merge writes local files; copy the result afterwards")
    target = discover(path, prefix)
    if not target.is_dir:
        raise SettingsError(f"{path}: not a directory of pairs")
    folder = os.path.dirname(os.path.abspath(out_prefix))
    name = os.path.basename(out_prefix)
    if "://" not in path and output._inside(output._real(folder), output._real(path)):
        raise output.OwnershipError(f"--output {out_prefix}: lies inside the input set {path}; the merged pair "
                                    "would be read as a stray pair of it: write it elsewhere")
    sets = sorted({p.set for p in target.pairs})
    if prefix is None and len(sets) > 1:
        raise SettingsError(f"{path}: holds several sets ({', '.join(sets)}); pick one with --prefix NAME")
    # refuse to merge anything verify would reject on structure, counts or index checksums (the ids
    # are not scanned here; the .bin checksums are checked while copying)
    for p in target.pairs:
        index = check_structure(target, p)
        if index is not None:
            check_docs(target, p, index)
        target.problems.extend(target.mismatches.get(p.name, []))
    check_dtypes(target)
    if target.problems:
        more = f" (and {len(target.problems) - 1} more problems; run curate verify)" if len(target.problems) > 1 else ""
        raise DataError(f"{target.problems[0]}{more}")
    out_abs = os.path.abspath(out_prefix)
    sources = []
    for p in target.pairs:
        if os.path.abspath(target.path(p.name)) == out_abs:
            raise SettingsError(f"--output {out_prefix}: is one of the inputs")
        entry = target.entry(p.name) or {}
        columns = (target.units.get(target.listed.get(p.name, (None,))[0]) or {}).get("docs_columns")
        sources.append(_Source(target.fs, target.path(p.name + ".idx"), target.path(p.name + ".bin"),
                               entry.get("bin_xxh3_128"),
                               target.path(entry.get("docs") or docs.docs_name(p.name)) if columns else None,
                               entry.get("docs_xxh3_128")))
    out = output.Output.at(folder, name)
    files = [name + ".bin", name + ".idx", docs.docs_name(name)]
    claim_files(out, files)
    started = time.time()
    with output.Lock(out, f"curate merge {path}"):
        out.begin({"kind": "stage", "stage": "merge"})
        # named before the first byte: a killed merge's files (and temporaries) stay the unit's to remove
        out.intend("merge", files)
        stats = merge_sources(sources, out_prefix, out=out)
        records = stats.pop("records")
        side = stats["docs"]
        manifest = target.manifest or {}
        out.finish({
            "stage": "merge", "owner": {"kind": "stage", "stage": "merge"},
            "input": path, "prefix": prefix, "input_files": [p.name for p in target.pairs],
            "dtype": stats["dtype"], "dtype_code": megatron.dtype_code(stats["dtype"]),
            "vocab_size": manifest.get("vocab_size"), "tokenizer": manifest.get("tokenizer"),
            "files": [{"name": name, "set": None, "documents": stats["documents"], "tokens": stats["tokens"],
                       "bytes": stats["bytes"], "idx_bytes": records[1]["bytes"],
                       "bin_xxh3_128": records[0]["xxh3_128"], "idx_xxh3_128": records[1]["xxh3_128"],
                       **({"docs": side["path"], "docs_xxh3_128": side["xxh3_128"]} if side else {})}],
            "docs_columns": stats.pop("docs_columns"),
            "input_docs": stats.pop("input_docs"),
            "seconds": round(time.time() - started, 3),
        }, records)
    return stats


def claim_files(out, names) -> None:
    """Refuse to overwrite files of ``out``'s folder that this unit did not write, or to write
    through a link (the folder may hold anything else of the user's, links included)."""
    from curate.stages import output

    for rel in [*names, *out.names.values()]:
        output.refuse_link(out.url, out.path(rel))
    links = output.Output.at(out.path(out.state_dir)).links()  # the journal, below its folder
    if links:
        raise output.OwnershipError(output.link_refusal(out.url, out.path(f"{out.state_dir}/{links[0]}")))
    owned = out.owned()
    for rel in names:
        if out.exists(rel) and rel not in owned:
            raise output.OwnershipError(f"--output {out.path(rel)}: exists and was not written by curate merge; "
                                        "curate never overwrites files it did not write")
