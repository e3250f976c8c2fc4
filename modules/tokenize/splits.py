"""Which set a document goes to (``--split``) and which train documents leak a held-out one.

Splits (``--split validation=0.01,test=0.01``): a document goes to validation when
``u < 0.01``, to test when ``0.01 <= u < 0.02``, else to train, where ``u`` is
``(xxh64(id as UTF-8, seed SPLIT_SEED) >> 11) / 2**53``: stable across runs, partitionings and
machines (:func:`assign_sets`).

Leakage (``--hold-out-leakage``): a first pass collects every partition's held-out documents
(:func:`held_out`) into one index (:func:`leakage_index`, :mod:`curate.stages.leakage`); the writer
then probes each partition's train documents against it (:func:`_leaks`), and a train document that
duplicates a held-out one is rejected with reason ``LEAKAGE``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from curate.stages.errors import SettingsError
from curate.stages.stage import REASON

SPLIT_NAMES = ("validation", "test")  # train is what is left
#: the reject reason of a train document that duplicates a held-out one (--hold-out-leakage)
LEAKAGE = "leakage"
#: seed of the split hash: xxh64(b"curate-split", seed 0). Fixed forever (changing it moves documents
#: between train and the held-out sets); not 0, so the split is independent of ``shuffle --seed 0``
SPLIT_SEED = 7849727821106584039


def parse_split(text: str) -> dict[str, float]:
    """'validation=0.01,test=0.01' -> {'validation': 0.01, 'test': 0.01}."""
    out: dict[str, float] = {}
    for item in (s.strip() for s in str(text).split(",")):
        if not item:
            continue
        name, sep, value = item.partition("=")
        if not sep:
            raise SettingsError(f"split: expected NAME=FRACTION such as validation=0.01; got {item!r}")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            raise SettingsError(f"split: {name.strip()} must be a fraction such as 0.01; got {value!r}") from None
    return out


def assign_sets(ids: pd.Series, split: dict[str, float] | None) -> np.ndarray:
    """Set of each document: 'train', or a held-out set by the hash of its id (see the module doc)."""
    if not split:
        return np.full(len(ids), "train", dtype=object)
    from curate.stages.shuffle import hash_ids

    u = (hash_ids(ids, SPLIT_SEED) >> np.uint64(11)).astype(np.float64) * 2.0**-53
    sets = np.full(len(ids), "train", dtype=object)
    lo = 0.0
    for name in SPLIT_NAMES:
        if name in split:
            hi = lo + split[name]
            sets[(u >= lo) & (u < hi)] = name
            lo = hi
    return sets


def held_out(df: pd.DataFrame, split: dict) -> pd.DataFrame:
    """(set, id, text) of the partition's documents that go to a held-out set (``--hold-out-leakage``'s
    first pass)."""
    good = (df[REASON].isna() if REASON in df.columns else pd.Series(True, index=df.index)) & df["text"].notna()
    kept = df[good.to_numpy()]
    sets = assign_sets(kept["id"], split)
    rows = sets != "train"
    return pd.DataFrame({"set": sets[rows], "id": kept["id"].to_numpy()[rows].astype(str),
                         "text": kept["text"].to_numpy()[rows].astype(str)})


def leakage_index(frames, threshold: float):
    """The held-out documents of every partition, indexed for :meth:`curate.stages.leakage.Index.probe`."""
    from curate.stages.leakage import Index

    index = Index(threshold)
    for frame in frames:
        for name, group in frame.groupby("set", sort=True):
            index.add(str(name), group["id"].tolist(), group["text"].tolist())
    return index


def _leaks(kept: pd.DataFrame, sets: np.ndarray, leakage) -> dict[int, str]:
    """Position in ``kept`` -> what it duplicates (``SET:ID jaccard J``) of each train document that
    duplicates a held-out document."""
    train = np.flatnonzero(sets == "train")
    ids = kept["id"].to_numpy()[train].astype(str)
    found = {}
    for m in leakage.probe("train", list(ids), kept["text"].to_numpy()[train].astype(str).tolist()):
        found.setdefault(m.id_a, f"{m.split_b}:{m.id_b} jaccard {m.jaccard:.2f}")
    return {int(p): found[i] for p, i in zip(train, ids) if i in found}
