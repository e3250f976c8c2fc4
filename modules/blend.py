"""``blend``: mix several datasets by weight (NeMo Curator's ``blend_datasets``), documents or tokens.

    curate blend --input web/ wiki/ code/ --output OUT --weights 0.6,0.3,0.1 --target-size 1000000 [--seed 0]
    curate blend --input tok-web/ tok-wiki/ --output OUT --weights 0.7,0.3      # tokenize outputs

Each ``--input`` is one source; ``weights`` (any positive numbers, normalised) go with the inputs in
order; ``names`` labels them (default: the input's base name).

Document datasets: source i contributes ``ceil(w_i * target_size)`` documents (so the blend can be a
few documents larger than the target, as in NeMo). A source with fewer documents is repeated whole as
many times as fit, and the rest is a seeded random sample of it (without replacement); a source with
more is sampled. The sample is drawn on the client from the per-partition counts (one counting pass,
no global sort): positions by ``numpy.random.default_rng([seed, i]).choice``, so the output depends
only on the inputs, the weights, the target and the seed. Rows keep their order within a partition;
sources follow each other in input order, so run ``shuffle`` afterwards before tokenizing. Ids stay
unique: the k-th extra copy of a document gets ``ID@k``. A ``blend_source`` column names the source.
NeMo takes the first documents of each dataset instead of a sample, so a source sorted by anything
contributes only its beginning there.

By a column (``--by bucket --by-weights 19:3,18:2`` or ``--by-factors 19:2,18:1.5,0:0``): the
inputs are read as one dataset and each value of the column is a group, planned as a source is above:
with ``--by-weights VALUE:WEIGHT,...`` (normalised; unlisted values get nothing) a value gets
``ceil(w * target_size)`` documents; with ``--by-factors VALUE:FACTOR,...`` every document of a value
appears ``FACTOR`` times (the whole part as copies, the fraction as a seeded sample; unlisted values
once, 0 drops them), so a top quality bucket can be repeated. A missing value is the group
``<null>``. ``blend_source`` is ``COLUMN=VALUE``; the manifest has, per value, its weight or factor,
the documents it had and the documents it got (``blend.values``).

Token datasets (every input a ``tokenize`` output): nothing is copied. The stage writes Megatron's
``--data-path`` list, ``weight prefix`` pairs, where a file's weight is its source's normalised weight
times the file's share of that source's tokens: ``data_path.txt`` (the train files, or all of them
without ``--split``) and, when tokenize held sets out, ``valid_data_path.txt`` / ``test_data_path.txt``
for ``--valid-data-path`` / ``--test-data-path``. Prefixes are absolute paths. Megatron normalises
the weights again, and samples each file in proportion to its weight, so each source gets its share
of training tokens whatever its size; ``target_size`` is not used.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from curate.stages.errors import SettingsError
from curate.stages.stage import REASON, Stage, check_range

SOURCE_COLUMN = "blend_source"
SET_FILES = {"train": "data_path.txt", "validation": "valid_data_path.txt", "test": "test_data_path.txt"}


@dataclass(frozen=True)
class BlendSettings:
    weights: tuple[float, ...] = field(default=(), metadata={
        "help": "one weight per input, in order (normalised)", "metavar": "W,..."})
    target_size: int | None = field(default=None, metadata={
        "help": "documents in the blend (document datasets)", "metavar": "N"})
    seed: int = field(default=0, metadata={"help": "seed of the samples", "metavar": "S"})
    names: tuple[str, ...] = field(default=(), metadata={
        "help": "source names, in input order (default: the inputs' base names)", "metavar": "NAME,..."})
    by: str | None = field(default=None, metadata={
        "help": "mix by the values of this column (a bucket, a language) instead of by input", "metavar": "COLUMN"})
    by_weights: str | None = field(default=None, metadata={
        "help": "with --by: VALUE:WEIGHT,... (normalised; unlisted values get none) for --target-size documents",
        "metavar": "V:W,..."})
    by_factors: str | None = field(default=None, metadata={
        "help": "with --by: VALUE:FACTOR,... copies of each document of that value (1.5: every document once "
                "and a seeded half again; unlisted values: 1)", "metavar": "V:F,..."})

    def __post_init__(self):
        if self.by is not None:
            self._check_by()
            return
        if self.by_weights or self.by_factors:
            raise SettingsError("by_weights and by_factors go with --by COLUMN")
        if not self.weights:
            raise SettingsError("weights: give one weight per input, e.g. --weights 0.7,0.3")
        if any(not (w > 0) or math.isinf(w) for w in self.weights):
            raise SettingsError(f"weights must be positive numbers; got {', '.join(map(str, self.weights))}")
        check_range(self, "target_size", lo=1)
        check_range(self, "seed", lo=0, hi=2**63 - 1)
        if self.names and len(set(self.names)) != len(self.names):
            raise SettingsError("names must be different from each other")

    def _check_by(self) -> None:
        if not self.by:
            raise SettingsError("by: name a column, e.g. --by bucket")
        if self.weights or self.names:
            raise SettingsError("with --by the inputs are mixed as one: weights and names go with inputs, not with --by")
        if (self.by_weights is None) == (self.by_factors is None):
            raise SettingsError("with --by give either --by-weights VALUE:WEIGHT,... (with --target-size) or "
                                "--by-factors VALUE:FACTOR,...")
        check_range(self, "seed", lo=0, hi=2**63 - 1)
        if self.by_weights is not None:
            pairs = parse_value_map(self.by_weights, "by_weights")
            if not any(w > 0 for _, w in pairs):
                raise SettingsError("by_weights: at least one weight must be positive")
            if self.target_size is None:
                raise SettingsError("by_weights: give --target-size, the documents of the blend")
        else:
            parse_value_map(self.by_factors, "by_factors")
            if self.target_size is not None:
                raise SettingsError("by_factors: the factors set the size; --target-size goes with --by-weights")
        check_range(self, "target_size", lo=1)


def parse_value_map(text: str, name: str) -> tuple[tuple[str, float], ...]:
    """'19:3,18:2,en:0.5' -> (('19', 3.0), ('18', 2.0), ('en', 0.5)): column values (as text) and numbers >= 0."""
    out, seen = [], set()
    for item in (s.strip() for s in str(text).split(",") if s.strip()):
        value, sep, number = item.rpartition(":")
        try:
            x = float(number)
        except ValueError:
            x = None
        if not sep or not value or x is None or not (x >= 0) or math.isinf(x):
            raise SettingsError(f"{name}: expected VALUE:NUMBER (a number >= 0); got {item!r}")
        if value in seen:
            raise SettingsError(f"{name}: value {value!r} given twice")
        seen.add(value)
        out.append((value, x))
    if not out:
        raise SettingsError(f"{name}: give at least one VALUE:NUMBER")
    return tuple(out)


def normalised(weights) -> np.ndarray:
    w = np.asarray(weights, dtype=np.float64)
    return w / w.sum()


def documents_per_source(weights, target: int) -> list[int]:
    """NeMo's rule: ceil(normalised weight x target) for each source."""
    return [math.ceil(w * target) for w in normalised(weights)]


