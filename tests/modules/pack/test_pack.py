"""pack: BOS-aligned best-fit-decreasing rows, long documents, the invariant, determinism, the verify gate.

Oracles: rows of 8 tokens worked out by hand; a brute-force search for the fewest rows; the files
read back with pyarrow alone and compared with the input pairs read by the spec reader of the
tokenize tests.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from curate.stages.errors import DataError, SettingsError
from curate.stages.pack import (
    PackPlan,
    PackSettings,
    best_fit_decreasing,
    check_rows,
    layout,
    pack_frame,
    segments,
    verify,
)
from tests.conftest import curate, run_stage, side
from tests.modules.tokenize.helpers import read_pair
from tests.modules.tokensets import make_token_set

BOS, PAD = 1, 0


def plan(seq=8, long_docs="split", stride=4, seed=0, has_bos=False, strip_eod=False, vocab=100, dtype="uint32"):
    return PackPlan(seq, long_docs, stride, seed, BOS, PAD, dtype, vocab, has_bos, strip_eod)


def rows_of(df):
    return sorted(tuple(int(x) for x in r) for r in df["input_ids"])


def read_rows(folder):
    """Every row of a pack output, read with pyarrow only, in file then row order."""
    files = sorted(Path(folder).glob("*.parquet"))
    return pd.concat([pq.read_table(f).to_pandas().assign(file=f.stem) for f in files], ignore_index=True)


# --------------------------------------------------------------------------- by hand, rows of 8


def test_rows_of_8_by_hand():
    # segment sizes with BOS: A 4, B 7, C 2, D 3, E 5. Best fit, longest first:
    # B -> row 0 (room 1); E -> row 1 (room 3); A -> row 2 (room 4); D -> row 1, the fullest that
    # fits (room 3 -> 0); C -> row 2 (room 4 -> 2)
    docs = [[10, 11, 12], [20, 21, 22, 23, 24, 25], [30], [40, 41], [50, 51, 52, 53]]
    out = pack_frame(pd.DataFrame({"tokens": docs}), plan())
    assert rows_of(out) == sorted([
        (1, 20, 21, 22, 23, 24, 25, 0),
        (1, 50, 51, 52, 53, 1, 40, 41),
        (1, 10, 11, 12, 1, 30, 0, 0),
    ])
    by_first = {int(r.input_ids[1]): r for r in out.itertuples()}
    r = by_first[50]
    assert r.valid_token_count == 8 and list(r.doc_starts) == [0, 5] and list(r.doc_index) == [4, 3]
    assert list(r.loss_mask) == [1, 1, 1, 1, 0, 1, 1, 0]  # never predict the next document's BOS
    r = by_first[10]
    assert r.valid_token_count == 6 and list(r.doc_starts) == [0, 4] and list(r.doc_index) == [0, 2]
    assert list(r.loss_mask) == [1, 1, 1, 0, 1, 0, 0, 0]
    r = by_first[20]
    assert r.valid_token_count == 7 and list(r.loss_mask) == [1, 1, 1, 1, 1, 1, 0, 0]
    assert sorted(out["pack_id"]) == [0, 1, 2]
    assert out["input_ids"].map(len).eq(8).all()


def test_token_set_bos_and_gpt2_style_eod():
    # the documents carry their BOS already (tokenize --add-bos): it is not added twice
    out = pack_frame(pd.DataFrame({"tokens": [[1, 5, 6], [1, 7]]}), plan(has_bos=True))
    assert rows_of(out) == [(1, 5, 6, 1, 7, 0, 0, 0)]
    # BOS = EOD (a tokenizer without BOS): the appended EOD goes, the next BOS separates
    out = pack_frame(pd.DataFrame({"tokens": [[5, 6, 1], [7, 1]]}), plan(strip_eod=True))
    assert rows_of(out) == [(1, 5, 6, 1, 7, 0, 0, 0)]


def test_best_fit_is_optimal_on_small_cases_against_brute_force():
    rng = np.random.default_rng(3)

    def fewest_rows(sizes, cap):
        """Every way to put the items into rows (each item into an open row or a new one)."""
        best = [len(sizes)]

        def place(i, loads):
            if len(loads) >= best[0]:
                return
            if i == len(sizes):
                best[0] = len(loads)
                return
            for k in range(len(loads)):
                if loads[k] + sizes[i] <= cap:
                    loads[k] += sizes[i]
                    place(i + 1, loads)
                    loads[k] -= sizes[i]
            place(i + 1, loads + [sizes[i]])

        place(0, [])
        return best[0]

    worse = 0
    for _ in range(40):
        sizes = rng.integers(1, 9, size=8).tolist()
        row, _ = best_fit_decreasing(np.array(sizes), 8, np.zeros(8, np.uint64))
        loads = np.bincount(row, weights=sizes)
        assert (loads <= 8).all() and len(set(row)) == row.max() + 1
        opt = fewest_rows(sizes, 8)
        assert row.max() + 1 <= 11 / 9 * opt + 4
        worse += row.max() + 1 > opt
    assert worse <= 4  # best-fit decreasing is usually optimal on such small cases


# --------------------------------------------------------------------------- long documents


def test_long_document_modes():
    content = np.array([3, 17, 13])  # width 7 with its BOS in a row of 8
    d, o, c, dropped, n_long = segments(content, 8, "split", 4)
    assert n_long == 2 and len(dropped) == 0
    assert list(zip(d.tolist(), o.tolist(), c.tolist())) == [
        (0, 0, 3), (1, 0, 7), (1, 7, 7), (1, 14, 3), (2, 0, 7), (2, 7, 6)]
    d, o, c, dropped, _ = segments(content, 8, "window", 3)
    assert list(zip(d.tolist(), o.tolist())) == [(0, 0), (1, 0), (1, 3), (1, 6), (1, 9), (1, 10),
                                                 (2, 0), (2, 3), (2, 6)]
    assert (c[1:] == 7).all()  # every window is a full row
    d, o, c, dropped, _ = segments(content, 8, "drop", 4)
    assert d.tolist() == [0] and dropped.tolist() == [1, 2]


@pytest.mark.parametrize("stride", [1, 2, 3, 7])
def test_windows_cover_every_token_and_end_at_the_end(stride):
    for n in range(8, 40):
        d, o, c, _, _ = segments(np.array([n]), 8, "window", stride)
        covered = np.zeros(n, bool)
        for off, ln in zip(o, c):
            covered[off:off + ln] = True
        assert covered.all() and o[-1] + c[-1] == n and (np.diff(o) > 0).all() and (np.diff(o) <= stride).all()


def test_split_rows_each_start_with_bos_and_drop_is_counted():
    long = list(range(10, 27))  # 17 tokens -> chunks of 7, 7, 3
    out = pack_frame(pd.DataFrame({"tokens": [long, [50, 51]]}), plan())
    assert (1, 10, 11, 12, 13, 14, 15, 16) in rows_of(out)
    assert (1, 17, 18, 19, 20, 21, 22, 23) in rows_of(out)
    assert (1, 24, 25, 26, 1, 50, 51, 0) in rows_of(out)
    out = pack_frame(pd.DataFrame({"tokens": [long, [50, 51]]}), plan(long_docs="window", stride=5))
    assert rows_of(out) == sorted([(1, *range(10, 17)), (1, *range(15, 22)), (1, *range(20, 27)), (1, 50, 51, 0, 0, 0,
                                                                                                     0, 0)])
    lay = layout(np.array([17, 2]), plan(long_docs="drop"))
    assert lay.dropped.tolist() == [0] and lay.rows == 1


# --------------------------------------------------------------------------- the invariant


def test_invariant_violated_on_purpose_fails_the_producer():
    with pytest.raises(DataError, match="2 BOS ids but 1 documents"):
        pack_frame(pd.DataFrame({"tokens": [[5, BOS, 6]]}), plan())  # a BOS inside a document's tokens


def test_check_rows_names_each_broken_row():
    ids = np.array([[1, 5, 6, 0], [1, 5, 1, 7], [1, 5, 6, 9], [2, 5, 0, 0]])
    valid = np.array([3, 4, 3, 2])
    starts, counts = np.array([0, 0, 2, 0]), np.array([1, 2, 0, 1])  # row 2 claims no document
    problems = dict(check_rows(ids, valid, starts, counts, BOS, PAD, 10))
    assert sorted(problems) == [2, 3]
    assert problems[2] == "no document (doc_starts is empty)"
    assert "does not start with the BOS" in problems[3]
    problems = dict(check_rows(ids[:1], np.array([2]), np.array([0]), np.array([1]), BOS, PAD, 10))
    assert "not the pad id" in problems[0]
    problems = dict(check_rows(ids[:1], np.array([3]), np.array([0]), np.array([1]), BOS, PAD, 6))
    assert problems[0] == "token id 6 >= the vocabulary size 6"


def test_settings():
    with pytest.raises(SettingsError, match="stride applies to --long-docs window"):
        PackSettings(seq_length=8, stride=2)
    with pytest.raises(SettingsError, match="stride must be in 1..7"):
        PackSettings(seq_length=8, long_docs="window", stride=8)
    with pytest.raises(SettingsError, match="seq_length"):
        PackSettings(seq_length=1)
    assert PackSettings(seq_length=8, long_docs="window").window_stride == 4


# --------------------------------------------------------------------------- the stage


def test_stage_round_trip_split_mode_every_token_once_in_order(tmp_path):
    rng = np.random.default_rng(0)
    pairs = [[list(rng.integers(2, 900, size=n)) + [999] for n in rng.integers(1, 60, size=25)] for _ in range(3)]
    ts = make_token_set(tmp_path / "tok", pairs, vocab_size=1000, eod_id=999, bos_id=BOS, append_eod=True)
    m = run_stage("pack", {"seq_length": 16}, ts, tmp_path / "packed")
    assert m["counts"] == {"in": 75, "out": 75, "dropped": {}}
    assert m["bos_id"] == BOS and m["pad_id"] == 999 and m["bos_added"] and not m["eod_stripped"]
    assert m["totals"]["long_documents"] > 0
    rows = read_rows(tmp_path / "packed")
    for k in range(3):
        _, docs = read_pair(tmp_path / "tok" / f"part_{k:05d}")
        got: dict[int, list] = {}
        pieces = []
        for r in rows[rows.file == f"part_{k:05d}"].itertuples():
            ids = list(r.input_ids)
            ends = list(r.doc_starts[1:]) + [r.valid_token_count]
            for s, e, doc, off in zip(r.doc_starts, ends, r.doc_index, r.doc_offset):
                assert ids[s] == BOS
                pieces.append((doc, off, ids[s + 1:e]))
        for doc, off, piece in sorted(pieces, key=lambda p: (p[0], p[1])):
            assert len(got.get(doc, [])) == off  # pieces tile the document: no gap, no overlap
            got.setdefault(doc, []).extend(piece)
        assert [got[i] for i in range(len(docs))] == docs
    fill = m["totals"]["valid_tokens"] / m["totals"]["tokens"]
    assert m["totals"]["fill_ratio"] == round(fill, 6) and fill > 0.9
    assert m["totals"]["valid_tokens"] == m["totals"]["input_tokens"] + m["totals"]["segments"]


def test_stage_drop_mode_rejects_and_window_mode(tmp_path):
    pairs = [[[5] * 3, [6] * 20, [7] * 2], [[8] * 9]]
    ts = make_token_set(tmp_path / "tok", pairs, vocab_size=100, eod_id=99)
    m = run_stage("pack", {"seq_length": 8, "long_docs": "drop"}, ts, tmp_path / "drop")
    assert m["counts"] == {"in": 4, "out": 2, "dropped": {"too_long": 2}}
    rejects = pd.read_parquet(side(tmp_path / "drop", "_rejects") / "part_00000.parquet")
    assert rejects[["document", "tokens", "_reason"]].values.tolist() == [[1, 20, "too_long"]]
    m = run_stage("pack", {"seq_length": 8, "long_docs": "window", "stride": 6}, ts, tmp_path / "win")
    assert m["counts"]["dropped"] == {} and m["totals"]["segments"] == 1 + 4 + 1 + 2  # 20 tokens: windows at 0, 6, 12, 13
    assert verify(str(tmp_path / "win")).ok


def test_token_set_with_bos_is_not_given_a_second_one(tmp_path):
    ts = make_token_set(tmp_path / "tok", [[[BOS, 5, 6, 99], [BOS, 7, 99]]], vocab_size=100, eod_id=99,
                        bos_id=BOS, add_bos=True, append_eod=True)
    m = run_stage("pack", {"seq_length": 8}, ts, tmp_path / "p")
    assert not m["bos_added"] and m["pad_id"] == 99
    assert read_rows(tmp_path / "p").input_ids.map(list).tolist() == [[BOS, 5, 6, 99, BOS, 7, 99, 99]]
    bad = make_token_set(tmp_path / "bad", [[[BOS, 5], [6, 7]]], vocab_size=100, eod_id=99, bos_id=BOS, add_bos=True)
    with pytest.raises(DataError, match="document 1 does not start with the BOS id 1"):
        run_stage("pack", {"seq_length": 8}, bad, tmp_path / "q")


def test_input_prefix_chooses_a_token_set(tmp_path):
    make_token_set(tmp_path / "tok", [[[5, 6]]], vocab_size=100, eod_id=99, prefix="web")
    make_token_set(tmp_path / "tok", [[[7, 8, 9]]], vocab_size=100, eod_id=99, prefix="code")
    with pytest.raises(SettingsError, match="several token sets .*--input-prefix"):
        run_stage("pack", {"seq_length": 8}, tmp_path / "tok", tmp_path / "a")
    run_stage("pack", {"seq_length": 8, "input_prefix": "code"}, tmp_path / "tok", tmp_path / "b")
    assert read_rows(tmp_path / "b").input_ids.map(list).tolist() == [[99, 7, 8, 9, 0, 0, 0, 0]]
    with pytest.raises(SettingsError, match="no token set with prefix 'part'"):
        run_stage("pack", {"seq_length": 8, "input_prefix": "part"}, tmp_path / "tok", tmp_path / "c")


def test_uint16_refused_for_a_large_vocabulary(tmp_path):
    ts = make_token_set(tmp_path / "tok", [[[70000, 5]]], vocab_size=70000 + 1, eod_id=0)
    with pytest.raises(SettingsError, match="uint16 cannot hold"):
        run_stage("pack", {"seq_length": 8, "dtype": "uint16"}, ts, tmp_path / "p")
    m = run_stage("pack", {"seq_length": 8}, ts, tmp_path / "p32")
    assert read_rows(tmp_path / "p32").input_ids[0].tolist()[:3] == [m["bos_id"], 70000, 5]


def test_deterministic_across_runs_and_cluster_sizes(tmp_path):
    import dask

    rng = np.random.default_rng(1)
    pairs = [[list(rng.integers(2, 900, size=n)) for n in rng.integers(1, 40, size=60)] for _ in range(4)]
    ts = make_token_set(tmp_path / "tok", pairs, vocab_size=1000, eod_id=999)
    sums = []
    for k, (scheduler, workers) in enumerate([("synchronous", 1), ("threads", 3), ("processes", 2)]):
        with dask.config.set(scheduler=scheduler, num_workers=workers):
            m = run_stage("pack", {"seq_length": 32, "seed": 7}, ts, tmp_path / f"p{k}")
        sums.append([(r["path"], r["xxh3_128"]) for r in m["outputs"]])
    assert sums[0] == sums[1] == sums[2]
    m = run_stage("pack", {"seq_length": 32, "seed": 8}, ts, tmp_path / "other-seed")
    assert [r["xxh3_128"] for r in m["outputs"]] != [s for _, s in sums[0]]  # the seed orders rows


def test_resume_repacks_only_missing_files(tmp_path):
    pairs = [[[5, 6, 7]] * 4, [[8, 9]] * 5]
    ts = make_token_set(tmp_path / "tok", pairs, vocab_size=100, eod_id=99)
    out = tmp_path / "p"
    run_stage("pack", {"seq_length": 8}, ts, out)
    kept = (out / "part_00000.parquet").stat().st_mtime_ns
    (out / "_SUCCESS").unlink()  # a killed run: one file written, the other not
    (out / "part_00001.parquet").unlink()
    m = run_stage("pack", {"seq_length": 8}, ts, out)
    assert m["resumed_partitions"] == 1 and (out / "part_00000.parquet").stat().st_mtime_ns == kept
    assert verify(str(out)).ok


# --------------------------------------------------------------------------- verify


def test_verify_catches_broken_rows_one_line_each(tmp_path):
    import pyarrow as pa

    from curate.stages.pack import row_schema

    ts = make_token_set(tmp_path / "tok", [[[5, 6, 7], [8, 9]] * 3], vocab_size=100, eod_id=99, bos_id=BOS)
    out = tmp_path / "p"
    run_stage("pack", {"seq_length": 8}, ts, out)
    assert verify(str(out)).ok
    path = out / "part_00000.parquet"
    table = pq.read_table(path)
    df = table.to_pandas()
    df.at[0, "valid_token_count"] -= 1  # inconsistent with the documents
    ids = df.at[1, "input_ids"].copy()
    ids[2] = BOS  # one BOS more than documents
    df.at[1, "input_ids"] = ids
    pq.write_table(pa.Table.from_pandas(df, schema=row_schema("uint32"), preserve_index=False), path)
    manifest = json.loads((out / "_manifest.json").read_text())
    for r in manifest["outputs"]:
        if r["path"] == path.name:
            r["bytes"] = path.stat().st_size
    (out / "_manifest.json").write_text(json.dumps(manifest))
    report = verify(str(out))
    assert len(report.problems) == 2
    assert "row 0" in report.problems[0] and "row 1" in report.problems[1]
    assert "BOS ids but" in report.problems[1]
    assert any("valid_token_count" in p or "pad id" in p for p in report.problems[:1])
    # uint16 rows with a vocabulary above 65,535
    report = verify(str(out), vocab_size=70000)
    assert report.problems  # still broken rows; the dtype check is below
    proc = curate("verify", str(out), check=False)
    assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 3


def test_verify_dtype_and_missing_files(tmp_path):
    ts = make_token_set(tmp_path / "tok", [[[5, 6, 7]]], vocab_size=100, eod_id=99)
    out = tmp_path / "p16"
    run_stage("pack", {"seq_length": 8, "dtype": "uint16"}, ts, out)
    assert verify(str(out)).ok
    problems = verify(str(out), vocab_size=70000).problems
    assert problems == [f"{out / 'part_00000.parquet'}: dtype: uint16 ids cannot hold a 70,000-id vocabulary "
                        "(more than 65,535)"]
    (out / "part_00000.parquet").unlink()
    problems = verify(str(out)).problems
    assert problems == [f"{out / 'part_00000.parquet'}: missing: listed in _manifest.json"]


def test_tokenize_pack_verify_decodes_row_0(tmp_path):
    from tests.conftest import write_jsonl

    write_jsonl(tmp_path / "docs.jsonl", [{"id": str(i), "text": f"Document number {i}. " * (i + 1)}
                                          for i in range(30)])
    run_stage("tokenize", {"tokenizer": "tiktoken:cl100k_base"}, tmp_path / "docs.jsonl", tmp_path / "tok")
    m = run_stage("pack", {"seq_length": 64, "long_docs": "window", "stride": 32}, tmp_path / "tok",
                  tmp_path / "packed")
    assert m["bos_id"] == 100257 and m["eod_stripped"] and m["pad_id"] == 0  # GPT-2 style separator
    proc = curate("verify", tmp_path / "packed")
    assert "OK" in proc.stdout and "row 0 of" in proc.stdout
    assert "decoded: '<|endoftext|>" in proc.stdout and "Document number" in proc.stdout
