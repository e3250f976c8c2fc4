"""``bucket``: percentile buckets of score columns, exact, against a brute-force sort.

Edge cases: ties across a cut (equal scores share a bucket), NaN and null scores (no bucket for that
score; -1 when a document has none), a constant score, few bins (the cut's bin holds many values),
the three combine rules, two partitions, refusals (0 buckets, more buckets than documents, an unknown
column, a bad rule).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from curate.stages import bucket as bucket_mod
from curate.stages.errors import SettingsError
from tests.conftest import read_output, run_stage, write_jsonl


def oracle(values: np.ndarray, buckets: int) -> tuple[list[float], np.ndarray]:
    """Cuts by sorting everything; the bucket of each value (NaN: NaN)."""
    v = np.sort(values[~np.isnan(values)])
    cuts = [float(v[math.ceil(k * len(v) / buckets) - 1]) for k in range(1, buckets)]
    b = np.array([np.nan if np.isnan(x) else sum(x >= c for c in cuts) for x in values])
    return cuts, b


@pytest.fixture
def scored(tmp_path):
    rng = np.random.default_rng(7)
    n = 400
    a = np.round(rng.random(n), 2)  # 101 distinct values: many ties
    b = rng.normal(size=n)
    a[::37] = np.nan
    b[::23] = np.nan
    b[0] = a[0] = np.nan  # a document without any score
    rows = [{"id": f"d{i}", "text": "x", "a": None if np.isnan(a[i]) else float(a[i]),
             "b": None if np.isnan(b[i]) else float(b[i]), "c": 1.0} for i in range(n)]
    write_jsonl(tmp_path / "in" / "p1.jsonl", rows[:250])
    write_jsonl(tmp_path / "in" / "p2.jsonl", rows[250:])
    return tmp_path, a, b


@pytest.mark.parametrize("bins", [1 << 16, 4])
@pytest.mark.parametrize("combine", ["max", "mean", "weights:a=3,b=1"])
def test_buckets_equal_a_brute_force_sort(scored, monkeypatch, bins, combine):
    tmp, a, b = scored
    monkeypatch.setattr(bucket_mod, "BINS", bins)
    m = run_stage("bucket", {"scores": ("a", "b"), "buckets": 5, "combine": combine},
                  str(tmp / "in" / "*.jsonl"), tmp / f"out-{bins}-{combine[:4]}")
    cuts_a, ba = oracle(a, 5)
    cuts_b, bb = oracle(b, 5)
    assert m["bucket"]["cuts"] == {"a": cuts_a, "b": cuts_b}
    stack = np.vstack([ba, bb])
    have = ~np.isnan(stack)
    if combine == "max":
        want = np.where(have, stack, -1).max(axis=0)
    elif combine == "mean":
        want = np.floor(np.where(have, stack, 0).sum(axis=0) / np.maximum(have.sum(axis=0), 1))
    else:
        w = np.array([[3.0], [1.0]]) * have
        want = np.floor((np.where(have, stack, 0) * w).sum(axis=0) / np.maximum(w.sum(axis=0), 1e-300))
    want = np.where(have.any(axis=0), want, -1).astype(int)
    out = read_output(tmp / f"out-{bins}-{combine[:4]}")
    assert out["bucket"].tolist() == want.tolist()
    assert out["bucket"].iloc[0] == -1
    assert sum(m["bucket"]["counts"].values()) == 400


def test_a_constant_score_and_refusals(scored):
    tmp, _, _ = scored
    m = run_stage("bucket", {"scores": ("c",), "buckets": 3}, str(tmp / "in" / "*.jsonl"), tmp / "const")
    assert m["bucket"]["cuts"] == {"c": [1.0, 1.0]} and m["bucket"]["counts"] == {"2": 400}
    with pytest.raises(SettingsError, match="buckets must be in 1..10000"):
        bucket_mod.BucketSettings(scores=("a",), buckets=0)
    with pytest.raises(SettingsError, match="combine must be max, mean"):
        bucket_mod.BucketSettings(scores=("a",), combine="median")
    with pytest.raises(SettingsError, match="one of a, b"):
        bucket_mod.BucketSettings(scores=("a", "b"), combine="weights:z=1")
    with pytest.raises(SettingsError, match="the input has no column 'nope'"):
        run_stage("bucket", {"scores": ("nope",)}, str(tmp / "in" / "*.jsonl"), tmp / "x")
    with pytest.raises(SettingsError, match="500 buckets for 389 documents with a"):
        run_stage("bucket", {"scores": ("a", "b"), "buckets": 500}, str(tmp / "in" / "*.jsonl"), tmp / "y")


def test_assign_is_pure():
    df = pd.DataFrame({"id": ["x", "y"], "s": [0.1, np.nan]})
    out = bucket_mod.assign(df, bucket_mod.BucketSettings(scores=("s",), buckets=2), {"s": [0.05]})
    assert out["bucket"].tolist() == [1, -1] and "bucket" not in df.columns
