"""A token unit's manifest against what its pairs hold: the part of ``curate verify``
(:mod:`curate.stages.tokenize.verify`) that checks the fields ``curate erase`` and ``merge`` carry
forward (``dtype``, the vocabulary sizes, ``totals``, ``sets``, ``counts.out``), one line per field."""

from __future__ import annotations

import numpy as np

from curate.stages.tokenize import megatron


def check_manifest(target, unit: str, vocab_checked: int | None = None) -> None:
    """The unit manifest's own fields against what its pairs hold (after :func:`check_structure`,
    and :func:`check_tokens` for the largest id): ``dtype``, the vocabulary sizes, ``totals``,
    ``sets`` and ``counts.out``. One line per field, naming it and the manifest: these are what
    ``curate erase`` and ``merge`` carry forward, so an edited one must not pass.

    ``vocab_checked``: the vocabulary size the token ids were already checked against (an id at or
    above it is reported on its ``.bin``, so a field no smaller is not reported again)."""
    from curate.stages.output import unit_files

    manifest = target.units[unit]
    name = target.path(manifest.get("_name") or unit_files(unit)["manifest"])
    listed = [f["name"] for f in manifest.get("files") or [] if isinstance(f, dict) and f.get("name")]
    pairs = {p.name: p for p in target.pairs if p.dtype_code is not None and target.listed.get(p.name, ("",))[0] == unit}
    sound = [pairs[n] for n in listed if n in pairs]
    if not sound or len({p.dtype_code for p in sound}) > 1:
        return  # nothing sound to compare with, or mixed dtypes (check_dtypes says so)
    first = sound[0]
    dtype = megatron.DTYPES[first.dtype_code]
    problems = []
    if "dtype" in manifest and manifest["dtype"] != str(dtype):
        problems.append(f"{name}: dtype: {manifest['dtype']!r}, but {first.name}.idx says {dtype} and {first.name}.bin's "
                        f"{first.bin_size} bytes hold its {first.tokens} tokens as {dtype}")
    problems += _vocabulary_problems(name, manifest, dtype, sound, vocab_checked)
    # every pair of the unit was read, and each agrees with its own record (a pair that does not is
    # reported on its file already, and the sums would only say it again)
    if len(sound) == len(listed) and all(_agrees(manifest, p) for p in sound):
        problems += _sum_problems(name, manifest, sound)
    target.problems.extend(problems)


def _vocabulary_problems(name: str, manifest: dict, dtype: np.dtype, pairs: list, checked: int | None) -> list[str]:
    """``vocab_size`` and ``tokenizer.vocab_size``: positive, the dtype's (Megatron's rule, the one the
    writer follows), above every id, and equal (the writer records the tokenizer's size in both); one
    line for each field that fails, else one when they differ."""
    top = max((p for p in pairs if p.largest is not None), key=lambda p: p.largest, default=None)
    tokenizer = manifest.get("tokenizer") if isinstance(manifest.get("tokenizer"), dict) else {}
    fields = {"vocab_size": manifest.get("vocab_size"), "tokenizer.vocab_size": tokenizer.get("vocab_size")}
    problems = []
    for key, value in fields.items():
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            problems.append(f"{name}: {key}: {value!r} is not a vocabulary size (a positive whole number)")
        elif dtype.kind in "iu" and megatron.token_dtype(value) != dtype:
            problems.append(f"{name}: {key}: {value} means {megatron.token_dtype(value)} tokens (uint16 below "
                            f"{megatron.UINT16_LIMIT}), but the pairs are {dtype}")
        elif top is not None and top.largest >= value and (checked is None or value < checked):
            problems.append(f"{name}: {key}: {value}, but {top.name}.bin holds id {top.largest} (every id is below "
                            "the vocabulary size)")
    main, other = fields.values()
    if not problems and None not in (main, other) and main != other:
        problems.append(f"{name}: vocab_size: {main!r}, but tokenizer.vocab_size says {other!r} (the writer records "
                        "the tokenizer's size in both)")
    return problems


def _sum_problems(name: str, manifest: dict, pairs: list) -> list[str]:
    """``totals``, ``sets`` and ``counts.out`` against the sums of what the unit's pairs hold."""
    def held(ps: list) -> dict[str, int]:
        return {"files": len(ps), "documents": sum(p.documents for p in ps), "tokens": sum(p.tokens for p in ps),
                "bytes": sum(p.bin_size for p in ps)}

    problems = []
    totals = manifest.get("totals")
    if isinstance(totals, dict):
        have = held(pairs)
        for key in ("documents", "tokens", "bytes"):
            if key in totals and totals[key] != have[key]:
                problems.append(f"{name}: totals.{key}: {totals[key]!r}, but its {len(pairs)} pairs hold {have[key]} "
                                f"({'.idx' if key != 'bytes' else '.bin'} files)")
    sets = manifest.get("sets")
    if isinstance(sets, dict):
        sets_of = {f["name"]: f.get("set") or "train" for f in manifest.get("files") or [] if isinstance(f, dict)}
        for set_name, claimed in sets.items():
            if not isinstance(claimed, dict):
                continue
            have = held([p for p in pairs if sets_of.get(p.name) == set_name])
            for key in ("files", "documents", "tokens", "bytes"):
                if key in claimed and claimed[key] != have[key]:
                    problems.append(f"{name}: sets.{set_name}.{key}: {claimed[key]!r}, but its pairs of that set hold "
                                    f"{have[key]}")
    counts = manifest.get("counts")
    if manifest.get("stage") == "tokenize" and isinstance(counts, dict) and "out" in counts:
        documents = held(pairs)["documents"]
        if counts["out"] != documents:  # one sequence per document kept: the writer's own count
            problems.append(f"{name}: counts.out: {counts['out']!r}, but its {len(pairs)} pairs hold {documents} "
                            "documents (.idx files)")
    return problems


def _agrees(manifest: dict, p) -> bool:
    """The pair holds what its record in the manifest's ``files`` says (where the record says it)."""
    record = next((f for f in manifest.get("files") or [] if isinstance(f, dict) and f.get("name") == p.name), {})
    return all(record.get(key) in (None, value)
               for key, value in (("documents", p.documents), ("tokens", p.tokens), ("bytes", p.bin_size)))
