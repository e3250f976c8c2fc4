"""The command line: help, bad usage (exit 2, one line), a stage subcommand end to end."""

import json
import re

import pytest

from curate.app.cli import main
from tests.conftest import curate, write_jsonl


def run_main(capsys, *argv):
    code = main(list(map(str, argv)))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_help_lists_run_and_stages(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "run" in out and "normalize" in out


@pytest.mark.parametrize("argv, message", [
    (["run", "does-not-exist.yaml"], "job file does-not-exist.yaml: no such file"),
    (["normalize", "--input", "nope.jsonl", "--output", "x"], "input nope.jsonl: no such file or directory"),
    (["normalize", "--output", "x"], "the following arguments are required: --input"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
    (["normalize", "--input", "a", "--output", "x", "--drop-empty", "--format", "csv"], "invalid choice: 'csv'"),
    (["normalize", "--input", "a", "--output", "x", "--cluster", "nowhere"], "--cluster 'nowhere'"),
    (["normalize", "--input", "a", "--output", "x", "--memory-limit", "lots"], "--memory-limit must be a size"),
])
def test_bad_usage_exits_2_with_one_line(capsys, argv, message):
    code, out, err = run_main(capsys, *argv)
    assert code == 2
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in err


@pytest.mark.parametrize("job, message", [
    ("stages: [nope]\ninput: x.jsonl\n", "unknown stage 'nope'"),
    ("stages: [normalize\n", "not valid YAML"),
    ("input: x.jsonl\nstages:\n  - normalize: {drop_empty: 3}\n", "stage 1 (normalize).drop_empty must be true or false"),
    ("input: x.jsonl\nstages:\n  - normalize: {colour: red}\n", "unknown setting 'colour'"),
    ("stages: [normalize]\n", "no 'input' for the first stage"),
    ("input: x.jsonl\nstages: []\n", "'stages' must be a non-empty list"),
])
def test_bad_job_files_exit_2(capsys, tmp_path, job, message):
    path = tmp_path / "job.yaml"
    path.write_text(job)
    code, _, err = run_main(capsys, "run", path, "--output", tmp_path / "out")
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_bad_data_exits_1_naming_file_and_line(tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", [{"text": "fine"}], raw_lines=["oops"])
    proc = curate("normalize", "--input", src, "--output", tmp_path / "out", "--workers", "1", check=False)
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("curate: error: ") and "in.jsonl line 2: invalid_json" in last
    # the worker's copy of an expected failure (with its traceback) is not in the log
    assert "Compute Failed" not in proc.stderr and "Traceback" not in proc.stderr


def test_stage_subcommand_end_to_end(tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", [{"id": str(i), "text": f"doc  {i}"} for i in range(5)])
    out = tmp_path / "out"
    proc = curate("normalize", "--input", src, "--output", out, "--workers", "1", "--format", "jsonl")
    assert "dashboard at http://127.0.0.1:" in proc.stderr
    assert f"output in {out}" in proc.stdout
    rows = [json.loads(x) for x in (out / "part-00000.jsonl").read_text().splitlines()]
    assert [r["text"] for r in rows] == [f"doc {i}" for i in range(5)]
    assert list((out / "_reports").glob("*.html"))
    # log lines carry time, host and rank
    line = next(ln for ln in proc.stderr.splitlines() if "curate.runner" in ln)
    assert " r0 INFO curate.runner: " in line


@pytest.mark.parametrize("kwargs, size, mode", [
    ({}, 10, "threads"),
    ({}, 64 << 20, "threads"),                # the bound itself is small
    ({}, (64 << 20) + 1, "local"),
    ({}, None, "local"),                      # URLs or downloads: size unknown
    ({"workers": 2}, 10, "local"),            # sizing workers asks for a cluster
    ({"memory_limit": "2GiB"}, 10, "local"),
    ({"dashboard_address": "127.0.0.1:0"}, 10, "local"),
    ({"mode": "local"}, 10, "local"),         # an explicit mode is kept
    ({"mode": "threads"}, 10**12, "threads"),
])
def test_cluster_auto_chooses_by_input_size_and_says_why(kwargs, size, mode):
    from curate.app.cluster import ClusterSettings, resolve_auto

    chosen = resolve_auto(ClusterSettings(**kwargs), size)
    assert chosen.mode == mode
    assert (chosen.auto_reason is None) == ("mode" in kwargs)


def test_a_small_run_stays_in_process(tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", [{"text": f"document {i}"} for i in range(20)])
    proc = curate("normalize", "--input", src, "--output", tmp_path / "out")
    assert "cluster: auto chose threads (input 0.0 MiB <= 64 MiB" in proc.stderr
    assert "dashboard" not in proc.stderr.lower()
    assert json.loads((tmp_path / "out" / "_manifest.json").read_text())["counts"]["out"] == 20


# --------------------------------------------------------------------------- discoverability (issue 31, point 6)


def test_version(capsys):
    from curate.app.cli import main

    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert re.fullmatch(r"curate \S+\n", capsys.readouterr().out)


def test_a_stage_typo_in_a_job_says_did_you_mean_and_names_the_file(tmp_path, capsys):
    from curate.app.cli import main

    job = tmp_path / "job.yaml"
    job.write_text(f"name: x\ninput: {tmp_path}/a.jsonl\nstages:\n  - clean: {{}}\n  - fuzy_dedup: {{}}\n")
    assert main(["run", str(job), "--output", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"job file {job}: stage 2: unknown stage 'fuzy_dedup' (known: " in err
    assert err.strip().endswith("; did you mean 'fuzzy_dedup'?")


@pytest.mark.parametrize("argv", [["fuzzy_dedup", "--help"], ["dedup", "fuzzy", "--help"],
                                  ["extract_warc", "--help"], ["download_urls", "--help"]])
def test_yaml_names_and_commands_both_work_and_help_is_plain_text(argv, capsys):
    from curate.app.cli import main

    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "--output" in out and "``" not in out and ":mod:" not in out


def test_curate_filters_lists_every_filter_with_its_defaults(capsys):
    from curate.app.cli import main
    from curate.stages.filters import FILTERS

    assert main(["filters"]) == 0
    out = capsys.readouterr().out
    for name in FILTERS:
        assert re.search(rf"^{name} ", out, re.M), name
    assert re.search(r"^word_count +Number of words\.\n +keeps: score >= 50 and <= 100000", out, re.M)
    assert main(["filters", "c4_sentences"]) == 0
    assert "c4_sentences:" in capsys.readouterr().out
    assert main(["filters", "word_cont"]) == 2
    assert "did you mean 'word_count'?" in capsys.readouterr().err
