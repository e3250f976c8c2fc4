"""curate never writes, renames or deletes through a symbolic link inside an output (issue 26, point 1).

A folder of a finished output is replaced by a link to a decoy folder of the user's, holding files
under curate's own names; every command that could write there (``--force``, a plain rerun, a
rerun with fewer inputs) refuses with one line naming the link, ``verify`` names it as a problem,
and the decoy stays byte for byte what it was.
"""

import os
import shutil

import pytest

from curate.stages.output import is_side
from tests.app.test_ownership import cli, one_line_refusal, snapshot
from tests.conftest import curate, curate_here, run_stage, side, write_jsonl

TOKENIZE = {"tokenizer": "tiktoken:cl100k_base"}

#: (folder of the output, stage that makes it, its settings): every folder curate makes inside an
#: output or its side folder ``OUT.side/`` (a download's ``_raw/``, a job's stage folders, merge's
#: names: their own tests below). The index and sidecar folders of new stages join here.
FOLDERS = [
    ("_rejects", "clean", {}),
    ("_state", "clean", {}),
    ("_reports", "clean", {}),
    ("_work", "exact_dedup", {}),
    ("_work/hashes", "exact_dedup", {}),
    ("_duplicates", "exact_dedup", {}),
    ("_state", "tokenize", TOKENIZE),
    ("_rejects", "tokenize", {**TOKENIZE, "prefix": "web"}),
    ("_state.web", "tokenize", {**TOKENIZE, "prefix": "web"}),
]


def two_inputs(base):
    """Two files: some documents empty (rejects), some repeated (duplicates)."""
    texts = ["", "the same words in every file", "short", "a document of its own, number {k}"]
    return [write_jsonl(base / "in" / f"f{k}.jsonl",
                        [{"id": f"{k}-{i}", "text": texts[i % 4].format(k=k)} for i in range(8)])
            for k in range(2)]


def link_to_decoy(link, decoy):
    """Replace the folder ``link`` (if any) by a link to ``decoy``: the user's files, under the names
    curate wrote there, plus one of the user's own."""
    names = sorted(str(p.relative_to(link)) for p in link.rglob("*") if p.is_file()) if link.exists() else []
    for name in names or ["report.html", "part-00000.json"]:
        (decoy / name).parent.mkdir(parents=True, exist_ok=True)
        (decoy / name).write_bytes(b"the user's own " + name.encode())
    (decoy / "notes.txt").write_text("the user's notes")
    if link.exists():
        shutil.rmtree(link)
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(decoy, link)


def stage_command(stage, settings):
    from curate.stages import registry

    flags = [a for k, v in settings.items() for a in (f"--{k.replace('_', '-')}", v)]
    return [*(registry.get(stage).cli or (stage,)), *flags]


def refused_untouched(tmp_path, out, link, decoy, runs, verify_here=False):
    """Each command of ``runs`` (--force, a rerun, a rerun with fewer inputs) refuses with one line
    naming the link, verify names it, and the decoy stays what it was. ``verify_here``: verify through
    cli.main in this process (each test below keeps it in a real process for its first case)."""
    before = snapshot(decoy)
    for i, args in enumerate(runs):  # the first in a real process, the others through cli.main in this one
        proc = cli(*args, "--workers", "1", cwd=tmp_path, here=i > 0)
        assert snapshot(decoy) == before, proc.args
        one_line_refusal(proc, f"{link}: a symbolic link (to {decoy}) inside the output")
    proc = curate_here("verify", out) if verify_here else curate("verify", out, check=False)
    assert proc.returncode == 1 and f"{link}: link: a symbolic link (to {decoy})" in proc.stderr, proc.stderr
    assert snapshot(decoy) == before


@pytest.mark.parametrize("folder,stage,settings", FOLDERS, ids=[f"{s}:{f}" for f, s, _ in FOLDERS])
def test_no_write_or_delete_through_a_linked_folder(tmp_path, folder, stage, settings):
    inputs = two_inputs(tmp_path)
    out = tmp_path / "out"
    run_stage(stage, settings, inputs, out)
    link, decoy = (side(out, folder) if is_side(folder) else out / folder), tmp_path / "decoy"
    link_to_decoy(link, decoy)
    command = [*stage_command(stage, settings), "--output", out]
    refused_untouched(tmp_path, out, link, decoy, [
        [*command, "--input", *inputs, "--force"], [*command, "--input", *inputs], [*command, "--input", inputs[0]]],
        verify_here=(folder, stage, settings) != FOLDERS[0])


@pytest.mark.parametrize("stage,settings", [("pack", {"seq_length": 8}), ("shards", {"shard_tokens": 16})])
def test_pack_and_shards_never_write_through_a_link(tmp_path, stage, settings):
    """Their input is one token set: the rerun with fewer inputs reads a set of one pair."""
    inputs = two_inputs(tmp_path)
    run_stage("tokenize", TOKENIZE, inputs, tmp_path / "tok")
    run_stage("tokenize", TOKENIZE, inputs[:1], tmp_path / "tok1")
    out = tmp_path / "out"
    run_stage(stage, settings, [tmp_path / "tok"], out)
    link, decoy = side(out, "_state"), tmp_path / "decoy"
    link_to_decoy(link, decoy)
    command = [*stage_command(stage, settings), "--output", out]
    refused_untouched(tmp_path, out, link, decoy, [
        [*command, "--input", tmp_path / "tok", "--force"], [*command, "--input", tmp_path / "tok"],
        [*command, "--input", tmp_path / "tok1"]], verify_here=stage != "pack")


