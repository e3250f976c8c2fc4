"""A job's stages fit together (issue 32, point 3): each stage declares the columns it needs, adds and
removes, and a stage needing a column that neither the input nor an earlier stage provides is refused
before any work, in one line naming the stage and the column."""

from __future__ import annotations

import pytest

from curate.app.cli import main
from curate.stages import registry
from curate.stages.columns import check_chain
from tests.conftest import write_jsonl


@pytest.fixture
def data(tmp_path):
    write_jsonl(tmp_path / "in" / "a.jsonl", [{"id": f"a{i}", "text": f"words {i} " * 30, "lang": "en"} for i in range(3)])
    write_jsonl(tmp_path / "in" / "b.jsonl", [{"id": f"b{i}", "text": f"more {i} " * 30, "lang": "de"} for i in range(3)])
    (tmp_path / "chain.yaml").write_text("filters:\n  - {filter: word_count, min: 5}\n")
    return tmp_path


def job(data, *stages) -> str:
    path = data / "job.yaml"
    path.write_text(f"name: j\ninput: '{data / 'in' / '*.jsonl'}'\nstages:\n" + "".join(f"  - {s}\n" for s in stages))
    return str(path)


@pytest.mark.parametrize("stages, stage, column", [
    (["clean: {}", "select: {where: 'score_word_count >= 5'}"], "stage 2 (select)", "score_word_count"),
    (["rehydrate: {}"], "stage 1 (rehydrate)", "dup_cluster_size"),
    (["bucket: {scores: [quality]}"], "stage 1 (bucket)", "quality"),
    (["clean: {}", "blend: {by: bucket, by_factors: '1:2'}"], "stage 2 (blend)", "bucket"),
    (["split_documents: {}", "join_documents: {}", "join_documents: {}"], "stage 3 (join_documents)", "segment_id"),
])
def test_a_stage_needing_a_column_nothing_provides_is_refused_before_any_work(data, capsys, stages, stage, column):
    for dry in ([], ["--dry-run"]):
        assert main(["run", job(data, *stages), "--output", str(data / "out"), *dry]) == 2
        err = capsys.readouterr().err.strip()
        words = (f"{stage}: where: unknown column {column!r}: neither the input nor an earlier stage provides it"
                 if "(select)" in stage else
                 f"{stage}: needs column {column!r}, which neither the input nor an earlier stage provides")
        assert words in err
        assert "\n" not in err and not (data / "out").exists()


@pytest.mark.parametrize("stages", [
    ["tag: {config: CHAIN}", "select: {where: 'score_word_count >= 5 and lang == \"en\"'}"],
    ["exact_dedup: {}", "rehydrate: {}"],
    ["split_documents: {}", "join_documents: {}"],
    ["add_id: {keep_original_as: old_id}", "select: {where: 'old_id is not null'}"],
])
def test_chains_that_fit_pass(data, capsys, stages):
    stages = [s.replace("CHAIN", str(data / "chain.yaml")) for s in stages]
    assert main(["run", job(data, *stages), "--output", str(data / "out"), "--dry-run"]) == 0, capsys.readouterr().err


def test_the_check_by_hand():
    sel = registry.get("select")
    extract = registry.get("extract_warc")
    settings = sel.Settings(where="language == 'en' and title is null")
    with pytest.raises(Exception, match="stage 2: where: unknown column 'title'"):
        check_chain([("stage 1", extract, None), ("stage 2", sel, settings)], None)
    check_chain([("stage 1", registry.get("download_urls"), None), ("stage 2", sel, settings)], set())  # unknown
    check_chain([("stage 1", sel, settings)], None)  # the input's columns not known yet: nothing to say


def test_curate_stages_columns(capsys):
    assert main(["stages", "--columns"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["stage", "needs", "adds", "removes"]
    assert any(line.split()[:3] == ["rehydrate", "dup_cluster_size", "-"] for line in out.splitlines())
    assert "extract_warc" in out and "all of: id, text, url" in out
