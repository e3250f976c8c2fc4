"""Hostile and malformed input (issue 11), read in-process: every record is a document or a named
reject, so in every stage output documents in = documents out + rejects."""

import gzip
import json
import logging

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curate.stages import dataset
from curate.stages.errors import DataError
from curate.stages.settings import IOSettings
from tests.conftest import read_output, run_stage, side, write_jsonl


def rejects_of(out):
    files = sorted((side(out, "_rejects")).glob("*.parquet"))
    return pd.concat([pd.read_parquet(f) for f in files], ignore_index=True) if files else pd.DataFrame()


def accounted(manifest, docs_in):
    """The manifest's counts add up, and to the number of documents we wrote."""
    c = manifest["counts"]
    assert c["in"] == docs_in == c["out"] + sum(c["dropped"].values()), c


def write_parquet(path, table, **kw):
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, **kw)
    return path


# --------------------------------------------------------------------------- text column types


@pytest.mark.parametrize("column, typename", [
    (pa.array([1, 2, 3]), "int64"),
    (pa.array([b"x", b"y", b"z"], pa.binary()), "binary"),
    (pa.array([["a"], ["b"], ["c"]]), "list<element: string>"),
])
def test_parquet_text_that_is_not_a_string(tmp_path, column, typename):
    good = write_parquet(tmp_path / "in" / "a.parquet", pa.table({"id": ["g1", "g2"], "text": ["one", "two"]}))
    bad = write_parquet(tmp_path / "in" / "b.parquet", pa.table({"id": ["b1", "b2", "b3"], "text": column}))
    with pytest.raises(DataError, match=rf"b\.parquet: bad_type: column 'text' is {typename}, not a string"):
        run_stage("normalize", {}, [good, bad], tmp_path / "raise")
    # the bad file first: the schema comes from it, its rows are still rejected
    for order, out in (([good, bad], tmp_path / "o1"), ([bad, good], tmp_path / "o2")):
        m = run_stage("normalize", {}, order, out, on_error="skip")
        accounted(m, 5)
        assert m["counts"]["dropped"] == {"bad_type": 3}
        assert read_output(out)["text"].tolist() == ["one", "two"]
        rej = rejects_of(out)
        assert sorted(rej["id"]) == ["b1", "b2", "b3"] and rej["_detail"].str.contains("b.parquet row").all()


def test_parquet_without_text_column(tmp_path):
    nocol = write_parquet(tmp_path / "in" / "a.parquet", pa.table({"id": ["a"], "body": ["x"]}))
    good = write_parquet(tmp_path / "in" / "b.parquet", pa.table({"id": ["b", "c"], "text": ["ok", None]}))
    with pytest.raises(DataError, match=r"a\.parquet: missing_text: no 'text' column"):
        run_stage("normalize", {}, [good, nocol], tmp_path / "raise")
    m = run_stage("normalize", {}, [good, nocol], tmp_path / "out", on_error="skip")
    accounted(m, 3)
    assert m["counts"]["dropped"] == {"missing_text": 1}
    assert rejects_of(tmp_path / "out")["id"].tolist() == ["a"]


def test_jsonl_text_that_is_not_a_string(tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "text": "fine"}, {"id": "b", "text": 5},
                                              {"id": "c", "text": ["x"]}, {"id": "d", "text": None}])
    with pytest.raises(DataError, match=r"in\.jsonl line 2: bad_type: 'text' is a JSON number"):
        run_stage("normalize", {}, src, tmp_path / "raise")
    m = run_stage("normalize", {}, src, tmp_path / "out", on_error="skip")
    accounted(m, 4)
    assert m["counts"]["dropped"] == {"bad_type": 2, "missing_text": 1}


# --------------------------------------------------------------------------- ids


ID_DOCS = [{"id": 1, "text": "int id"}, {"id": "1", "text": "string id"}, {"id": {"k": 1}, "text": "dict id"},
           {"id": 2.5, "text": "float id"}, {"id": True, "text": "bool id"}, {"text": "no id"}]