JOB = "name: j\ninput: {inputs}\nstages:\n  - clean: {{}}\n  - redact: {{}}\n"


@pytest.mark.parametrize("folder", ["01-clean", "01-clean.side/_rejects", "02-redact.side/_state", "_state", "_reports"])
def test_a_job_never_writes_through_a_link(tmp_path, folder):
    """A job's root, its stage folders and their folders: the decoy of a stage folder is a real
    curate output (an earlier copy of the user's), the most tempting to overwrite."""
    inputs = two_inputs(tmp_path)
    jobs = []
    for name, given in (("all", inputs), ("fewer", inputs[:1])):
        jobs.append(tmp_path / f"{name}.yaml")
        jobs[-1].write_text(JOB.format(inputs=[str(i) for i in given]))
    root = tmp_path / "out"
    from curate.app import runner

    runner.run_job(runner.load_job(str(jobs[0])), str(root))
    link, decoy = root / folder, tmp_path / "decoy"
    if "/" not in folder and folder.startswith("0"):
        shutil.copytree(link, decoy)
        shutil.rmtree(link)
        os.symlink(decoy, link)
    else:
        link_to_decoy(link, decoy)
    refused_untouched(tmp_path, root, link, decoy, [
        ["run", jobs[0], "--output", root, "--force"], ["run", jobs[0], "--output", root],
        ["run", jobs[1], "--output", root]], verify_here=folder != "01-clean")


@pytest.mark.parametrize("name,folder", [("_state.all", True), ("_state.all/merge.json", False), ("all.bin", False),
                                         ("_manifest.all.json", False)])
def test_merge_never_writes_through_a_link(tmp_path, name, folder):
    """The merged pair's folder may hold anything of the user's; the names merge writes may not be links."""
    inputs = two_inputs(tmp_path)
    run_stage("tokenize", TOKENIZE, inputs, tmp_path / "tok")
    merged = tmp_path / "merged"
    assert curate_here("merge", tmp_path / "tok", "--output", merged / "all").returncode == 0
    link, decoy = (side(merged, name) if is_side(name) else merged / name), tmp_path / "decoy"
    if folder:
        link_to_decoy(link, decoy)
    else:
        decoy.mkdir()
        (decoy / link.name).write_bytes(b"the user's own " + name.encode())
        link.parent.mkdir(exist_ok=True)
        if link.exists():
            os.remove(link)
        os.symlink(decoy / link.name, link)
    before = snapshot(decoy)
    for again in range(2):  # a rerun (in a real process), and one after the refusal (through cli.main here)
        proc = cli("merge", tmp_path / "tok", "--output", merged / "all", cwd=tmp_path, here=again > 0)
        assert snapshot(decoy) == before
        one_line_refusal(proc, f"{link}: a symbolic link", f"inside the output {merged}")
    proc = curate("verify", merged, check=False)  # a linked manifest is read: verify fails on its content
    assert proc.returncode == 1 and f"{link}: " in proc.stderr, proc.stderr
    assert snapshot(decoy) == before


def test_curate_report_never_writes_through_a_link(tmp_path):
    inputs = two_inputs(tmp_path)
    out = tmp_path / "out"
    run_stage("clean", {}, inputs, out)
    link, decoy = out / "_reports", tmp_path / "decoy"
    link_to_decoy(link, decoy)
    before = snapshot(decoy)
    proc = cli("report", out, cwd=tmp_path)
    assert snapshot(decoy) == before
    one_line_refusal(proc, f"{link}: a symbolic link")
    # a page written elsewhere, at the user's own path, is the user's choice
    assert cli("report", out, "--html", tmp_path / "page.html", "--png", tmp_path / "s.png",
               cwd=tmp_path).returncode == 0
    assert snapshot(decoy) == before


def test_a_download_never_writes_through_a_linked_raw_folder(tmp_path):
    """``--keep-raw`` keeps the downloaded files in ``OUT/_raw/`` (written beside the Output class, by
    the fetcher): the claim refuses the link before any request."""
    from tests.httpserver import FileServer
    from tests.rawdata import page_warc, rust_pages

    for k in range(2):
        page_warc(tmp_path / "www" / f"p{k}.warc.gz", rust_pages(4)[2 * k:2 * k + 2])
    with FileServer(tmp_path / "www") as server:
        lists = []
        for name, n in (("all", 2), ("fewer", 1)):
            lists.append(tmp_path / f"{name}.txt")
            lists[-1].write_text("".join(server.url(f"p{k}.warc.gz") + "\n" for k in range(n)))
        out = tmp_path / "out"
        run_stage("download_urls", {"list": str(lists[0]), "keep_raw": True, "backoff": 0.01, "timeout": 2.0},
                  (), out)
        link, decoy = out / "_raw", tmp_path / "decoy"
        link_to_decoy(link, decoy)
        asked = len(server.requests)
        command = ["download", "urls", "--keep-raw", "--output", out, "--list"]
        refused_untouched(tmp_path, out, link, decoy, [
            [*command, lists[0], "--force"], [*command, lists[0]], [*command, lists[1]]])
        assert len(server.requests) == asked
