"""What a small run does not import (issue 42): a tokenize that runs in threads (no cluster) must not pay
for distributed, Bokeh or dask.dataframe (with dask.array and scipy.fft), nor for transformers when the
tokenizer directory's tokenizer.json is read by ``tokenizers`` alone. Each of these was a tenth to a
third of a 1,000-document run's CPU time. Checked in a fresh process, from ``sys.modules`` after the
command returned."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.modules.tokenize.helpers import make_bpe_dir

#: imported by a run that needs a cluster, a shuffle or a transformers tokenizer; a threads tokenize needs none
HEAVY = ("distributed", "bokeh", "dask.dataframe", "dask.array", "scipy", "transformers", "matplotlib")

PROGRAM = """
import json, sys
from curate.app.cli import _main
code = _main(json.loads(sys.argv[1]))
print(json.dumps({"code": code, "heavy": [m for m in json.loads(sys.argv[2]) if m in sys.modules]}))
"""


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    folder = tmp_path_factory.mktemp("startup")
    docs = folder / "docs.jsonl"
    docs.write_text("".join(json.dumps({"id": f"d{i}", "text": f"document {i} of a small run"}) + "\n"
                            for i in range(20)))
    return folder, str(docs), make_bpe_dir(folder / "tok")


def _imports(argv) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", PROGRAM, json.dumps(argv), json.dumps(HEAVY)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["code"] == 0, proc.stderr[-2000:]
    return result["heavy"]


@pytest.mark.parametrize("cluster", [[], ["--cluster", "threads"]], ids=["auto", "threads"])
def test_a_small_tokenize_imports_no_cluster_nor_dataframe(small, cluster):
    folder, docs, tok = small
    out = folder / f"out-{len(cluster)}"
    assert _imports(["--log-level", "WARNING", "tokenize", "--input", docs, "--output", str(out),
                     "--tokenizer", tok, *cluster]) == []
    assert (out / "part_00000.bin").stat().st_size > 0


def test_a_one_stage_tokenize_job_imports_none_either(small):
    folder, docs, tok = small
    job = folder / "job.yaml"
    job.write_text(f"name: t\ninput: {docs}\nstages:\n  - tokenize: {{tokenizer: {tok}}}\n")
    # nor Bokeh: a job's _reports/report.html draws its charts as plain SVG
    assert _imports(["--log-level", "WARNING", "run", str(job), "--output", str(folder / "job-out")]) == []
    assert (folder / "job-out" / "_reports" / "report.html").exists()


def test_the_one_command_parser_is_the_whole_parsers_command():
    # a command named on the line gets its parser alone (no stage module but its own is imported):
    # options, help and defaults must be exactly those it has among all the others
    from curate.app import cli
    from curate.stages import registry

    def commands(parser):
        return next(a for a in parser._actions if isinstance(a, cli.argparse._SubParsersAction)).choices

    full = commands(cli.build_parser())
    for name in ["run", "stages", *cli.COMMANDS, *registry.available()]:
        assert cli.command_of(["--log-level", "DEBUG", "--debug", name, "--help"]) == name
        one = commands(cli.build_parser(cli.command_of([name])))
        assert list(one) == [name]
        assert one[name].format_help() == full[name].format_help(), name
        assert one[name].get_default("handler") is full[name].get_default("handler")
    # the whole parser for anything else: the list of commands, a two-word command, a did-you-mean
    for argv in ([], ["--help"], ["--version"], ["dedup", "fuzzy"], ["tokenise"], ["--deb", "run"]):
        assert cli.command_of(argv) is None, argv
