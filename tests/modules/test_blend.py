"""blend: documents by weight to a target size (seeded), and Megatron --data-path weights for token sets."""

import json
import math

import numpy as np
import pytest

from curate.stages.blend import BlendSettings, data_paths, documents_per_source, plan_source
from curate.stages.errors import SettingsError
from tests.conftest import read_output, run_stage, write_jsonl


def make_source(path, name, n, files=2):
    per = math.ceil(n / files)
    for k in range(files):
        write_jsonl(path / f"{k}.jsonl", [{"id": f"{name}{i}", "text": f"{name} text {i}"}
                                          for i in range(k * per, min(n, (k + 1) * per))])
    return str(path / "*.jsonl")


def test_documents_per_source_is_nemos_ceil_rule():
    assert documents_per_source([2, 1, 1], 10) == [5, 3, 3]  # ceil(5), ceil(2.5), ceil(2.5): 11 >= 10
    assert documents_per_source([0.5, 0.5], 7) == [4, 4]


def test_plan_source_copies_then_samples_without_replacement():
    plan = plan_source([3, 4], wanted=10, seed=1, source=0)  # 7 docs: one full copy + 3 sampled
    assert [c for c, _ in plan] == [1, 1]
    picked = [p for _, e in plan for p in e.tolist()]
    assert len(picked) == 3
    # positions are local to their partition and the sample is the seeded draw itself
    draw = np.sort(np.random.default_rng([1, 0]).choice(7, 3, replace=False))
    assert sorted(np.concatenate([plan[0][1], plan[1][1] + 3]).tolist()) == draw.tolist()


def test_blend_documents(tmp_path):
    a = make_source(tmp_path / "a", "a", 10)
    b = make_source(tmp_path / "b", "b", 3)
    m = run_stage("blend", {"weights": [0.5, 0.5], "target_size": 8, "seed": 3, "names": ["web", "wiki"]},
                  [a, b], tmp_path / "o")
    out = read_output(tmp_path / "o")
    counts = out["blend_source"].value_counts().to_dict()
    assert counts == {"web": 4, "wiki": 4}
    assert out["id"].is_unique
    wiki = sorted(out[out["blend_source"] == "wiki"]["id"])
    assert sum(i.endswith("@1") for i in wiki) == 1 and {"b0", "b1", "b2"} <= set(wiki)  # one full copy + 1
    assert set(out[out["blend_source"] == "web"]["id"]) <= {f"a{i}" for i in range(10)}
    assert m["blend"]["sources"]["wiki"]["full_copies"] == 1 and m["blend"]["documents"] == 8
    assert m["counts"]["in"] == 13 and m["counts"]["out"] == 8  # docs in: what it read, not its copies
    # deterministic by seed; another seed samples other documents
    run_stage("blend", {"weights": [0.5, 0.5], "target_size": 8, "seed": 3}, [a, b], tmp_path / "o2")
    assert read_output(tmp_path / "o2")["id"].tolist() == out["id"].tolist()
    run_stage("blend", {"weights": [0.5, 0.5], "target_size": 8, "seed": 4}, [a, b], tmp_path / "o3")
    assert read_output(tmp_path / "o3")["id"].tolist() != out["id"].tolist()


def fake_token_set(path, files):
    path.mkdir(parents=True)
    manifest = {"stage": "tokenize", "dtype": "uint16", "tokenizer": {"name": "tok"},
                "totals": {"documents": 1, "tokens": sum(t for _, _, t in files)},
                "files": [{"name": n, "set": s, "tokens": t, "documents": 1, "bytes": 2 * t} for n, s, t in files]}
    (path / "_manifest.json").write_text(json.dumps(manifest))
    (path / "_SUCCESS").write_text("")
    return str(path)


def test_blend_token_sets_writes_megatron_data_path(tmp_path):
    web = fake_token_set(tmp_path / "web", [("part_00000", None, 300), ("part_00001", None, 100)])
    wiki = fake_token_set(tmp_path / "wiki", [("train_00000", "train", 50), ("validation_00000", "validation", 5)])
    m = run_stage("blend", {"weights": [3, 1]}, [web, wiki], tmp_path / "o")
    line = (tmp_path / "o" / "data_path.txt").read_text().split()
    pairs = dict(zip(line[1::2], map(float, line[0::2])))
    # web gets 3/4 of the weight, split 3:1 by tokens; wiki's train file the other 1/4
    assert pairs == {f"{tmp_path}/web/part_00000": 0.5625, f"{tmp_path}/web/part_00001": 0.1875,
                     f"{tmp_path}/wiki/train_00000": 0.25}
    assert (tmp_path / "o" / "valid_data_path.txt").read_text().split() == ["0.25", f"{tmp_path}/wiki/validation_00000"]
    assert (tmp_path / "o" / "_SUCCESS").exists() and m["blend"]["files"] == {"train": 3, "validation": 1}
    assert data_paths([(web, json.loads((tmp_path / "web" / "_manifest.json").read_text()))], [1])["train"][0][0] == 0.75