def test_non_string_ids_are_rejected(tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", ID_DOCS)
    with pytest.raises(DataError, match=r"in\.jsonl line 1: bad_id: 'id' is a JSON number, not a string "
                                        r"\(--convert-ids accepts integer ids\)"):
        run_stage("normalize", {}, src, tmp_path / "raise")
    m = run_stage("normalize", {}, src, tmp_path / "out", on_error="skip")
    accounted(m, 6)
    assert m["counts"]["dropped"] == {"bad_id": 4}
    assert read_output(tmp_path / "out")["id"].tolist() == ["1", "in.jsonl:" + str(_offset(src, 5))]
    details = rejects_of(tmp_path / "out")["_detail"].tolist()
    assert any("a JSON object" in d for d in details) and any("a JSON boolean" in d for d in details)


def _offset(path, line_index):
    return sum(len(line) for line in path.read_bytes().splitlines(keepends=True)[:line_index])


def test_convert_ids_turns_integers_into_their_decimal_string(tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", ID_DOCS)
    m = run_stage("normalize", {}, src, tmp_path / "out", on_error="skip", convert_ids=True)
    accounted(m, 6)
    assert m["counts"]["dropped"] == {"bad_id": 3}  # dict, float and boolean ids are never converted
    assert read_output(tmp_path / "out")["id"].tolist()[:2] == ["1", "1"]


def test_parquet_integer_id_column(tmp_path):
    src = write_parquet(tmp_path / "ids.parquet", pa.table({"id": [7, 8], "text": ["a", "b"]}))
    with pytest.raises(DataError, match=r"ids\.parquet: bad_id: column 'id' is int64, not a string"):
        run_stage("normalize", {}, src, tmp_path / "raise")
    m = run_stage("normalize", {}, src, tmp_path / "skip", on_error="skip")
    accounted(m, 2)
    assert m["counts"]["dropped"] == {"bad_id": 2}
    m = run_stage("normalize", {}, src, tmp_path / "conv", convert_ids=True)
    assert read_output(tmp_path / "conv")["id"].tolist() == ["7", "8"]


def test_generated_parquet_ids_are_unique_across_row_group_pieces(tmp_path):
    src = write_parquet(tmp_path / "f.parquet", pa.table({"text": [f"row {i} " + "x" * 300 for i in range(8)]}),
                        row_group_size=2)
    io = IOSettings(blocksize="500B")
    ddf = dataset.read_dataset([str(src)], io)
    assert ddf.npartitions == 4
    assert ddf.compute()["id"].tolist() == [f"f.parquet:{i}" for i in range(8)]  # the row number in the file


# --------------------------------------------------------------------------- corrupt files


def _corrupt(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # no footer: "Parquet magic bytes not found"
    return path


def test_corrupt_parquet_fails_naming_it_or_is_one_reject(tmp_path):
    good = write_parquet(tmp_path / "in" / "b.parquet", pa.table({"id": ["x", "y"], "text": ["one", "two"]}))
    bad = _corrupt(write_parquet(tmp_path / "in" / "a.parquet", pa.table({"id": ["z"], "text": ["three"]})))
    for order in ([good, bad], [bad, good]):
        with pytest.raises(DataError, match=r"a\.parquet: corrupt_file: cannot read Parquet: .*magic bytes"):
            run_stage("normalize", {}, order, tmp_path / "raise")
    m = run_stage("normalize", {}, [bad, good], tmp_path / "out", on_error="skip")
    accounted(m, 3)
    assert m["counts"]["dropped"] == {"corrupt_file": 1}
    rej = rejects_of(tmp_path / "out")
    assert rej["id"].tolist() == ["a.parquet"] and str(bad) in rej["_detail"][0]


# --------------------------------------------------------------------------- document size


def test_too_large_jsonl_line_is_never_held(tmp_path):
    lines = [{"text": f"small {i}"} for i in range(40)]
    lines[17] = {"text": "big " + "y" * 5000}
    src = write_jsonl(tmp_path / "in.jsonl", lines)
    gz = tmp_path / "in.jsonl.gz"
    gz.write_bytes(gzip.compress(src.read_bytes()))
    with pytest.raises(DataError, match=r"in\.jsonl line 18: too_large: a 4\.9 KiB line is larger than the "
                                        r"1 KiB per document \(--max-document-bytes 1KiB\)"):
        run_stage("normalize", {}, src, tmp_path / "raise", max_document_bytes="1KiB")
    # pieces of 256 bytes: the big line spans many; only the piece where it starts reports it
    for path, out in ((src, tmp_path / "o1"), (gz, tmp_path / "o2")):
        m = run_stage("normalize", {}, path, out, on_error="skip", max_document_bytes="1KiB", blocksize="256B")
        accounted(m, 40)
        assert m["counts"]["dropped"] == {"too_large": 1}
        assert read_output(out)["text"].tolist() == [d["text"] for i, d in enumerate(lines) if i != 17]
        assert rejects_of(out)["_detail"][0].endswith("line 18: a 4.9 KiB line is larger than the 1 KiB per "
                                                      "document (--max-document-bytes 1KiB)")


def test_too_large_parquet_document(tmp_path):
    src = write_parquet(tmp_path / "big.parquet", pa.table({"id": ["a", "b", "c"], "text": ["s", "z" * 5000, "t"]}),
                        row_group_size=1)
    with pytest.raises(DataError, match=r"big\.parquet row 1 \(row group 1\): too_large"):
        run_stage("normalize", {}, src, tmp_path / "raise", max_document_bytes="1KiB")
    m = run_stage("normalize", {}, src, tmp_path / "out", on_error="skip", max_document_bytes="1KiB")
    accounted(m, 3)
    assert read_output(tmp_path / "out")["id"].tolist() == ["a", "c"]


def test_document_budget_follows_the_setting():
    assert dataset.document_budget(IOSettings())[0] is None  # not on a worker: nothing to derive it from
    assert dataset.document_budget(IOSettings(max_document_bytes="2MiB"))[0] == 2 << 20
    assert dataset.format_size(1536) == "1.5 KiB" and dataset.format_size(256 << 20) == "256 MiB"


# --------------------------------------------------------------------------- exact dedup meets duplicate ids


def test_exact_dedup_reports_duplicate_ids(tmp_path, caplog):
    docs = [{"id": "x", "text": "same text"}, {"id": "u", "text": "unique"}]
    a = write_jsonl(tmp_path / "in" / "a.jsonl", docs)
    b = write_jsonl(tmp_path / "in" / "b.jsonl", docs[:1])  # the same document, read twice
    with caplog.at_level(logging.WARNING):
        m = run_stage("exact_dedup", {}, [a, b], tmp_path / "out")
    accounted(m, 3)
    assert m["dedup"]["duplicate_ids"] == {"count": 1, "examples": [["x", 2]]}
    assert any("1 id(s) occur more than once ('x' x2" in r.getMessage() for r in caplog.records)
    clean = run_stage("exact_dedup", {}, [a], tmp_path / "clean")
    assert clean["dedup"]["duplicate_ids"] == {"count": 0, "examples": []}


def test_schema_sample_skips_records_with_bad_ids(tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": {"a": 1}, "text": "x", "n": "s"}, {"id": "b", "text": "y", "n": 2}])
    meta = dataset.infer_meta(dataset.plan_pieces([(str(src), "in.jsonl")], 1 << 20), IOSettings())
    assert str(meta["n"].dtype) == "Int64" and json.dumps(list(meta.columns)) == '["id", "text", "n", "_reason", "_detail"]'
