"""The filter stage end to end: two partitions, manifest counts, rejects, scores, resume, CLI errors."""

import json

import dask.dataframe as dd
import pandas as pd
import pytest

from modules.dataset import STRING
from modules.errors import SettingsError
from modules.filters.stage import FilterSettings, FilterStage
from tests.conftest import curate, read_output, run_stage, write_jsonl

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
    rejects = pd.concat(pd.read_parquet(p) for p in sorted((tmp / "out" / "_rejects").glob("*.parquet")))
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
        from modules.stage import settings_from_mapping

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
    from app.runner import load_job, run_job

    (outcome,) = run_job(load_job(str(job)), str(tmp_path / "out"))
    m = json.load(open(tmp_path / "out" / "01-filter" / "manifest.json"))
    assert m["counts"]["in"] == 7 and outcome.manifest["counts"]["out"] == 1
    assert len(m["filters"]) == 28  # exactly NeMo Curator's chain
