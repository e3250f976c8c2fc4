"""``curate verify --leakage`` and ``tokenize --split ... --hold-out-leakage`` against a brute-force oracle.

The oracle compares every pair of documents of different splits with its own normalisation (lower
case, runs of anything but letters and digits to one space: the MinHash normalisation for ASCII
text), its own word 5-gram sets and the exact Jaccard of those sets. Near copies are made far from
the threshold (above 0.85 or below 0.6), so the LSH's recall (>= 0.99 at the threshold itself) cannot
make the test flaky.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from curate.app import cli
from curate.stages.errors import SettingsError
from curate.stages.leakage import find_leakage
from tests.conftest import run_stage, side, write_jsonl

WORDS = ("alder birch cedar dune ember fjord glade heath inlet juniper knoll loch marsh nook oxbow pine quarry "
         "ridge scree tarn upland vale willow yew zephyr amber basalt chalk delta estuary").split()


def doc(rng, n=200) -> str:
    return " ".join(rng.choice(WORDS, n)) + "."


def near(rng, text: str, changes: int) -> str:
    words = text.split()
    for k in rng.choice(len(words), changes, replace=False):
        words[k] = "zz" + str(k)
    return " ".join(words)


def normalise(text: str) -> str:
    return re.sub(r"[\W_]+", " ", text.lower()).strip()


def shingles(text: str) -> set:
    w = normalise(text).split(" ")
    return {" ".join(w)} if len(w) < 5 else {" ".join(w[i:i + 5]) for i in range(len(w) - 4)}


def oracle(splits: dict[str, dict[str, str]], threshold=0.8) -> dict:
    """(split_a, id_a, split_b, id_b) -> Jaccard for every pair of documents of different splits."""
    names = list(splits)
    out = {}
    for a in range(len(names)):
        for b in range(a + 1, len(names)):
            for ia, ta in splits[names[a]].items():
                for ib, tb in splits[names[b]].items():
                    sa, sb = shingles(ta), shingles(tb)
                    j = len(sa & sb) / len(sa | sb)
                    if normalise(ta) == normalise(tb) or j >= threshold:
                        out[(names[a], ia, names[b], ib)] = 1.0 if normalise(ta) == normalise(tb) else j
    return out


def as_found(report) -> dict:
    """The report's pairs in the oracle's orientation (the first split's document first)."""
    order = [n for n, _ in report.splits]
    out = {}
    for m in report.matches:
        a, b = (m.split_a, m.id_a), (m.split_b, m.id_b)
        if order.index(a[0]) > order.index(b[0]):
            a, b = b, a
        out[(*a, *b)] = m.jaccard
    return out


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """train (two files: two pieces), val (exact copies after case and punctuation changes, near copies,
    far ones), a task file with one near copy of a train document."""
    rng = np.random.default_rng(7)
    folder = tmp_path_factory.mktemp("leak")
    train = {f"t{k}": doc(rng) for k in range(30)}
    val = {"v0": train["t3"].upper().replace(" ", " , "), "v1": near(rng, train["t5"], 2),
           "v2": near(rng, train["t9"], 40), "v3": doc(rng), "v4": doc(rng), "v5": near(rng, train["t20"], 1)}
    test = {"x0": near(rng, val["v3"], 2), "x1": doc(rng), "x2": "short one"}
    task = [{"question": near(rng, train["t11"], 2)}, {"question": doc(rng)}]
    items = list(train.items())
    write_jsonl(folder / "train" / "a.jsonl", [{"id": i, "text": t} for i, t in items[:15]])
    write_jsonl(folder / "train" / "b.jsonl", [{"id": i, "text": t} for i, t in items[15:]])
    write_jsonl(folder / "val.jsonl", [{"id": i, "text": t} for i, t in val.items()])
    write_jsonl(folder / "test.jsonl", [{"id": i, "text": t} for i, t in test.items()])
    write_jsonl(folder / "squad.jsonl", task)
    tasks = {f"squad#{k}": r["question"] for k, r in enumerate(task)}
    return folder, {"train": train, "val": val, "test": test, "squad": tasks}


def test_every_pair_the_brute_force_finds_and_no_other(corpus):
    folder, texts = corpus
    report = find_leakage([f"train={folder / 'train' / '*.jsonl'}", str(folder / "val.jsonl"),
                           str(folder / "test.jsonl"), f"task:squad={folder / 'squad.jsonl'}"],
                          task_fields=("question",))
    expected = oracle(texts)
    assert len(expected) == 5  # t3~v0 exact, t5~v1, t20~v5, v3~x0, t11~squad#0 (t9~v2 is far)
    found = as_found(report)
    assert set(found) == set(expected)
    for key, j in expected.items():
        assert found[key] == pytest.approx(j, abs=1e-9), key
    assert [m.exact for m in report.matches if m.id_a == "t3" or m.id_b == "t3"] == [True]
    assert dict(report.splits) == {"train": 30, "val": 6, "test": 3, "squad": 2}


def test_the_command_prints_one_line_per_pair_and_exits_1(corpus, capsys):
    folder, _ = corpus
    args = ["verify", "--leakage", str(folder / "train" / "a.jsonl"), str(folder / "val.jsonl")]
    assert cli.main(args) == 1
    out, err = capsys.readouterr()
    assert "a:t3 ~ val:v0 jaccard 1.00 (exact)" in out.splitlines()
    assert "a:t5 ~ val:v1 jaccard 0.9" in out
    assert "duplicate pair(s) across the splits" in err
    assert cli.main(["verify", "--leakage", str(folder / "test.jsonl"), f"task:{folder / 'squad.jsonl'}",
                     "--task-fields", "question"]) == 0
    assert "none across the splits" in capsys.readouterr().out
    assert cli.main(["verify", "--leakage", str(folder / "val.jsonl")]) == 2
    assert "at least two splits" in capsys.readouterr().err
    with pytest.raises(SettingsError, match="named 'val'"):
        find_leakage([str(folder / "val.jsonl"), str(folder / "val.jsonl")])


SPLIT = {"validation": 0.3, "test": 0.2}


def id_in(set_name: str, prefix: str) -> str:
    """The first id ``prefix-k`` that the --split hash puts into ``set_name``."""
    from curate.stages.tokenize.writer import assign_sets

    k = 0
    while assign_sets(pd.Series([f"{prefix}-{k}"]), SPLIT)[0] != set_name:
        k += 1
    return f"{prefix}-{k}"


def test_token_sets_and_hold_out_leakage(corpus, tmp_path):
    """A --split token set is checked set against set (decoded); --hold-out-leakage keeps exactly the
    leaking train documents out of train, as rejects with reason leakage."""
    folder, texts = corpus
    # train documents, and copies of some of them under ids the split hash sends to the held-out sets
    by_set = {"train": {id_in("train", i): t for i, t in texts["train"].items()},
              "test": {id_in("test", i): t for i, t in texts["test"].items()},
              "validation": {id_in("validation", i): t for i, t in texts["val"].items()}}
    everything = [(i, t) for d in by_set.values() for i, t in d.items()]
    rng = np.random.default_rng(3)
    rng.shuffle(everything)
    write_jsonl(tmp_path / "in" / "a.jsonl", [{"id": i, "text": t} for i, t in everything[:20]])
    write_jsonl(tmp_path / "in" / "b.jsonl", [{"id": i, "text": t} for i, t in everything[20:]])
    settings = {"tokenizer": "tiktoken:cl100k_base", "split": SPLIT}
    run_stage("tokenize", settings, [str(tmp_path / "in" / "*.jsonl")], tmp_path / "tokens", format="parquet")
    expected = oracle(by_set)
    leaking = {key[1] for key in expected if key[0] == "train"}
    assert len(leaking) == 3 and len(expected) == 4
    report = find_leakage([str(tmp_path / "tokens")])
    assert [n for n, _ in report.splits] == ["train", "test", "validation"]
    assert set(as_found(report)) == set(expected)

    run_stage("tokenize", {**settings, "hold_out_leakage": True}, [str(tmp_path / "in" / "*.jsonl")],
              tmp_path / "held", format="parquet")
    rejects = pd.concat([pd.read_parquet(p) for p in sorted((side(tmp_path / "held", "_rejects")).glob("*.parquet"))])
    assert set(rejects["id"]) == leaking and set(rejects["_reason"]) == {"leakage"}
    assert all(re.match(r"^validation:\S+ jaccard [01]\.\d\d$", d) for d in rejects["_detail"])
    manifest = json.loads((tmp_path / "held" / "_manifest.json").read_text())
    assert manifest["counts"]["dropped"] == {"leakage": len(leaking)}
    assert manifest["leakage"]["held_out_of_train"] == len(leaking)
    left = set(as_found(find_leakage([str(tmp_path / "held")])))
    assert left == {key for key in expected if key[0] != "train"}  # v3 ~ x0: both held out
    with pytest.raises(SettingsError, match="needs --split"):
        run_stage("tokenize", {"tokenizer": "tiktoken:cl100k_base", "hold_out_leakage": True},
                  [str(tmp_path / "in" / "*.jsonl")], tmp_path / "x", format="parquet")
