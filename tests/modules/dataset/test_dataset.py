"""The dataset contract: readers, rejects, writers, sentinel, manifest."""

import gzip
import json
import os

import pandas as pd
import pytest
import zstandard

from curate.stages import dataset
from curate.stages.errors import DataError, SettingsError
from curate.stages.stage import IOSettings
from tests.conftest import read_output, run_stage, side, write_jsonl

DOCS = [{"id": f"d{i}", "text": f"document number {i}", "url": f"https://example.org/{i}"} for i in range(10)]


def read_all(inputs, **io):
    ddf = dataset.read_dataset(inputs, IOSettings(**io))
    return ddf, ddf.compute().reset_index(drop=True)


def test_jsonl_round_trip_through_parquet_and_jsonl(tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", DOCS)
    for fmt in ("parquet", "jsonl"):
        out = tmp_path / f"out-{fmt}"
        manifest = run_stage("normalize", {}, src, out, format=fmt)
        assert manifest["counts"] == {"in": 10, "out": 10, "dropped": {}}
        assert (out / "_SUCCESS").exists() and (out / f"part-00000.{fmt}").exists()
        back = read_output(out)
        assert back["id"].tolist() == [d["id"] for d in DOCS]
        assert back["text"].tolist() == [d["text"] for d in DOCS]
        assert back["url"].tolist() == [d["url"] for d in DOCS]
        assert "_reason" not in back.columns and "_detail" not in back.columns


@pytest.mark.parametrize("suffix", [".jsonl.gz", ".jsonl.zst"])
def test_compressed_jsonl(tmp_path, suffix):
    raw = "".join(json.dumps(d) + "\n" for d in DOCS).encode()
    path = tmp_path / f"in{suffix}"
    path.write_bytes(gzip.compress(raw) if suffix.endswith("gz") else zstandard.ZstdCompressor().compress(raw))
    _, df = read_all([str(path)])
    assert df["id"].tolist() == [d["id"] for d in DOCS]


def test_blocksize_splits_a_file_into_partitions_without_losing_lines(tmp_path):
    docs = [{"text": "x" * (i % 17) + f" line {i}"} for i in range(500)]
    src = write_jsonl(tmp_path / "big.jsonl", docs)
    ddf, df = read_all([str(src)], blocksize="2KiB")
    assert ddf.npartitions > 5
    assert df["text"].tolist() == [d["text"] for d in docs]
    # generated ids are <file>:<byte offset>: unique and independent of the block size
    assert df["id"].is_unique
    _, df2 = read_all([str(src)], blocksize="1MiB")
    assert df["id"].tolist() == df2["id"].tolist()
    assert df["id"][0] == "big.jsonl:0"


def test_directory_glob_and_parquet_inputs(tmp_path):
    write_jsonl(tmp_path / "raw" / "a.jsonl", DOCS[:4])
    write_jsonl(tmp_path / "raw" / "b.jsonl", DOCS[4:])
    ddf, df = read_all([str(tmp_path / "raw" / "*.jsonl")])
    assert ddf.npartitions == 2 and len(df) == 10
    pd.DataFrame(DOCS).to_parquet(tmp_path / "docs.parquet")
    _, df = read_all([str(tmp_path / "docs.parquet")])
    assert df["id"].tolist() == [d["id"] for d in DOCS]


def test_parquet_columns_keep_their_types(tmp_path):
    # a score column written by one stage is a number for the next (it used to come back as strings)
    pd.DataFrame({"id": ["a", "b"], "text": ["x", "y"], "score": [0.5, float("nan")],
                  "n": pd.array([1, None], dtype="Int64"), "flag": [True, False], "lang": ["en", None],
                  "big": [1, 2]}).to_parquet(tmp_path / "t.parquet")
    pd.DataFrame({"id": ["c"], "text": ["z"], "score": [1.0], "n": pd.array([None], dtype="Int64"),
                  "flag": [None], "lang": ["de"], "big": [3]}).to_parquet(tmp_path / "u.parquet")
    ddf, df = read_all([str(tmp_path / "t.parquet"), str(tmp_path / "u.parquet")])
    expected = {"score": "float64", "n": "Int64", "flag": "boolean", "lang": "string", "big": "Int64"}
    assert {c: str(ddf._meta[c].dtype) for c in expected} == expected
    assert {c: str(df[c].dtype) for c in expected} == expected
    assert df["score"].tolist()[0] == 0.5 and pd.isna(df["score"][1]) and df["big"].tolist() == [1, 2, 3]
    assert df["flag"].isna().tolist() == [False, False, True]


def test_text_field_is_mapped_to_text(tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", [{"content": "hello", "doc_id": "d7"}])
    _, df = read_all([str(src)], text_field="content", id_field="doc_id")
    assert df.loc[0, "text"] == "hello" and df.loc[0, "id"] == "d7"
    # integer ids only with the opt-in (issue 11: 7 and "7" would otherwise be one id unnoticed)
    src = write_jsonl(tmp_path / "in2.jsonl", [{"content": "hello", "doc_id": 7}])
    _, df = read_all([str(src)], text_field="content", id_field="doc_id", convert_ids=True)
    assert df.loc[0, "id"] == "7"


def test_bad_line_fails_with_file_and_line(tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", DOCS[:3], raw_lines=["{not json"])
    with pytest.raises(DataError, match=r"in\.jsonl line 4: invalid_json"):
        read_all([str(src)])
    src = write_jsonl(tmp_path / "in2.jsonl", DOCS[:2], raw_lines=['{"id": "x", "body": "no text"}'])
    with pytest.raises(DataError, match=r"in2\.jsonl line 3: missing_text"):
        read_all([str(src)])


def test_on_error_skip_writes_rejects_with_reasons(tmp_path):
    src = write_jsonl(
        tmp_path / "in.jsonl", DOCS[:3],
        raw_lines=["{not json", '{"id": "x"}', b'{"text": "bad \xff utf8"}', "[1, 2]", '{"text": null}'],
    )
    out = tmp_path / "out"
    manifest = run_stage("normalize", {}, src, out, on_error="skip")
    assert manifest["counts"] == {
        "in": 8, "out": 3,
        "dropped": {"invalid_json": 1, "invalid_utf8": 1, "missing_text": 2, "not_an_object": 1},
    }
    rejects = pd.read_parquet(side(out, "_rejects") / "part-00000.parquet")
    assert sorted(rejects["_reason"]) == ["invalid_json", "invalid_utf8", "missing_text", "missing_text",
                                          "not_an_object"]
    assert rejects["_detail"].str.contains(r"in\.jsonl line \d").all()
    assert "{not json" in rejects["text"].tolist()


def test_directory_without_success_is_refused(tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", DOCS)
    out = tmp_path / "out"
    run_stage("normalize", {}, src, out)
    os.remove(out / "_SUCCESS")
    with pytest.raises(SettingsError, match="no _SUCCESS"):
        dataset.read_dataset([str(out)], IOSettings())
    _, df = read_all([str(out)], allow_incomplete=True)
    assert len(df) == 10


def test_missing_input_and_unknown_format(tmp_path):
    with pytest.raises(SettingsError, match="no such file"):
        dataset.expand_inputs([str(tmp_path / "nope.jsonl")])
    (tmp_path / "x.csv").write_text("a,b\n")
    with pytest.raises(SettingsError, match="unknown format"):
        dataset.expand_inputs([str(tmp_path / "x.csv")])


def test_manifest_contents(tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", DOCS + [{"id": "blank", "text": "   \n\t "}])
    out = tmp_path / "out"
    run_stage("normalize", {}, src, out)
    m = json.loads((out / "_manifest.json").read_text())
    assert m["stage"] == "normalize" and m["settings"] == {"drop_empty": True}
    assert m["counts"] == {"in": 11, "out": 10, "dropped": {"empty": 1}}
    assert m["schema"]["id"] == "string" and "text" in m["schema"]
    assert m["timings"]["seconds"] >= 0 and len(m["fingerprint"]) == 16
    # the writer leaves no temporary files behind
    assert not [p for p in os.listdir(out) if p.startswith(".")]


def test_mark_dropped_keeps_the_first_reason():
    df = pd.DataFrame({"id": ["a", "b", "c"], "text": ["x", "y", "z"]})
    once = dataset.mark_dropped(df, [True, False, False], "first")
    twice = dataset.mark_dropped(once, [True, True, False], "second")
    assert twice["_reason"].tolist()[:2] == ["first", "second"] and pd.isna(twice["_reason"][2])
    assert "_reason" not in df.columns  # input not mutated


def test_input_identity_sees_raw_files_change(tmp_path):
    raw = tmp_path / "a.warc.gz"
    raw.write_bytes(b"one")
    before = dataset.input_identity([str(raw)])
    raw.write_bytes(b"longer")
    assert dataset.input_identity([str(raw)]) != before
    assert dataset.input_identity([str(tmp_path / "*.warc.gz")])[0]["size"] == 6


def test_files_with_different_keys_share_one_schema(tmp_path):
    write_jsonl(tmp_path / "in" / "a.jsonl", [])  # an empty first file does not decide the schema
    write_jsonl(tmp_path / "in" / "b.jsonl", [{"id": "b", "text": "x", "stars": 3, "url": "u"}])
    write_jsonl(tmp_path / "in" / "c.jsonl", [{"id": "c", "text": "y", "extra": 1}])
    out = tmp_path / "out"
    manifest = run_stage("normalize", {}, str(tmp_path / "in" / "*.jsonl"), out)
    assert manifest["counts"]["out"] == 2
    back = read_output(out)
    # a key only a later file holds is a column too (issue 29: it was dropped silently)
    assert list(back.columns) == ["id", "text", "stars", "url", "extra"]
    assert back["stars"].tolist()[0] == 3 and pd.isna(back["stars"][1])
    assert pd.isna(back["extra"][0]) and back["extra"].tolist()[1] == 1


def test_a_column_whose_type_changes_names_the_file(tmp_path):
    write_jsonl(tmp_path / "in" / "a.jsonl", [{"text": "x", "stars": 3}])
    write_jsonl(tmp_path / "in" / "b.jsonl", [{"text": "y", "stars": 1.5}])
    with pytest.raises(DataError, match=r"b\.jsonl"):
        read_all([str(tmp_path / "in" / "*.jsonl")])


def test_lone_surrogate_escapes_become_replacement_characters(tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", [], raw_lines=['{"id": "s", "text": "broken \\ud83d end", "t": "\\udc00"}',
                                                            '{"id": "ok", "text": "pair \\ud83d\\ude00"}'])
    out = tmp_path / "out"
    run_stage("normalize", {}, src, out)
    back = read_output(out)
    assert back["text"].tolist() == ["broken \ufffd end", "pair \U0001F600"]


def test_line_numbers_are_exact_in_later_blocks(tmp_path):
    lines = [json.dumps({"text": f"line {i} " + "x" * (i % 50)}) for i in range(400)]
    lines[300] = "{broken"
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=r"in\.jsonl line 301: invalid_json"):
        read_all([str(path)], blocksize="1KiB")
    lines[350] = "[]"
    path.write_text("\n".join(lines) + "\n")
    _, df = read_all([str(path)], blocksize="1KiB", on_error="skip")
    details = sorted(df["_detail"].dropna())
    assert details[0].startswith(f"{path} line 301:") and details[1].startswith(f"{path} line 351:")


def test_jsonl_writer_keeps_float_precision(tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", [{"text": "a", "score": 1.5e-12}, {"text": "b", "score": 0.1234567890123}])
    out = tmp_path / "out"
    run_stage("normalize", {}, src, out, format="jsonl")
    assert read_output(out)["score"].tolist() == [1.5e-12, 0.1234567890123]


def test_generated_ids_do_not_depend_on_other_inputs(tmp_path):
    a = write_jsonl(tmp_path / "a" / "x.jsonl", [{"text": "one"}])
    b = write_jsonl(tmp_path / "b" / "y.jsonl", [{"text": "two"}])
    _, alone = read_all([str(a)])
    _, both = read_all([str(a), str(b)])
    assert alone["id"][0] == both["id"][0] == "x.jsonl:0"
    _, globbed = read_all([str(tmp_path / "*" / "*.jsonl")])
    assert globbed["id"].tolist() == ["a/x.jsonl:0", "b/y.jsonl:0"]