def plan_source(sizes: list[int], wanted: int, seed: int, source: int) -> list[tuple[int, np.ndarray]]:
    """(full copies, sorted positions of the extra sample) per partition of one source."""
    total = int(sum(sizes))
    if total == 0:
        return [(0, np.zeros(0, dtype=np.int64)) for _ in sizes]
    copies, rest = divmod(wanted, total)
    rng = np.random.default_rng([seed, source])
    picked = np.sort(rng.choice(total, size=rest, replace=False)) if rest else np.zeros(0, dtype=np.int64)
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    out = []
    for p in range(len(sizes)):
        lo, hi = np.searchsorted(picked, [bounds[p], bounds[p + 1]])
        out.append((copies, (picked[lo:hi] - bounds[p]).astype(np.int64)))
    return out


def blend_partition(df: pd.DataFrame, copies: int, extra: np.ndarray, name: str, meta: pd.DataFrame) -> pd.DataFrame:
    """``copies`` copies of the kept rows plus the rows at ``extra``; rows rejected upstream once."""
    from curate.stages.dataset import STRING

    bad = df[REASON].notna().to_numpy() if REASON in df.columns else np.zeros(len(df), dtype=bool)
    kept = df[~bad]
    pieces = []
    for k in range(copies + (1 if len(extra) else 0)):
        rows = kept if k < copies else kept.iloc[extra]
        ids = rows["id"].astype(STRING) if k == 0 else (rows["id"].astype(STRING) + f"@{k}")
        pieces.append(rows.assign(id=ids.astype(STRING)))
    pieces.append(df[bad])
    out = pd.concat(pieces, ignore_index=True) if pieces else df.iloc[:0]
    out = out.assign(**{SOURCE_COLUMN: pd.Series(name, index=out.index, dtype=STRING)})
    out = out.reindex(columns=meta.columns)
    return out.astype(meta.dtypes.to_dict())