def test_settings_and_usage_errors(tmp_path):
    with pytest.raises(SettingsError):
        BlendSettings()
    with pytest.raises(SettingsError):
        BlendSettings(weights=(1.0, -1.0))
    a = make_source(tmp_path / "a", "a", 2)
    with pytest.raises(SettingsError, match="one per input"):
        run_stage("blend", {"weights": [1.0], "target_size": 2}, [a, a], tmp_path / "o")
    with pytest.raises(SettingsError, match="target_size"):
        run_stage("blend", {"weights": [1.0]}, [a], tmp_path / "o")


def test_token_set_with_prefix_units(tmp_path):
    # tokenize --prefix web and --prefix code into one folder: _manifest.web.json, _manifest.code.json
    folder = tmp_path / "tok"
    folder.mkdir()
    for unit, tokens in (("web", 30), ("code", 10)):
        m = {"stage": "tokenize", "dtype": "uint16", "totals": {"documents": 1, "tokens": tokens},
             "files": [{"name": f"{unit}_00000", "set": None, "tokens": tokens}]}
        (folder / f"_manifest.{unit}.json").write_text(json.dumps(m))
        (folder / f"_SUCCESS.{unit}").write_text("")
    (folder / "_manifest.half.json").write_text(json.dumps({"stage": "tokenize", "files": [{"name": "x", "tokens": 5}]}))
    other = fake_token_set(tmp_path / "other", [("part_00000", None, 10)])
    run_stage("blend", {"weights": [1, 1]}, [str(folder), other], tmp_path / "o")
    line = (tmp_path / "o" / "data_path.txt").read_text().split()
    assert dict(zip(line[1::2], map(float, line[0::2]))) == {  # the unfinished unit is left out
        f"{folder}/code_00000": 0.125, f"{folder}/web_00000": 0.375, f"{tmp_path}/other/part_00000": 0.5}


def test_blend_by_a_column_weights_and_factors(tmp_path):
    """--by: each value a group. Edge cases: a value with fewer documents than wanted (copies), an
    unlisted value (none with weights, once with factors), a null value, a factor of 0, two partitions."""
    import json as _json

    rows = [{"id": f"d{i}", "text": f"document {i}", "bucket": b}
            for i, b in enumerate(["hi", "hi", "mid", "mid", "mid", "lo", "lo", "lo", "lo", None])]
    write_jsonl(tmp_path / "in" / "a.jsonl", rows[:5])
    write_jsonl(tmp_path / "in" / "b.jsonl", rows[5:])
    m = run_stage("blend", {"by": "bucket", "by_weights": "hi:2,mid:1,lo:1", "target_size": 8},
                  str(tmp_path / "in" / "*.jsonl"), tmp_path / "w")
    values = m["blend"]["values"]
    # by hand: weights 2/4, 1/4, 1/4 of 8 -> hi 4 (2 copies of 2), mid 2 of 3, lo 2 of 4, <null> 0
    assert {v: values[v]["documents"] for v in values} == {"hi": 4, "mid": 2, "lo": 2, "<null>": 0}
    assert values["hi"]["full_copies"] == 2 and values["<null>"]["available"] == 1
    out = read_output(tmp_path / "w")
    assert out["id"].is_unique and len(out) == 8
    assert (m["counts"]["in"], m["counts"]["out"]) == (10, 8)  # issue 47, point 10: not the copies
    assert out.groupby("blend_source").size().to_dict() == {"bucket=hi": 4, "bucket=lo": 2, "bucket=mid": 2}
    m2 = run_stage("blend", {"by": "bucket", "by_factors": "hi:2,mid:0.5,lo:0"}, str(tmp_path / "in" / "*.jsonl"),
                   tmp_path / "f")
    got = {v: d["documents"] for v, d in m2["blend"]["values"].items()}
    assert got == {"hi": 4, "mid": 2, "lo": 0, "<null>": 1}  # mid: round(0.5 x 3) = 2; <null> unlisted: once
    again = run_stage("blend", {"by": "bucket", "by_factors": "hi:2,mid:0.5,lo:0"}, str(tmp_path / "in" / "*.jsonl"),
                      tmp_path / "f2")
    parts = lambda m: [r["xxh3_128"] for r in m["outputs"] if r["path"].startswith("part")]  # noqa: E731
    assert parts(again) == parts(m2)  # seeded: the same documents
    assert _json.dumps(m2["blend"])  # plain values


@pytest.mark.parametrize("settings, message", [
    ({"by": "bucket", "by_weights": "hi:1"}, "give --target-size"),
    ({"by": "bucket", "by_weights": "hi:1", "by_factors": "hi:1", "target_size": 3}, "either --by-weights"),
    ({"by": "bucket", "weights": (1.0,), "by_factors": "hi:1"}, "weights and names go with inputs"),
    ({"by": "bucket", "by_factors": "hi:x"}, "expected VALUE:NUMBER"),
    ({"by": "bucket", "by_factors": "hi:1,hi:2"}, "given twice"),
    ({"weights": (1.0,), "by_factors": "hi:1"}, "go with --by COLUMN"),
])
def test_blend_by_refusals(settings, message):
    from curate.stages.blend import BlendSettings
    from curate.stages.errors import SettingsError

    with pytest.raises(SettingsError, match=message):
        BlendSettings(**settings)
