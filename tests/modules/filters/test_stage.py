"""The filter stage end to end: two partitions, manifest counts, rejects, scores, resume, CLI errors."""

import json

import dask.dataframe as dd
import pandas as pd
import pytest

from curate.stages.dataset import STRING
from curate.stages.errors import SettingsError
from curate.stages.filters.stage import FilterSettings, FilterStage
from tests.conftest import curate, read_output, run_stage, side, write_jsonl

GOOD = " ".join(["The quick brown fox jumps over the lazy dog and that is the end of it."] * 5)
DOCS = [
    {"id": "good1", "text": GOOD},
    {"id": "short", "text": "Too short."},
    {"id": "digits", "text": " ".join(["1234 5678"] * 40)},
    {"id": "empty", "text": ""},
    {"id": "good2", "text": GOOD.replace("fox", "cat")},
    {"id": "spaces", "text": "   \n  "},
]
CHAIN = """filters:
  - {filter: word_count, min: 20}
  - {filter: numbers, max: 0.15}
  - {filter: repeated_lines, min: 0.5}
"""


@pytest.fixture
def setup(tmp_path):
    chain = tmp_path / "chain.yaml"
    chain.write_text(CHAIN)
    write_jsonl(tmp_path / "in" / "a.jsonl", DOCS[:3])
    write_jsonl(tmp_path / "in" / "b.jsonl", DOCS[3:])
    return tmp_path, str(chain)


def test_stage_counts_reasons_and_writes_rejects(setup):
    tmp, chain = setup
    manifest = run_stage("filter", {"config": chain, "keep_scores": True}, str(tmp / "in" / "*.jsonl"), tmp / "out")
    assert manifest["counts"] == {"in": 6, "out": 2, "dropped": {"numbers": 1, "word_count": 3}}
    assert manifest["partitions"] == 2
    assert [f["reason"] for f in manifest["filters"]] == ["word_count", "numbers", "repeated_lines"]
    assert manifest["filters"][0]["min"] == 20.0
    assert manifest["settings"]["chain"][1] == {"filter": "numbers", "name": None, "min": None, "max": 0.15}
    out = read_output(tmp / "out")
    assert sorted(out["id"]) == ["good1", "good2"]
    assert {"score_word_count", "score_numbers", "score_repeated_lines"} <= set(out.columns)
    rejects = pd.concat(pd.read_parquet(p) for p in sorted((side(tmp / "out", "_rejects")).glob("*.parquet")))
    assert dict(zip(rejects["id"], rejects["_reason"])) == {
        "short": "word_count", "digits": "numbers", "empty": "word_count", "spaces": "word_count"}


def test_dask_equals_pandas(setup):
    tmp, chain = setup
    settings = FilterSettings(config=chain, keep_scores=True)
    frame = pd.DataFrame(DOCS).astype(STRING).assign(_reason=pd.Series([pd.NA] * 6, dtype=STRING))
    got = FilterStage().apply(dd.from_pandas(frame, npartitions=2), settings).compute()
    expected = FilterStage().transform(frame, settings)
    pd.testing.assert_frame_equal(got.reset_index(drop=True), expected.reset_index(drop=True))


def test_editing_the_chain_reruns_the_stage(setup):
    tmp, chain = setup
    first = run_stage("filter", {"config": chain}, str(tmp / "in" / "*.jsonl"), tmp / "out")
    again = run_stage("filter", {"config": chain}, str(tmp / "in" / "*.jsonl"), tmp / "out")
    assert again["fingerprint"] == first["fingerprint"]
    with open(chain, "w") as f:
        f.write(CHAIN.replace("min: 20", "min: 2"))
    edited = run_stage("filter", {"config": chain}, str(tmp / "in" / "*.jsonl"), tmp / "out")
    assert edited["fingerprint"] != first["fingerprint"]
    assert edited["counts"]["dropped"] == {"numbers": 1, "word_count": 2}


def test_settings_errors_name_the_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("filters:\n  - {filter: whitespace, max: 2}\n")
    with pytest.raises(SettingsError, match=r"bad.yaml: filter 1 \(whitespace\): max must be in 0..1"):
        FilterSettings(config=str(bad))
    with pytest.raises(SettingsError, match="chain"):
        from curate.stages.stage import settings_from_mapping

        settings_from_mapping(FilterSettings, {"config": str(bad), "chain": []}, "filter")