NULL_VALUE = "<null>"


def value_keys(df: pd.DataFrame, column: str) -> pd.Series:
    """The group of each row: its value as text, ``<null>`` for a missing one."""
    from curate.stages.dataset import STRING

    return df[column].astype(STRING).fillna(NULL_VALUE)


def value_counts(df: pd.DataFrame, column: str) -> dict[str, int]:
    """{value: kept rows} of one partition."""
    kept = df if REASON not in df.columns else df[df[REASON].isna()]
    return {str(k): int(n) for k, n in value_keys(kept, column).value_counts().items()}


def blend_by_partition(df: pd.DataFrame, column: str, plan, meta: pd.DataFrame) -> pd.DataFrame:
    """Per value, ``copies`` of its kept rows plus the rows at ``extra`` (positions among that value's
    kept rows), in value order; rows rejected upstream once. ``blend_source`` is ``COLUMN=VALUE``."""
    bad = df[REASON].notna().to_numpy() if REASON in df.columns else np.zeros(len(df), dtype=bool)
    kept, keys = df[~bad], value_keys(df[~bad], column)
    pieces = [blend_partition(kept[(keys == value).to_numpy()], copies, extra, f"{column}={value}", meta)
              for value, copies, extra in plan]
    if bad.any():
        pieces.append(blend_partition(df[bad], 0, np.zeros(0, dtype=np.int64), "", meta))
    return pd.concat(pieces, ignore_index=True) if pieces else meta.iloc[:0]


def source_names(settings: BlendSettings, inputs) -> list[str]:
    if settings.names:
        return list(settings.names)
    names = []
    for spec in inputs:
        base = os.path.basename(os.path.normpath(spec)) or spec
        name, k = base, 2
        while name in names:
            name, k = f"{base}-{k}", k + 1
        names.append(name)
    return names


def token_manifest(spec: str) -> dict | None:
    """The tokenize manifest(s) of a directory, one per finished ``--prefix`` unit, as one: their files
    together (``_manifest.json`` and ``manifest.<prefix>.json``, each with its ``_SUCCESS``)."""
    import glob
    import json

    if not os.path.isdir(spec):
        return None
    found = []
    for path in sorted(glob.glob(os.path.join(spec, "manifest*.json")) + glob.glob(os.path.join(spec, "_manifest*.json"))):
        unit = os.path.basename(path).lstrip("_")[len("manifest"):-len(".json")]  # "" or ".web"
        try:
            with open(path, encoding="utf-8") as f:
                m = json.load(f)
        except (OSError, ValueError):
            continue
        if m.get("stage") == "tokenize" and os.path.exists(os.path.join(spec, "_SUCCESS" + unit)):
            from curate.stages.output import check_paths

            found.append(check_paths(m, path))
    if not found:
        return None
    files = [f for m in found for f in m.get("files", [])]
    return {**found[0], "files": files, "dtype": found[0].get("dtype") if len({m.get("dtype") for m in found}) == 1
            else "mixed", "totals": {k: sum(m.get("totals", {}).get(k, 0) for m in found) for k in ("documents", "tokens")}}


def data_paths(sources: list[tuple[str, dict]], weights) -> dict[str, list[tuple[float, str]]]:
    """Per set, (weight, prefix) pairs: source weight x the file's share of the source's tokens in that set."""
    out: dict[str, list[tuple[float, str]]] = {}
    for s in SET_FILES:
        pairs = []
        for (spec, manifest), w in zip(sources, normalised(weights)):
            files = [f for f in manifest.get("files", []) if (f.get("set") or "train") == s and f["tokens"] > 0]
            tokens = sum(f["tokens"] for f in files)
            for f in files:
                pairs.append((float(w) * f["tokens"] / tokens, os.path.abspath(os.path.join(spec, f["name"]))))
        if pairs:
            out[s] = pairs
    return out


