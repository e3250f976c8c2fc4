"""The accuracy audit of a fuzzy run (issue 33, point 3) against brute force on the texts."""

from __future__ import annotations

import itertools
import json
import random

import pandas as pd
import pytest

from curate.stages.dedup.fuzzy import audit
from tests.conftest import run_stage, write_jsonl

WORDS = ("river valley stone bread oven flour library shelf loan quiet garden rain seed harvest winter lamp "
         "copper market bridge window story").split()


def test_wilson_by_hand():
    assert audit.wilson(0, 0) is None
    lo, hi = audit.wilson(8, 10)
    assert round(lo, 3) == 0.490 and round(hi, 3) == 0.943  # the textbook example
    assert audit.wilson(5, 5)[1] == 1.0
    assert audit.size_histogram(pd.Series([2, 2, 3, 7, 150, 20_000]).to_numpy()) == {
        "2": 2, "3-4": 1, "5-9": 1, "10-99": 0, "100-999": 1, "1000-9999": 0, ">=10000": 1}


@pytest.fixture
def run(tmp_path):
    rng = random.Random(3)
    base = [" ".join(rng.choice(WORDS) for _ in range(80)) for _ in range(30)]
    docs = [{"id": f"d{k:03d}", "text": t} for k, t in enumerate(base)]
    for k in range(20):  # near copies, some near the threshold
        words = base[k].split()
        frac = (0.01, 0.03, 0.06)[k % 3]
        docs.append({"id": f"c{k:03d}", "text": " ".join(rng.choice(WORDS) if rng.random() < frac else w for w in words)})
    rng.shuffle(docs)
    write_jsonl(tmp_path / "in" / "a.jsonl", docs[:25])
    write_jsonl(tmp_path / "in" / "b.jsonl", docs[25:])
    out = tmp_path / "out"
    m = run_stage("fuzzy_dedup", {"audit_sample": 1000}, [str(tmp_path / "in" / "*.jsonl")], out)
    return docs, out, m


def test_the_audit_equals_brute_force_when_the_sample_is_everything(run):
    docs, out, m = run
    a = m["dedup"]["audit"]
    assert a["sample"] == len(docs) and a["pairs"] == len(docs) * (len(docs) - 1) // 2
    # the oracle: word 5-grams as Python tuples (the texts are lower-case words, nothing to normalise)
    sets = {d["id"]: set(zip(*[d["text"].split()[i:] for i in range(5)])) for d in docs}
    dup = pd.concat([pd.read_parquet(p) for p in sorted((out / "_duplicates").glob("*.parquet"))])
    comp = dict(zip(dup["id"], dup["component"]))
    true = [(x, y) for x, y in itertools.combinations(sets, 2)
            if len(sets[x] & sets[y]) / len(sets[x] | sets[y]) >= 0.8]
    found = sum(1 for x, y in true if x in comp and comp.get(x) == comp.get(y))
    assert a["true_pairs"] == len(true) and len(true) > 0
    assert a["recall"] == round(found / len(true), 4)
    assert a["removed_in_sample"] == int(dup["removed"].sum()) and a["precision"] == 1.0
    assert sum(m["dedup"]["component_sizes"].values()) == dup["component"].nunique()


def test_no_audit_when_off(tmp_path):
    write_jsonl(tmp_path / "a.jsonl", [{"id": "x", "text": "one two three four five six"}])
    m = run_stage("fuzzy_dedup", {"audit_sample": 0}, [str(tmp_path / "a.jsonl")], tmp_path / "o")
    assert "audit" not in m["dedup"]
    json.dumps(m)
