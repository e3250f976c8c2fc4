"""The Python API (``curate.Pipeline``, ``curate.Step``), ``curate stages`` and ``curate run --dry-run``.

The oracle for a pipeline is ``curate run`` itself: the same steps as a job YAML, run by the CLI in
its own process, must give byte-identical parts and the same fingerprints. Edge cases: an unknown
stage or keyword (raised before anything is written), a pipeline given an output another job owns,
a rerun (everything skipped), a stage and a filter of one's own from Python and from job YAML
(``module:Class``, imported by real worker processes), a dry run before, after and between runs.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pandas as pd
import pytest

import curate
from tests.conftest import ROOT, curate as curate_cli, curate_here, read_output, write_jsonl

EXAMPLES = ROOT / "docs" / "examples"
TEXTS = ["The quick brown fox jumps over the lazy dog near the river bank today.",
         "THIS PAGE SHOUTS AT EVERY READER WHO COMES BY",
         "   ",
         "A short note.\n--\nsigned by someone",
         "The quick brown fox jumps over the lazy dog near the river bank today."]


@pytest.fixture
def data(tmp_path):
    for part in range(2):
        write_jsonl(tmp_path / "in" / f"p{part}.jsonl",
                    [{"id": f"{part}-{i}", "text": t + ("" if i else f" {part}")} for i, t in enumerate(TEXTS)])
    (tmp_path / "chain.yaml").write_text("filters:\n  - {filter: word_count, min: 3}\n"
                                         "  - {filter: 'my_plugins:ShoutingFilter', max: 0.5}\n")
    return tmp_path


@pytest.fixture
def plugins(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(EXAMPLES), os.environ.get("PYTHONPATH", "")]))
    import my_plugins

    return my_plugins


def steps(data, plugins):
    return [curate.Step("clean"), curate.Step(plugins.StripSignature),
            curate.Step("filter", config=str(data / "chain.yaml")), curate.Step("exact_dedup"),
            curate.Step("tokenize", tokenizer="tiktoken:cl100k_base")]


def test_pipeline_equals_curate_run_and_resumes(data, plugins):
    pipeline = curate.Pipeline(steps(data, plugins), name="eq")
    result = pipeline.run(str(data / "in" / "*.jsonl"), data / "api", cluster="threads")
    (data / "job.yaml").write_text(
        f"name: eq\ninput: {data / 'in' / '*.jsonl'}\nstages:\n  - clean: {{}}\n"
        f"  - my_plugins:StripSignature: {{}}\n  - filter: {{config: {data / 'chain.yaml'}}}\n"
        "  - exact_dedup: {}\n  - tokenize: {tokenizer: 'tiktoken:cl100k_base'}\n")
    # the CLI in its own process, on a real local cluster: the workers import my_plugins themselves
    curate_cli("run", data / "job.yaml", "--output", data / "cli", "--workers", "1",
               env={"PYTHONPATH": os.pathsep.join([str(EXAMPLES), str(ROOT)])})
    folders = ["01-clean", "02-strip_signature", "03-filter", "04-exact_dedup", "05-tokenize"]
    assert [os.path.basename(o.output) for o in result.stages] == folders
    for folder in folders:
        api = json.loads((data / "api" / folder / "_manifest.json").read_text())
        cli = json.loads((data / "cli" / folder / "_manifest.json").read_text())
        assert api["fingerprint"] == cli["fingerprint"] and api["counts"] == cli["counts"], folder
        for f in sorted((data / "api" / folder).glob("part*")):
            assert f.read_bytes() == (data / "cli" / folder / f.name).read_bytes(), f
    counts = result.stages[2].manifest["counts"]
    assert counts["dropped"] == {"shouting": 2}
    kept = read_output(data / "api" / "03-filter")
    assert "signed by someone" not in " ".join(kept["text"]) and len(kept) == 6
    assert (data / "api" / "_reports" / "report.html").exists()
    assert "strip_signature" in result.summary()
    again = pipeline.run(str(data / "in" / "*.jsonl"), data / "api", cluster="threads")
    assert all(o.skipped for o in again.stages)


def test_unknown_stage_or_keyword_fails_before_any_work(tmp_path):
    with pytest.raises(curate.SettingsError, match=r"unknown stage 'clen' \(known: normalize, .*clean"):
        curate.Step("clen")
    with pytest.raises(curate.SettingsError, match=r"stage clean: unknown setting 'colour' \(known: .*fix_text"):
        curate.Step("clean", colour="red")
    with pytest.raises(curate.SettingsError, match=r"stage 'no_such_module:Thing': cannot import"):
        curate.Step("no_such_module:Thing")
    with pytest.raises(curate.SettingsError, match="not a subclass of curate.Stage"):
        curate.Step(dict)
    with pytest.raises(curate.SettingsError, match="step 2: expected curate.Step"):
        curate.Pipeline([curate.Step("clean"), "exact_dedup"])
    assert list(tmp_path.iterdir()) == []


def test_a_pipeline_refuses_an_output_it_does_not_own(data, plugins):
    (data / "job.yaml").write_text(f"name: other\ninput: {data / 'in' / '*.jsonl'}\nstages: [clean]\n")
    assert curate_here("run", data / "job.yaml", "--output", data / "out", "--cluster", "threads").returncode == 0
    before = {p: p.read_bytes() for p in (data / "out").rglob("*") if p.is_file()}
    with pytest.raises(curate.SettingsError) as e:
        curate.Pipeline([curate.Step("clean")], name="mine").run(str(data / "in" / "*.jsonl"), data / "out",
                                                               cluster="threads")
    # the CLI's refusal for a job named the same, word for word
    (data / "mine.yaml").write_text(f"name: mine\ninput: {data / 'in' / '*.jsonl'}\nstages: [clean]\n")
    proc = curate_cli("run", data / "mine.yaml", "--output", data / "out", check=False)
    assert proc.returncode == 2 and str(e.value) in proc.stderr
    assert {p: p.read_bytes() for p in (data / "out").rglob("*") if p.is_file()} == before


def test_step_apply_on_pandas_and_dask(data, plugins):
    import dask.dataframe as dd

    frame = pd.concat([pd.read_json(p, lines=True, dtype=False) for p in sorted((data / "in").glob("*.jsonl"))],
                      ignore_index=True).astype({"id": "string", "text": "string"})
    clean = curate.Step("clean")
    kept, rejected = clean.apply(frame, rejects=True)
    assert sorted(rejected["id"]) == ["0-2", "1-2"] and set(rejected["_reason"]) == {"empty_after_clean"}
    assert len(kept) == 8 and "_reason" not in kept.columns
    assert frame["text"].iloc[0].endswith(" 0")  # the input frame is not mutated
    # the same on a Dask DataFrame of two partitions
    ddf = dd.from_pandas(frame, npartitions=2)
    assert clean.apply(ddf).compute().reset_index(drop=True).equals(kept.reset_index(drop=True))
    lazy_kept, lazy_rejected = clean.apply(ddf, rejects=True)
    assert sorted(lazy_rejected.compute()["id"]) == ["0-2", "1-2"]
    # a filter of one's own in a chain, from Python
    filtered = curate.Step("filter", config=str(data / "chain.yaml"), keep_scores=True).apply(kept)
    assert "score_shouting" in filtered.columns and len(filtered) == 6
    with pytest.raises(curate.SettingsError, match="not per-document"):
        curate.Step("exact_dedup").apply(kept)


def test_user_filter_thresholds_and_own_keep():
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Longish(curate.DocumentFilter):
        def score_document(self, text):
            return float(len(text))

        def keep_document(self, score):
            return score % 2 == 0

    f = Longish()
    assert f.reason == "longish" and f.keep(f.score("abcd")) and not f.keep(f.score("abc"))
    with pytest.raises(curate.SettingsError, match="needs a threshold"):
        type("NoKeep", (curate.DocumentFilter,), {"score_document": lambda self, t: 1.0})()


def test_dry_run_plans_without_a_cluster_or_a_write(data, plugins, tmp_path):
    job = data / "job.yaml"
    job.write_text(f"name: plan\ninput: {data / 'in' / '*.jsonl'}\nstages:\n  - clean: {{}}\n"
                   "  - exact_dedup: {}\n  - normalize: {}\n")
    proc = curate_cli("run", job, "--output", data / "out", "--dry-run")
    assert not (data / "out").exists()
    lines = proc.stdout.splitlines()
    assert "nothing started, nothing written" in lines[0]
    assert [ln.split()[-1] for ln in lines[3:]] == ["run", "run", "run"]
    assert curate_here("run", job, "--output", data / "out", "--cluster", "threads").returncode == 0
    listing = sorted((p, p.stat().st_mtime_ns) for p in (data / "out").rglob("*"))
    proc = curate_here("run", job, "--output", data / "out", "--dry-run")
    assert [ln.split("  ")[-1].strip() for ln in proc.stdout.splitlines()[3:]] == ["skip (up to date)"] * 3
    # a later stage's settings change: it and what follows run, what precedes is skipped
    job.write_text(job.read_text().replace("exact_dedup: {}", "exact_dedup: {hash: xxh3}"))
    plan = [ln.split("  ")[-1].strip() for ln in curate_here("run", job, "--output", data / "out", "--dry-run")
            .stdout.splitlines()[3:]]
    assert plan == ["skip (up to date)", "run (settings or inputs changed)", "run (settings or inputs changed)"]
    assert sorted((p, p.stat().st_mtime_ns) for p in (data / "out").rglob("*")) == listing
    # a refusal is the real run's refusal
    other = curate_cli("run", job, "--output", data / "in", "--dry-run", check=False)
    assert other.returncode == 2 and len(other.stderr.strip().splitlines()) == 1


def test_stages_lists_every_stage(capsys):
    from curate.app.cli import main
    from curate.stages import registry

    assert main(["stages"]) == 0
    out = capsys.readouterr().out
    for name in registry.available():
        assert f"\n{name} " in "\n" + out
    assert "curate dedup fuzzy" in out
    assert set(curate.list_stages()) == set(registry.available())


def test_import_curate_is_cheap():
    code = ("import sys, curate; heavy = [m for m in ('pandas', 'dask', 'distributed', 'transformers') "
            "if m in sys.modules]; print(heavy)")
    import subprocess

    out = subprocess.run([sys.executable, "-c", code], cwd=Path(ROOT), capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
