"""The documentation: the site builds with no broken link, the README stays a front page, its
quickstart and walk-through run as written, the stage pages list every option, the notebook example
executes.

The commands run in a scratch folder that holds links to the checkout's ``jobs/``, ``scripts/`` and
``.venv/``, so they write nothing into the checkout. ``scripts/setup.sh &&`` is dropped from them
(the suite runs after setup), and the block that runs the test suite itself is not run again.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT

README = ROOT / "README.md"


def shell_blocks(section: str) -> list[str]:
    """The ```sh blocks between the section's snippet markers in the README."""
    text = README.read_text(encoding="utf-8")
    start, end = f"--8<-- [start:{section}]", f"--8<-- [end:{section}]"
    body = text[text.index(start):text.index(end)]
    blocks = re.findall(r"^[ \t]*```sh\n(.*?)^[ \t]*```", body, re.S | re.M)
    return [re.sub(r"^[ \t]{3}", "", b, flags=re.M) for b in blocks]


def test_readme_is_a_front_page():
    text = README.read_text(encoding="utf-8")
    assert len(text.encode()) <= 15 * 1024
    for heading in ("## Quickstart", "## Your own data in five minutes", "## Documentation", "## Architecture"):
        assert heading in text
    assert "curate-llm" in text


@pytest.mark.slow
def test_site_builds_strictly(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    quickstart = (tmp_path / "site" / "quickstart" / "index.html").read_text()
    assert "my-data/part-1.jsonl" in quickstart and "8&lt;--" not in quickstart
    assert "curate.stages" in (tmp_path / "site" / "architecture" / "index.html").read_text()


def test_stage_pages_list_every_option():
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "docs_options.py"), "--check"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.slow
def test_quickstart_and_walkthrough_run_as_written(tmp_path):
    for name in ("jobs", "scripts", ".venv"):
        os.symlink(ROOT / name, tmp_path / name)
    quick, walk = shell_blocks("quickstart"), shell_blocks("walkthrough")
    assert len(quick) == 2 and len(walk) == 3
    assert "pytest" in quick[1]  # the suite itself: that is what is running now
    for block in [quick[0], *walk]:
        script = block.replace("scripts/setup.sh && ", "")
        proc = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, capture_output=True,
                              text=True, timeout=600)
        assert proc.returncode == 0, f"{script}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    assert (tmp_path / "out" / "sample" / "08-tokenize" / "_SUCCESS").exists()
    # what the walk-through promises: one exact and no other duplicate, the shouting page dropped
    out = proc.stdout
    assert "doc-3" in out and "word_count" in out
    import json

    dedup = json.loads((tmp_path / "out" / "my-corpus" / "03-exact_dedup" / "manifest.json").read_text())
    assert dedup["counts"]["dropped"] == {"exact_duplicate": 1}
    assert (tmp_path / "out" / "my-corpus" / "_reports" / "report.html").exists()
    assert not (ROOT / "my-data").exists() and not (ROOT / "my-job.yaml").exists()


def test_the_notebook_example_runs(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "docs" / "examples" / "notebook.py"), str(tmp_path)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "done:" in proc.stdout
    assert (tmp_path / "out" / "05-tokenize" / "_SUCCESS").exists()
