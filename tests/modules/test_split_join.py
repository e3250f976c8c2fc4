"""split_documents / join_documents: segments with ids, and an exact round trip."""

import pandas as pd
import pytest

from curate.stages.errors import SettingsError
from curate.stages.split_join import JoinSettings, SplitSettings, join_frame, split_frame
from tests.conftest import read_output, run_stage, write_jsonl

DOCS = [
    {"id": "a", "text": "one\n\ntwo\n\nthree", "url": "u1"},
    {"id": "b", "text": "single", "url": "u2"},
    {"id": "c", "text": "x\n\n\n\ny\n\n", "url": "u3"},   # empty segments: kept for an exact round trip
    {"id": "d", "text": "", "url": "u4"},                  # an empty document is one empty segment
]


def frame(rows):
    return pd.DataFrame(rows).astype({"id": "string[pyarrow]", "text": "string[pyarrow]"})


def test_split_gives_unique_ids_and_segment_numbers():
    out = split_frame(frame(DOCS), SplitSettings())
    assert out["id"].tolist()[:4] == ["a#0", "a#1", "a#2", "b#0"]
    assert out["text"].tolist()[:4] == ["one", "two", "three", "single"]
    assert out["document_id"].tolist()[:4] == ["a", "a", "a", "b"]
    assert out["segment_id"].tolist()[:4] == [0, 1, 2, 0]
    # oracle: str.split
    assert out["text"].tolist() == [s for d in DOCS for s in d["text"].split("\n\n")]
    assert out["url"].tolist()[:3] == ["u1"] * 3
    assert out["id"].is_unique


def test_join_restores_the_documents_in_order_even_shuffled():
    seg = split_frame(frame(DOCS), SplitSettings())
    back = join_frame(seg.sample(frac=1, random_state=1).sort_values("document_id", key=lambda s: s.map(
        {"c": 0, "a": 1, "d": 2, "b": 3})), JoinSettings())
    assert back["id"].tolist() == ["c", "a", "d", "b"]  # first-appearance order of the documents
    got = dict(zip(back["id"], back["text"]))
    assert got == {d["id"]: d["text"] for d in DOCS}
    assert "segment_id" not in back.columns and "document_id" not in back.columns


def test_filter_paragraphs_and_reassemble(tmp_path):
    write_jsonl(tmp_path / "in" / "f0.jsonl", DOCS[:2])
    write_jsonl(tmp_path / "in" / "f1.jsonl", DOCS[2:])
    run_stage("split_documents", {"separator": "\\n\\n"}, str(tmp_path / "in" / "*.jsonl"), tmp_path / "seg")
    seg = read_output(tmp_path / "seg")
    assert len(seg) == 3 + 1 + 4 + 1
    # drop segment "two" as a filter would (a reject), then join
    kept = seg[seg["text"] != "two"]
    first = kept["document_id"].isin(["a", "b"])  # segments stay in their document's partition
    kept[first].to_parquet(tmp_path / "k0.parquet")
    kept[~first].to_parquet(tmp_path / "k1.parquet")
    m = run_stage("join_documents", {"separator": "\\n\\n"}, [tmp_path / "k0.parquet", tmp_path / "k1.parquet"],
                  tmp_path / "out")
    out = read_output(tmp_path / "out")
    assert dict(zip(out["id"], out["text"])) == {"a": "one\n\nthree", "b": "single", "c": "x\n\n\n\ny\n\n", "d": ""}
    assert m["counts"]["out"] == 4


def test_regroup_joins_segments_spread_over_partitions(tmp_path):
    seg = split_frame(frame(DOCS[:1]), SplitSettings())
    seg.iloc[[2]].to_parquet(tmp_path / "p0.parquet")  # "three" first, in another partition
    seg.iloc[[0, 1]].to_parquet(tmp_path / "p1.parquet")
    run_stage("join_documents", {"regroup": True}, [tmp_path / "p0.parquet", tmp_path / "p1.parquet"],
              tmp_path / "out")
    assert read_output(tmp_path / "out")["text"].tolist() == ["one\n\ntwo\n\nthree"]


def test_settings():
    with pytest.raises(SettingsError):
        SplitSettings(separator="")
    assert split_frame(frame(DOCS[:1]), SplitSettings(separator="two"))["text"].tolist() == ["one\n\n", "\n\nthree"]
