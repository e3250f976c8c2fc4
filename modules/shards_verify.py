"""``curate verify`` of a shards output: every shard against the layout ``modules/shards.py`` documents.

Files present and parseable as 1-D ``.npy``, the dtype against the vocabulary, shard sizes, the split
each shard's name says against ``holdout_shards``, every id below the vocabulary size, EOT counts
against the manifest, and the document sidecars' invariants (they tile each shard; a first row may
only continue the previous shard's last document; every document begins exactly once). A shard is
read in chunks of ``CHUNK`` tokens, never whole.

The layout's constants live here, and the writer imports them, so that this check needs nothing of
the stage it checks.
"""

from __future__ import annotations

import re

import numpy as np

from curate.stages.errors import DataError

CHUNK = 1 << 22  # tokens per read/convert/write step
UINT16_MAX_VOCAB = 65535
HOLDOUT_SPLIT = "val"
TRAIN_SPLIT = "train"


def read_npy_header(f, where: str) -> tuple[np.dtype, int, int]:
    """(dtype, length, data offset) of a 1-D ``.npy`` file; DataError naming the file otherwise."""
    from numpy.lib import format as npy

    try:
        version = npy.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = npy.read_array_header_1_0(f)
        elif version == (2, 0):
            shape, fortran, dtype = npy.read_array_header_2_0(f)
        else:
            raise ValueError(f"unsupported .npy version {version}")
    except ValueError as e:
        raise DataError(f"{where}: parse: not a .npy file ({e})") from None
    if len(shape) != 1 or fortran:
        raise DataError(f"{where}: parse: shape {shape}, expected a 1-D array")
    return dtype, int(shape[0]), f.tell()


def verify(path: str, vocab_size: int | None = None, tokenizer=None, first_tokens: int = 64):
    """Check a shards output (``curate verify DIR``): files present and parseable, dtype against the
    vocabulary, shard sizes, split names, every id below the vocabulary size, EOT counts, and the
    document sidecars' invariants (see :mod:`curate.stages.shards`)."""
    from curate.stages.output import Output
    from curate.stages.tokenize.read import CheckReport, listed_files, vocab_for_check

    out = Output.at(path)
    manifest = out.manifest()
    problems: list[str] = []
    files = listed_files(out, manifest, ".npy", problems)
    manifest = manifest or {}
    vocab, source = vocab_for_check(vocab_size, tokenizer, manifest, out.manifest_name)
    per_shard = {s["name"]: s for s in manifest.get("shards", [])}
    size, holdout = manifest.get("shard_tokens"), manifest.get("holdout_shards", 0)
    eot = manifest.get("eot_id")
    total, first, split_counts = 0, None, {}
    pattern = re.compile(r"^(?P<name>.+)_(?P<split>val|train)_(?P<k>\d{6})\.npy$")
    listed = sorted((r["path"] for r in manifest.get("outputs", []) if r["path"].endswith(".npy")),
                    key=lambda n: n[-10:])
    number = {}
    for k, name in enumerate(listed):
        m = pattern.match(name)
        number[name] = k
        if not m or int(m.group("k")) != k:
            problems.append(f"{out.path(name)}: name: expected NAME_val|train_{k:06d}.npy (shard {k})")
            continue
        split_counts[m.group("split")] = split_counts.get(m.group("split"), 0) + 1
        if m.group("split") != (HOLDOUT_SPLIT if k < holdout else TRAIN_SPLIT):
            problems.append(f"{out.path(name)}: split: shard {k} is {m.group('split')!r}, but holdout_shards is "
                            f"{holdout}")
    for rec in sorted(files, key=lambda r: number.get(r["path"], -1)):
        where = out.path(rec["path"])
        k = number.get(rec["path"], -1)
        try:
            with out.open_read(rec["path"]) as f:
                dtype, n, offset = read_npy_header(f, where)
                if dtype.kind != "u" or dtype.itemsize not in (2, 4) or dtype.byteorder == ">":
                    problems.append(f"{where}: dtype: {dtype.str}, expected little-endian uint16 or uint32")
                    continue
                if dtype.itemsize == 2 and vocab is not None and vocab > UINT16_MAX_VOCAB:
                    problems.append(f"{where}: dtype: uint16 cannot hold a {vocab:,}-id vocabulary (more than 65,535)")
                if manifest.get("dtype") and np.dtype(manifest["dtype"]) != dtype:
                    problems.append(f"{where}: dtype: {dtype}, {out.manifest_name} says {manifest['dtype']}")
                if offset + n * dtype.itemsize != rec["bytes"]:
                    problems.append(f"{where}: size: the header says {n} ids ({offset + n * dtype.itemsize} bytes), "
                                    f"the file has {rec['bytes']}")
                    continue
                if size and (n > size or (n != size and k != len(listed) - 1)):
                    problems.append(f"{where}: shard size: {n} tokens, expected {size} (only the last may be shorter)")
                bad, eots, pos, first_bad = 0, 0, 0, None
                limit = vocab if vocab is not None else np.iinfo(dtype).max + 1
                while pos < n:
                    data = np.frombuffer(f.read(min(CHUNK, n - pos) * dtype.itemsize), dtype=dtype)
                    if not len(data):
                        break
                    wrong = data >= limit
                    if wrong.any() and first_bad is None:
                        first_bad = (pos + int(np.argmax(wrong)), int(data[wrong].max()))
                    bad += int(wrong.sum())
                    if eot is not None:
                        eots += int((data == eot).sum())
                    if first is None and pos == 0 and k == 0:
                        first = (f"shard 0 ({rec['path']}, {n:,} tokens)", data[:first_tokens].copy())
                    pos += len(data)
                if bad:
                    problems.append(f"{where}: token id range: {bad} ids >= the vocabulary size {vocab} (first at "
                                    f"token {first_bad[0]}, id {first_bad[1]})")
                entry = per_shard.get(rec["path"], {})
                if not bad and entry.get("eot") is not None and entry["eot"] != eots:
                    problems.append(f"{where}: eot: {eots} EOT ids, {out.manifest_name} says {entry['eot']}")
                total += n
        except DataError as e:
            problems.append(str(e))
        except OSError as e:
            problems.append(f"{where}: parse: cannot read ({e})")
    totals = manifest.get("totals") or {}
    if not problems and totals.get("tokens") is not None and totals["tokens"] != total:
        problems.append(f"{out.path(out.manifest_name)}: counts: {total} tokens in the shards, "
                        f"manifest says {totals['tokens']}")
    notes = _check_docs(out, manifest, listed, problems)
    summary = [f"shards: {len(listed)} files ({', '.join(f'{v} {k}' for k, v in sorted(split_counts.items()))}), "
               f"{total:,} tokens, {manifest.get('dtype')}, eot {eot}"]
    return CheckReport(problems, summary, first, (manifest.get("tokenizer") or {}).get("name"), vocab, source,
                       notes)


