"""The documentation: the site builds with no broken link, the README stays a front page, its
quickstart and walk-through run as written, the stage pages list every option, the notebook example
executes.

The commands run in a fresh copy of the checkout's tracked files (a clone) with a link to its
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
def fresh_clone(tmp_path):
    """The checkout's tracked files as they are now (what a clone of this commit holds), with a link to
    its ``.venv`` (the suite runs after setup)."""
    import shutil

    clone = tmp_path / "clone"
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for rel in filter(None, files.decode().split("\0")):
        if (ROOT / rel).is_file():
            (clone / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, clone / rel)
    os.symlink(ROOT / ".venv", clone / ".venv")
    return clone


def test_quickstart_and_walkthrough_run_as_written(tmp_path):
    """In a fresh clone, one after another as a newcomer types them: the quickstart, the walk-through (in
    one shell: it cds to a folder of its own), then the test command (the docs tests, which must not
    depend on what the walk-through left: issue 31, point 1)."""
    clone, home = fresh_clone(tmp_path), tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home)}
    quick, walk = shell_blocks("quickstart"), shell_blocks("walkthrough")
    assert len(quick) == 2 and len(walk) == 3
    assert "pytest" in quick[1]  # the suite itself: run below, restricted to the docs tests
    for script in (quick[0].replace("scripts/setup.sh && ", ""), "\n".join(walk)):
        proc = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=clone, capture_output=True,
                              text=True, timeout=600, env=env)
        assert proc.returncode == 0, f"{script}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    assert (clone / "out" / "sample" / "09-tokenize" / "_SUCCESS").exists()
    # issue 31, point 9: the book's navigation help ("Press S or / to search in the book") opened every
    # document the sample tokenized; it now stays only in the first that has it
    import pandas as pd

    texts = pd.concat([pd.read_parquet(p) for p in sorted((clone / "out" / "sample" / "08-shuffle").glob("part-*"))])
    assert sum("Press S or / to search in the book" in t for t in texts["text"]) == 1 and len(texts) == 101
    # what the walk-through promises: one exact and no other duplicate, the shouting page dropped
    out = proc.stdout
    assert "doc-3" in out and "word_count" in out
    import json

    mine = home / "curate-try"
    dedup = json.loads((mine / "out" / "my-corpus" / "03-exact_dedup" / "_manifest.json").read_text())
    assert dedup["counts"]["dropped"] == {"exact_duplicate": 1}
    assert (mine / "out" / "my-corpus" / "_reports" / "report.html").exists()
    # the walk-through wrote nothing into the clone
    assert not {"my-data", "my-job.yaml", "my-filters.yaml"} & {p.name for p in clone.iterdir()}
    # the test command, in the clone, after all of that
    proc = subprocess.run([str(clone / ".venv" / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "tests/test_docs.py", "-k", "front_page or stage_pages"], cwd=clone, capture_output=True,
                          text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:]


def test_the_notebook_example_runs(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "docs" / "examples" / "notebook.py"), str(tmp_path)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "done:" in proc.stdout
    assert (tmp_path / "out" / "05-tokenize" / "_SUCCESS").exists()


def test_the_architecture_diagram_is_current_and_imports_run_one_way():
    """Issue 32: the house drawn from the code; no stage imports curate.app or the top-level curate, no
    import circle, app uses no private name of a stage."""
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "docs_architecture.py"), "--check"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
