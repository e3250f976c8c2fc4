"""``curate merge``: concatenate a directory's pairs into one ``.bin``/``.idx``, streaming.

The result is what Megatron's ``tools/merge_datasets.py`` (``IndexedDatasetBuilder.add_index``)
writes for the same pairs in name order: the ``.bin`` files concatenated; in the index the lengths
concatenated, the pointers recomputed as the running sum over all lengths, and each file's
document indices (without its leading 0) shifted by the number of sequences before it.

Megatron's builder keeps every length and document index of every file in Python lists until the
end, which needs hundreds of GB for a large corpus. Here the header counts come from the input
headers, and each array is written in chunks of ``megatron.CHUNK`` elements while reading the inputs
in the same order, so memory does not grow with the data. Both outputs are written under
temporary names (``dataset.atomic_write``) and renamed when complete, the ``.idx`` first.
"""

from __future__ import annotations

import os
import shutil

import numpy as np

from modules.dataset import atomic_write
from modules.errors import DataError, SettingsError
from modules.tokenize import megatron
from modules.tokenize.verify import check_dtypes, check_structure, discover


class _Source:
    """One input pair: its header, and its index arrays read chunk by chunk."""

    def __init__(self, fs, idx_path: str, bin_path: str):
        self.fs, self.idx_path, self.bin_path = fs, idx_path, bin_path
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


def merge_sources(sources: list[_Source], out_prefix: str, chunk: int = megatron.CHUNK) -> dict:
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
    base = 0

    def write_idx(path: str) -> None:
        nonlocal base
        with open(path, "wb") as out:
            out.write(megatron.header_bytes(dtype, sequences, doc_entries))
            for s in sources:
                tokens = 0
                for lengths in s.chunks("lengths", chunk):
                    out.write(lengths.tobytes())
                    tokens += int(lengths.sum(dtype=np.int64))
                if tokens * dtype.itemsize != s.bin_size:
                    raise DataError(
                        f"{s.bin_path}: bin size: {s.bin_size} bytes, but its index has {tokens} tokens of {dtype}"
                    )
            for s in sources:
                for lengths in s.chunks("lengths", chunk):
                    steps = lengths.astype(np.int64) * dtype.itemsize
                    pointers = np.cumsum(steps) - steps + base
                    out.write(pointers.astype("<i8").tobytes())
                    base += int(steps.sum())
            out.write(np.zeros(1, dtype="<i8").tobytes())
            shift = 0
            for s in sources:
                first = True
                for docs in s.chunks("documents", chunk):
                    if first:
                        docs, first = docs[1:], False
                    out.write((docs + shift).astype("<i8").tobytes())
                shift += s.sequences

    def write_bin(path: str) -> None:
        with open(path, "wb") as out:
            for s in sources:
                with s.fs.open(s.bin_path, "rb") as f:
                    shutil.copyfileobj(f, out, 8 << 20)
        # the index is complete before the .bin gets its name; an error in either leaves neither
        atomic_write(out_prefix + ".idx", write_idx)

    atomic_write(out_prefix + ".bin", write_bin)
    return {
        "output": out_prefix,
        "files": len(sources),
        "documents": doc_entries - 1,
        "sequences": sequences,
        "tokens": base // dtype.itemsize,
        "bytes": base,
        "dtype": str(dtype),
    }


def merge(path: str, out_prefix: str, prefix: str | None = None) -> dict:
    """Merge every pair of the output directory ``path`` (or those of one set) into ``out_prefix``."""
    if "://" in out_prefix:
        raise SettingsError(f"--output {out_prefix}: merge writes local files; copy the result afterwards")
    target = discover(path, prefix)
    if not target.is_dir:
        raise SettingsError(f"{path}: not a directory of pairs")
    sets = sorted({p.set for p in target.pairs})
    if prefix is None and len(sets) > 1:
        raise SettingsError(f"{path}: holds several sets ({', '.join(sets)}); pick one with --prefix NAME")
    # refuse to merge anything verify would reject on structure (ids are not scanned here)
    for p in target.pairs:
        check_structure(target, p)
    check_dtypes(target)
    if target.problems:
        more = f" (and {len(target.problems) - 1} more problems; run curate verify)" if len(target.problems) > 1 else ""
        raise DataError(f"{target.problems[0]}{more}")
    out_abs = os.path.abspath(out_prefix)
    sources = []
    for p in target.pairs:
        if os.path.abspath(target.path(p.name)) == out_abs:
            raise SettingsError(f"--output {out_prefix}: is one of the inputs")
        sources.append(_Source(target.fs, target.path(p.name + ".idx"), target.path(p.name + ".bin")))
    return merge_sources(sources, out_prefix)