class BlendStage(Stage):
    name = "blend"
    needs = ()

    def columns(self, settings):
        from curate.stages.stage import Columns

        return Columns(needs=(settings.by,) if settings.by else (), adds=("blend_source",))
    Settings = BlendSettings
    help = "mix datasets by weight to a target size, or write Megatron's --data-path weights for token sets"
    reads_raw_files = True  # token sets are not document datasets: the stage checks its inputs itself
    reads = ("documents", "tokens")

    def output_kind(self, settings, read):
        if settings.by is not None or read == "documents":
            return "documents"
        return "weights" if read == "tokens" else None  # token sets: a data-path list, no tokens copied

    def check(self, settings: BlendSettings, inputs) -> None:
        if settings.by is not None:
            return
        if len(settings.weights) != len(inputs):
            raise SettingsError(f"weights: {len(settings.weights)} weights for {len(inputs)} inputs; give one per input")
        if settings.names and len(settings.names) != len(inputs):
            raise SettingsError(f"names: {len(settings.names)} names for {len(inputs)} inputs")

    def run(self, settings: BlendSettings, ctx) -> dict:
        self.check(settings, ctx.input)
        if settings.by is not None:
            if any(token_manifest(spec) for spec in ctx.input):
                raise SettingsError("blend --by mixes documents: its inputs must be document datasets, not token sets")
            return self._by_column(settings, ctx)
        manifests = [token_manifest(spec) for spec in ctx.input]
        if all(manifests):
            return self._tokens(settings, ctx, list(zip(ctx.input, manifests)))
        if any(manifests):
            raise SettingsError("blend: inputs mix token sets (tokenize outputs) and document datasets")
        if settings.target_size is None:
            raise SettingsError("target_size: the number of documents of the blend is required for document datasets")
        return self._documents(settings, ctx)

    def _documents(self, settings, ctx):
        import dask
        import dask.dataframe as dd

        from curate.stages import dataset

        names = source_names(settings, ctx.input)
        sources = [dataset.read_dataset((spec,), ctx.io, rejects_dir=ctx.output) for spec in ctx.input]
        counts = [s.map_partitions(lambda d: pd.Series([int(d[REASON].isna().sum())]), meta=(None, "int64"))
                  for s in sources]
        sizes = [list(map(int, c)) for c in ctx.run_compute(*counts)]
        wanted = documents_per_source(settings.weights, settings.target_size)
        for name, size, n in zip(names, sizes, wanted):
            if n and not sum(size):
                raise SettingsError(f"blend: source {name} has no documents but weight asks for {n}")
        metas = [s._meta.assign(**{SOURCE_COLUMN: pd.Series([], dtype=dataset.STRING)}) for s in sources]
        union = pd.concat(metas)
        front = ["id", "text"]
        tail = [c for c in dataset.INTERNAL if c in union.columns]
        meta = union[front + [c for c in union.columns if c not in front + tail] + tail].iloc[:0]
        parts, info = [], {}
        for i, (src, name) in enumerate(zip(sources, names)):
            plan = plan_source(sizes[i], wanted[i], settings.seed, i)
            for part, (copies, extra) in zip(src.to_delayed(), plan):
                parts.append(dask.delayed(blend_partition)(part, copies, extra, name, meta))
            total = sum(sizes[i])
            info[name] = {"input": ctx.input[i], "weight": float(normalised(settings.weights)[i]),
                          "available": total, "documents": wanted[i],
                          "full_copies": wanted[i] // total if total else 0}
        out = dd.from_delayed(parts, meta=meta, verify_meta=False)
        return dataset.write_dataset(out, ctx, stage=self.name, settings=settings,
                                     extra={"blend": {"sources": info, "target_size": settings.target_size,
                                                      "documents": int(sum(wanted))}},
                                     docs_in=sum(sum(size) for size in sizes))  # what it read, not its copies

    def _by_column(self, settings, ctx):
        """Mix the inputs (as one dataset) by the values of ``settings.by``: each value is a group with
        its own documents wanted (a share of the target, or a factor of what it has), planned exactly
        as a source is (:func:`plan_source`), from one counting pass."""
        import dask
        import dask.dataframe as dd

        from curate.stages import dataset

        ddf = dataset.read_dataset(ctx.input, ctx.io, rejects_dir=ctx.output)
        column = settings.by
        if column not in ddf.columns:
            raise SettingsError(f"by: the input has no column {column!r} (columns: {', '.join(map(str, ddf.columns))})")
        counted = ctx.run_compute(*[dask.delayed(value_counts)(p, column) for p in ddf.to_delayed()])
        values = sorted({v for c in counted for v in c})
        sizes = {v: [c.get(v, 0) for c in counted] for v in values}
        available = {v: int(sum(s)) for v, s in sizes.items()}
        if settings.by_weights is not None:
            weights = dict(parse_value_map(settings.by_weights, "by_weights"))
            listed = [v for v in weights if weights[v] > 0]
            missing = [v for v in listed if not available.get(v)]
            if missing:
                raise SettingsError(f"by_weights: no document has {column} = {missing[0]!r} "
                                    f"(values: {', '.join(values[:20]) or 'none'})")
            total_w = sum(weights[v] for v in listed)
            wanted = {v: math.ceil(weights.get(v, 0.0) / total_w * settings.target_size) if v in listed else 0
                      for v in values}
            rule = {v: {"weight": weights.get(v, 0.0) / total_w} for v in values}
        else:
            factors = dict(parse_value_map(settings.by_factors, "by_factors"))
            wanted = {v: int(round(factors.get(v, 1.0) * available[v])) for v in values}
            rule = {v: {"factor": factors.get(v, 1.0)} for v in values}
        plans = {v: plan_source(sizes[v], wanted[v], settings.seed, k) for k, v in enumerate(values)}
        meta = ddf._meta.assign(**{SOURCE_COLUMN: pd.Series([], dtype=dataset.STRING)})
        front = ["id", "text"]
        tail = [c for c in dataset.INTERNAL if c in meta.columns]
        meta = meta[front + [c for c in meta.columns if c not in front + tail] + tail].iloc[:0]
        parts = [dask.delayed(blend_by_partition)(part, column, [(v, *plans[v][p]) for v in values], meta)
                 for p, part in enumerate(ddf.to_delayed())]
        info = {v: {**rule[v], "available": available[v], "documents": wanted[v],
                    "full_copies": wanted[v] // available[v] if available[v] else 0} for v in values}
        out = dd.from_delayed(parts, meta=meta, verify_meta=False)
        return dataset.write_dataset(out, ctx, stage=self.name, settings=settings,
                                     extra={"blend": {"by": column, "values": info,
                                                      "documents": int(sum(wanted.values()))}},
                                     docs_in=sum(available.values()))  # what it read, not its copies

    def _tokens(self, settings, ctx, sources):
        import time

        from curate.stages import dataset

        started = time.time()
        names = source_names(settings, ctx.input)
        dtypes = {m.get("dtype") for _, m in sources}
        if len(dtypes) > 1:
            raise SettingsError(f"blend: token sets have different dtypes ({', '.join(map(str, dtypes))}); "
                                f"Megatron reads each file with its own, but check the tokenizers match")
        paths = data_paths(sources, settings.weights)
        if "train" not in paths:
            raise SettingsError("blend: the token sets hold no train tokens")
        # through the stage's Output: the lists are owned, checksummed files listed in the manifest
        out = dataset.stage_output(ctx)
        out.begin(dataset.stage_owner(ctx, self.name))
        records = [out.write_bytes(SET_FILES[s], (" ".join(f"{w:.12g} {p}" for w, p in pairs) + "\n").encode("utf-8"))
                   for s, pairs in paths.items()]
        stats = [{"in": int(m.get("totals", {}).get("documents", 0)), "out": int(m.get("totals", {}).get("documents", 0))}
                 for _, m in sources]
        info = {name: {"input": spec, "weight": float(w), "tokens": int(m.get("totals", {}).get("tokens", 0)),
                       "tokenizer": (m.get("tokenizer") or {}).get("name")}
                for name, (spec, m), w in zip(names, sources, normalised(settings.weights))}
        tokenizers = {v["tokenizer"] for v in info.values()}
        return dataset.finish_output(ctx, stage=self.name, settings=settings, partition_stats=stats, schema=None,
                                     started=started, records=records, extra={"blend": {
                                         "sources": info, "data_path": {s: SET_FILES[s] for s in paths},
                                         "files": {s: len(p) for s, p in paths.items()},
                                         "same_tokenizer": len(tokenizers) == 1}})
