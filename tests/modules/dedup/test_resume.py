"""A fuzzy dedup killed after its signatures step and run again (issue 29, point 10).

The rerun takes the signatures step from the journal, and the manifest it writes must still say how
many rows each ``_work/signatures`` part holds: the journal's file records are what a resumed step
lists, so a record written without ``rows`` stays without them (``curate verify`` then had nothing to
compare the Parquet footer with). The kill is a real SIGKILL of the process, at the moment the next
step (buckets) begins: what a node lost or an OOM killer leaves (a done signatures record, a stale
lock, no ``_SUCCESS``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pyarrow.parquet as pq

from tests.conftest import ROOT, curate_here, side, write_jsonl

#: texts long enough to have shingles; the copies make the run remove something
TEXTS = ["the river runs past the old mill and the stone bridge into the valley below the town",
         "bread from the oven on the corner smells of flour and salt every morning before dawn",
         "the library keeps its quiet reading room open late on thursdays for students and others"]

#: partition 0: three documents, partition 1: two (b0 a copy of a0, b1 a near copy of a1: three words added)
PARTS = [[{"id": "a0", "text": TEXTS[0]}, {"id": "a1", "text": TEXTS[1]}, {"id": "a2", "text": TEXTS[2]}],
         [{"id": "b0", "text": TEXTS[0]}, {"id": "b1", "text": TEXTS[1] + " and at noon"}]]

KILL_AFTER_SIGNATURES = """
import os, signal, sys
from curate.stages import dedup
from curate.app.cli import main

run = dedup.Steps.run

def run_or_die(self, name, *args, **kwargs):
    if name == "edges":  # the signatures step is done and journaled: die as a kill -9 would
        os.kill(os.getpid(), signal.SIGKILL)
    return run(self, name, *args, **kwargs)

dedup.Steps.run = run_or_die
sys.exit(main(sys.argv[1:]))
"""


def signature_records(manifest):
    return {r["path"]: r for r in manifest["outputs"] if r["path"].startswith("_work/signatures/")}


def test_a_killed_fuzzy_run_resumed_lists_the_rows_of_its_signatures(tmp_path):
    files = [write_jsonl(tmp_path / "in" / f"{k}.jsonl", part) for k, part in enumerate(PARTS)]
    out = tmp_path / "out"
    command = ["dedup", "fuzzy", "--input", *map(str, files), "--output", str(out), "--cluster", "threads"]
    killed = subprocess.run([sys.executable, "-c", KILL_AFTER_SIGNATURES, *command], cwd=ROOT, capture_output=True,
                            text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    done = json.loads((side(out, "_state") / "step-_work-signatures.json").read_text())
    assert done["status"] == "done" and not (out / "_SUCCESS").exists()

    # the resumed run through cli.main here: the kill is the real process's above
    resumed = curate_here(*command, cwd=ROOT)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    manifest = json.loads((out / "_manifest.json").read_text())
    assert manifest["steps"]["signatures"]["skipped"] is True  # it was resumed, not redone
    assert manifest["steps"]["edges"]["skipped"] is False
    records = signature_records(manifest)
    # by hand: every document has shingles, so one signature row per document of its partition
    assert {path: r.get("rows") for path, r in records.items()} == {
        "_work/signatures/part-00000.parquet": 3, "_work/signatures/part-00001.parquet": 2}
    for path, r in records.items():  # and what the files hold
        assert pq.ParquetFile(side(out) / path).metadata.num_rows == r["rows"]
    assert manifest["counts"]["dropped"] == {"fuzzy_duplicate": 2}
    assert curate_here("verify", out).returncode == 0