def test_cli_bad_chain_is_one_line_and_exit_2(tmp_path, setup):
    tmp, _ = setup
    bad = tmp_path / "bad.yaml"
    bad.write_text("filters:\n  - {filter: wordcount}\n")
    proc = curate("filter", "--config", bad, "--input", tmp / "in" / "a.jsonl", "--output", tmp / "o", check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0
    assert "filter 1: unknown filter 'wordcount'" in proc.stderr


def test_job_yaml_with_shipped_chain(tmp_path):
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    from tests.modules.filters.test_heuristic import GOOD as PROSE

    write_jsonl(tmp_path / "in.jsonl", [*DOCS, {"id": "prose", "text": PROSE}])
    job = tmp_path / "job.yaml"
    job.write_text(f"input: {tmp_path / 'in.jsonl'}\nstages:\n"
                   f"  - filter: {{config: {root / 'jobs/filters/heuristic_en.yaml'}}}\n")
    from curate.app.runner import load_job, run_job

    (outcome,) = run_job(load_job(str(job)), str(tmp_path / "out"))
    m = json.load(open(tmp_path / "out" / "01-filter" / "_manifest.json"))
    assert m["counts"]["in"] == 7 and outcome.manifest["counts"]["out"] == 1
    assert len(m["filters"]) == 28  # exactly NeMo Curator's chain


# --------------------------------------------------------------------------- the score sample


def test_score_sample_counts_and_histograms_without_keep_scores(setup):
    import numpy as np

    tmp, chain = setup
    manifest = run_stage("filter", {"config": chain}, str(tmp / "in" / "*.jsonl"), tmp / "out")
    assert not any(c.startswith("score_") for c in read_output(tmp / "out").columns)  # not kept, yet sampled
    oracle = run_stage("filter", {"config": chain, "keep_scores": True}, str(tmp / "in" / "*.jsonl"), tmp / "k")
    assert oracle["score_sample"] == manifest["score_sample"]
    sample = manifest["score_sample"]
    assert (sample["documents"], sample["sampled"]) == (6, 6)
    scores = pd.concat([read_output(tmp / "k"), *(pd.read_parquet(p) for p in (side(tmp / "k", "_rejects")).glob("*"))])
    for f in manifest["filters"]:
        v = scores[f["column"]].dropna().to_numpy(dtype=float)
        entry = sample["filters"][f["reason"]]
        lo_ok = v >= f["min"] if f["min"] is not None else np.ones(len(v), bool)
        hi_ok = v <= f["max"] if f["max"] is not None else np.ones(len(v), bool)
        assert (entry["scored"], entry["rejected"]) == (len(v), int((~(lo_ok & hi_ok)).sum()))
        h = entry["histogram"]
        assert sum(h["kept"]) + sum(h["rejected"]) == len(v) == h["sampled"]  # every score in a bin
        assert sum(h["rejected"]) == entry["rejected"]  # the whole partition is sampled here
        assert len(h["edges"]) == len(h["kept"]) + 1 and h["edges"] == sorted(h["edges"])
        for x in (f["min"], f["max"]):
            assert x is None or h["edges"][0] <= x <= h["edges"][-1]  # the thresholds are on the axis
    # word_count scores every document: 3 of 6 have fewer than 20 words; numbers only sees the rest
    assert sample["filters"]["word_count"]["scored"] == 6 and sample["filters"]["word_count"]["rejected"] == 3


def test_score_sample_is_the_bottom_k_by_id_hash_over_all_partitions(setup, monkeypatch):
    """Edge case: k smaller than a partition; the merged sample must be the global bottom-k (brute force)."""
    from curate.stages.filters import stage as filter_stage

    tmp, chain = setup
    monkeypatch.setattr(filter_stage, "SAMPLE_SIZE", 2)
    parts = [FilterStage().transform(pd.DataFrame(d).astype(STRING).assign(
        _reason=pd.Series([pd.NA] * len(d), dtype=STRING)), FilterSettings(config=chain, keep_scores=True))
        for d in (DOCS[:3], DOCS[3:])]
    samples = [filter_stage.partition_sample(p, FilterSettings(config=chain).chain) for p in parts]
    assert all(len(s["sample"]) == 2 for s in samples)
    merged = filter_stage.merge_samples(samples, FilterSettings(config=chain).chain)
    assert merged["sampled"] == 2 and merged["documents"] == 6
    everything = pd.concat(parts)
    h = pd.util.hash_pandas_object(everything["id"].astype(str), index=False).to_numpy()
    want = everything.iloc[h.argsort(kind="stable")[:2]]
    got = merged["filters"]["word_count"]["histogram"]
    words = want["score_word_count"].to_numpy()
    assert sum(got["kept"]) == int((words >= 20).sum()) and sum(got["rejected"]) == int((words < 20).sum())


def test_a_resumed_run_samples_only_the_partitions_it_writes(setup):
    """Edge case: a killed run wrote partition 0; the rerun must not score it again for the sample."""
    tmp, chain = setup
    full = run_stage("filter", {"config": chain}, str(tmp / "in" / "*.jsonl"), tmp / "out")
    assert (full["score_sample"]["partitions"], full["score_sample"]["of_partitions"]) == (2, 2)
    out = tmp / "out"
    for path in (out / "_manifest.json", out / "_SUCCESS", side(out, "_state", "part-00001.json"),
                 out / "part-00001.parquet", side(out, "_rejects", "part-00001.parquet")):
        path.unlink(missing_ok=True)  # as if killed after writing partition 0 only
    resumed = run_stage("filter", {"config": chain}, str(tmp / "in" / "*.jsonl"), out)
    assert resumed["counts"] == full["counts"]
    sample = resumed["score_sample"]
    assert (sample["partitions"], sample["of_partitions"], sample["documents"]) == (1, 2, 3)  # b.jsonl: 3 docs
