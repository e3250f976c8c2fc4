"""Split leakage: documents of one split (train) that are also, exactly or nearly, in another
(validation, test, a benchmark's task file).

    curate verify --leakage TRAIN VAL [TEST ...] [--leakage-threshold 0.8] [--task-fields text]

A split is a dataset (a stage output, JSONL/Parquet files or a glob), a token set (a tokenize output
with document sidecars: one split per set of a ``--split`` token set, named after it), or a
decontamination task file written ``task:NAME=PATH`` (JSONL or Parquet, the format ``decontaminate``
reads: every string, or string in a list, under ``--task-fields`` is one document, id ``NAME#k``).
``NAME=PATH`` names any split; by default its name is the folder's or file's base name.

Definitions:

- **exact duplicate**: the same normalised text (lower-cased, separators collapsed: the MinHash
  normalisation of :mod:`curate.stages.dedup.minhash`), by XXH3-128 of its UTF-8 bytes;
- **near duplicate**: word 5-gram shingle sets with a true Jaccard similarity of at least the
  threshold (default 0.8). Candidates come from MinHash-LSH (128 permutations, seed 42, the bands
  and rows :func:`curate.stages.dedup.lsh.recall_params` picks: a pair at the threshold is a
  candidate with probability >= 0.99), and every candidate is checked with its true Jaccard, so
  no reported pair is a false positive; a pair just above the threshold can be missed (< 1%).
- A document without shingles (empty after normalising) leaks nothing and is left out.
- Token sets are decoded with the tokenizer their manifest names (its BOS and EOD dropped), so a
  token set and a dataset compare as texts, with the same rules.

Only pairs of different splits count; duplicates within a split are dedup's business. The splits
after the first (the held-out ones, small) are held in memory: their texts, hashes and band keys;
the first split (train, large) is streamed piece by piece and probed against them, so memory
follows the held-out sets, never the training set. One process (no cluster).

``tokenize --split ... --hold-out-leakage`` uses the same index in two passes: first the held-out
documents of every partition are indexed, then each train document that duplicates one of them
goes to ``_rejects/`` with reason ``leakage`` (``_detail`` names the held-out document and the
Jaccard) instead of into a train pair.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

import numpy as np

from curate.stages.errors import SettingsError

NUM_PERM, SEED, NGRAM = 128, 42, 5
DEFAULT_THRESHOLD = 0.8
TASK = "task:"


@dataclass(frozen=True)
class Match:
    split_a: str
    id_a: str
    split_b: str
    id_b: str
    jaccard: float
    exact: bool

    def line(self) -> str:
        return f"{self.split_a}:{self.id_a} ~ {self.split_b}:{self.id_b} jaccard {self.jaccard:.2f}" + \
            (" (exact)" if self.exact else "")


def _prepare(texts):
    """(normalised texts, XXH3-128 of each as two uint64, mask of those with content)."""
    import xxhash

    from curate.stages.dedup import minhash

    norm = minhash.normalise(texts)
    values = norm.to_pylist()
    digests = b"".join(xxhash.xxh3_128_digest(v.encode("utf-8", "surrogatepass")) for v in values)
    hashes = np.frombuffer(digests, dtype=">u8").astype(np.uint64).reshape(-1, 2) if values else \
        np.zeros((0, 2), np.uint64)
    return norm, hashes, np.array([bool(v) for v in values], dtype=bool)


class Index:
    """Held-out documents: their split, id, normalised text, exact hash and LSH band keys."""

    def __init__(self, threshold: float = DEFAULT_THRESHOLD):
        from curate.stages.dedup.lsh import recall_params

        if not 0.0 < threshold <= 1.0:
            raise SettingsError(f"leakage threshold must be in (0, 1]; got {threshold!r}")
        self.threshold = threshold
        self.bands, self.rows = recall_params(min(threshold, 0.999), NUM_PERM)
        self.splits: list[str] = []
        self.ids: list[str] = []
        self.texts: list[str] = []
        self._hashes: list[np.ndarray] = []
        self._keys: list[np.ndarray] = []
        self._sorted = None  # (sorted band keys, their document numbers), (sorted hashes, numbers)

    def __len__(self) -> int:
        return len(self.ids)

    def _keys_of(self, norm) -> np.ndarray:
        from curate.stages.dedup import lsh, minhash

        sig, _ = minhash.signatures(norm, NUM_PERM, SEED, NGRAM, normalised=True)
        return lsh.band_keys(sig, self.bands, self.rows)

    def add(self, split: str, ids, texts) -> None:
        norm, hashes, content = _prepare(texts)
        keep = np.flatnonzero(content)
        if not len(keep):
            return
        norm = norm.take(keep)
        self.splits += [split] * len(keep)
        self.ids += [str(ids[k]) for k in keep]
        self.texts += norm.to_pylist()
        self._hashes.append(hashes[keep])
        self._keys.append(self._keys_of(norm))
        self._sorted = None

    def _tables(self):
        if self._sorted is None:
            keys = np.concatenate(self._keys) if self._keys else np.zeros((0, self.bands), np.uint64)
            hashes = np.concatenate(self._hashes) if self._hashes else np.zeros((0, 2), np.uint64)
            # one key per (band, document): the band number is mixed into the key by band_keys
            flat, docs = keys.reshape(-1), np.repeat(np.arange(len(keys)), keys.shape[1])
            order = np.argsort(flat, kind="stable")
            h = hashes[:, 0] ^ (hashes[:, 1] * np.uint64(0x9E3779B97F4A7C15))
            horder = np.argsort(h, kind="stable")
            self._sorted = (flat[order], docs[order], h[horder], horder, hashes)
        return self._sorted

    def probe(self, split: str, ids, texts) -> list[Match]:
        """The documents of ``texts`` (of ``split``) that duplicate an indexed document of another split."""
        from curate.stages.dedup import minhash

        if not len(self):
            return []
        norm, hashes, content = _prepare(texts)
        keep = np.flatnonzero(content)
        if not len(keep):
            return []
        norm = norm.take(keep)
        keys, kdocs, hkeys, hdocs, all_hashes = self._tables()
        pairs = set()
        mine = self._keys_of(norm).reshape(-1)
        probe_docs = np.repeat(np.arange(len(keep)), self.bands)
        lo, hi = np.searchsorted(keys, mine, "left"), np.searchsorted(keys, mine, "right")
        for i in np.flatnonzero(hi > lo):
            pairs.update((int(probe_docs[i]), int(j)) for j in kdocs[lo[i]:hi[i]])
        h = hashes[keep, 0] ^ (hashes[keep, 1] * np.uint64(0x9E3779B97F4A7C15))
        lo, hi = np.searchsorted(hkeys, h, "left"), np.searchsorted(hkeys, h, "right")
        for i in np.flatnonzero(hi > lo):
            pairs.update((int(i), int(j)) for j in hdocs[lo[i]:hi[i]])
        pairs = sorted((i, j) for i, j in pairs if self.splits[j] != split)
        if not pairs:
            return []
        mine_texts = norm.to_pylist()
        a = [mine_texts[i] for i, _ in pairs]
        b = [self.texts[j] for _, j in pairs]
        jac = minhash.jaccard(a, b, NGRAM, normalised=True)
        out = []
        for k, ((i, j), x) in enumerate(zip(pairs, jac)):
            exact = a[k] == b[k]
            if exact or x >= self.threshold:
                out.append(Match(split, str(ids[keep[i]]), self.splits[j], self.ids[j], 1.0 if exact else float(x),
                                 exact))
        return out


# --------------------------------------------------------------------------- splits


@dataclass(frozen=True)
class Split:
    name: str
    kind: str  # dataset | tokens | task
    path: str
    set: str | None = None  # a token set's set (train, validation, test)


_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def _named(spec: str) -> tuple[str | None, str]:
    """(NAME, PATH) of ``NAME=PATH``; (None, spec) for a plain path."""
    name, sep, path = spec.partition("=")
    if sep and _NAME.match(name) and not os.path.exists(spec):
        return name, path
    return None, spec


def _default_name(path: str) -> str:
    """A folder's name, a file's name without its extensions, a glob's fixed folder's name."""
    import glob

    if glob.has_magic(path):
        from curate.stages.dataset import _glob_root

        path = _glob_root(path)
    base = os.path.basename(os.path.normpath(path)) or path
    return base if os.path.isdir(path) else base.split(".")[0] or base


def splits_of(spec: str) -> list[Split]:
    """The split(s) a command-line spec names (see the module doc)."""
    if spec.startswith(TASK):
        name, path = _named(spec[len(TASK):])
        if not os.path.isfile(path):
            raise SettingsError(f"--leakage {spec}: no such task file {path!r}")
        return [Split(name or os.path.basename(path).split(".")[0], "task", path)]
    name, path = _named(spec)
    base = name or _default_name(path)
    manifest = None
    if os.path.isdir(path):
        from curate.stages.output import Output

        manifest = Output.at(path).manifest()
    if manifest and manifest.get("stage") == "tokenize":
        from curate.stages.tokenize.read import open_token_set

        ts = open_token_set(path)
        if ts.docs_columns is None:
            raise SettingsError(f"--leakage {spec}: a token set written before document sidecars: its documents "
                                "have no ids; tokenize again")
        sets = ts.sets()
        if len(sets) == 1:
            return [Split(base, "tokens", path, sets[0])]
        return [Split(f"{name}/{s}" if name else s, "tokens", path, s) for s in sets]
    return [Split(base, "dataset", path)]


def documents(split: Split, task_fields=("text",)):
    """(ids, texts) of a split, piece by piece (a dataset's partition, a token pair, a task file)."""
    if split.kind == "task":
        from curate.stages.decontaminate import read_task_texts

        texts = read_task_texts(split.path, task_fields)
        yield [f"{split.name}#{k}" for k in range(len(texts))], texts
    elif split.kind == "tokens":
        yield from _token_documents(split)
    else:
        from curate.stages import dataset
        from curate.stages.settings import IOSettings, parse_bytes

        io = IOSettings(on_error="skip")
        pieces = dataset.plan_pieces(dataset.expand_named([split.path]), parse_bytes(io.blocksize, "blocksize"))
        meta = dataset.infer_meta(pieces, io)
        for piece in pieces:
            df = dataset.read_piece(piece, io, meta)
            good = df[dataset.REASON].isna() & df["text"].notna()
            yield df["id"][good].astype(str).tolist(), df["text"][good].astype(str).tolist()


def _token_documents(split: Split):
    from curate.stages.tokenize.load import load_tokenizer
    from curate.stages.tokenize.read import document_bounds, open_token_set

    ts = open_token_set(split.path)
    if not ts.tokenizer:
        raise SettingsError(f"{split.path}: its manifest names no tokenizer to decode the documents with")
    tok = load_tokenizer(ts.tokenizer)
    head = int(bool(ts.add_bos and ts.bos_id is not None))
    tail = int(bool(ts.append_eod and ts.eod_id is not None))
    for pair in ts.pairs:
        if pair.set != split.set:
            continue
        index = ts.index(pair)
        tokens = ts.tokens(pair, index)
        ids = ts.docs(pair)[1].column("id").to_pylist()
        starts, lengths = document_bounds(index)
        texts = [tok.decode(np.asarray(tokens[s + head:s + max(n - tail, head)])) for s, n in zip(starts, lengths)]
        yield ids, texts


@dataclass
class Report:
    splits: list  # (name, documents)
    matches: list[Match]


def find_leakage(specs, threshold: float = DEFAULT_THRESHOLD, task_fields=("text",)) -> Report:
    """Every exact and near duplicate across the splits ``specs`` name (the first is streamed)."""
    splits = [s for spec in specs for s in splits_of(str(spec))]
    if len(splits) < 2:
        raise SettingsError(f"--leakage: give at least two splits (got {len(splits)}: "
                            f"{', '.join(s.name for s in splits) or 'none'})")
    names = [s.name for s in splits]
    if len(set(names)) != len(names):
        raise SettingsError(f"--leakage: two splits are named {sorted(n for n in names if names.count(n) > 1)[0]!r}; "
                            "name them NAME=PATH")
    index = Index(threshold)
    matches, counts = [], {}
    for split in [*splits[1:], splits[0]]:
        counts[split.name] = 0
        for ids, texts in documents(split, task_fields):
            counts[split.name] += len(ids)
            matches += index.probe(split.name, ids, texts)
            if split is not splits[0]:
                index.add(split.name, ids, texts)
    order = {n: k for k, n in enumerate(names)}
    matches.sort(key=lambda m: (order[m.split_a], m.id_a, order[m.split_b], m.id_b))
    return Report([(n, counts[n]) for n in names], matches)