def _check_docs(out, manifest: dict, listed: list[str], problems: list) -> list[str]:
    """The shards' document sidecars, in shard order, against the invariants :mod:`curate.stages.shards`
    documents; the notes."""
    from curate.stages.output import CHECKSUM
    from curate.stages.tokenize.docs import read_checked

    columns = manifest.get("docs_columns")
    if columns is None:
        return [f"{out.path(out.manifest_name)}: no document sidecars (its token set was written before curate "
                "recorded them): the shards cannot be traced to document ids"]
    wanted = [*columns, "start", "length", "offset"]
    entries = {s.get("name"): s for s in manifest.get("shards", [])}
    checksums = {r["path"]: r.get(CHECKSUM) for r in manifest.get("outputs", [])}
    before = len(problems)
    open_doc = (None, 0)  # (id, next offset) of the document the previous shard ended in; None: unknown
    started = 0
    for name in listed:
        entry = entries.get(name, {})
        rel = entry.get("docs")
        table = None
        if not rel:
            problems.append(f"{out.path(out.manifest_name)}: shards: {name} names no document sidecar")
        elif not out.exists(rel):
            problems.append(f"{out.path(rel)}: missing: listed in {out.manifest_name}")
        else:
            try:
                _, table = read_checked(out.fs()[0], out.path(rel), checksums.get(rel), None, f"shard {name}")
            except DataError as e:
                problems.append(str(e))
        if table is not None and table.column_names != wanted:
            problems.append(f"{out.path(rel)}: columns: {', '.join(table.column_names)}, expected {', '.join(wanted)}")
            table = None
        if table is None:
            open_doc = None
            continue
        where = out.path(rel)
        start, length, offset = (table.column(c).to_numpy() for c in ("start", "length", "offset"))
        ends = np.cumsum(length)
        if not len(length) or (length <= 0).any() or (start != ends - length).any() or ends[-1] != entry.get("tokens"):
            problems.append(f"{where}: ranges: start/length do not tile the shard's {entry.get('tokens')} tokens "
                            f"({len(length)} rows covering {int(ends[-1]) if len(ends) else 0})")
            open_doc = None
            continue
        first_id = table.column("id")[0].as_py()
        if (offset < 0).any() or (offset[1:] != 0).any():
            problems.append(f"{where}: offset: only a first row may continue a document (offset > 0)")
        elif offset[0] > 0 and open_doc is not None and open_doc != (first_id, int(offset[0])):
            problems.append(f"{where}: offset: row 0 continues document {first_id!r} at stream token {int(offset[0])}, "
                            "but the shard before does not stop there in it")
        started += int((offset == 0).sum())
        open_doc = (table.column("id")[-1].as_py(), int(offset[-1] + length[-1]))
    documents = (manifest.get("totals") or {}).get("documents")
    if len(problems) == before and documents is not None and started != documents:
        problems.append(f"{out.path(out.manifest_name)}: documents: {started} documents begin in the shards' sidecars, "
                        f"the manifest says {documents}")
    return []
