"""download_commoncrawl against a local Common Crawl mirror (warc.paths.gz + WARCs) with faults."""

import json

import pandas as pd
import pytest

from curate.stages.errors import DataError, SettingsError
from curate.stages.extract.warc import COLUMNS
from tests.conftest import curate, read_output, run_stage, side
from tests.httpserver import FileServer
from tests.rawdata import page_warc, rust_pages

SNAP = "CC-MAIN-2023-50"
FAST = {"backoff": 0.01, "timeout": 2.0}


@pytest.fixture(scope="module")
def pages():
    return rust_pages(9)


@pytest.fixture
def mirror(tmp_path, pages):
    """Three WARCs of three pages each in Common Crawl's layout, served on 127.0.0.1."""
    from tests.rawdata import cc_mirror

    root = tmp_path / "www"
    warcs = {}
    for i in range(3):
        p = page_warc(tmp_path / "build" / f"CC-MAIN-2023120{i}-00000{i}.warc.gz", pages[3 * i: 3 * i + 3])
        warcs[p.name] = p.read_bytes()
    rels = cc_mirror(root, SNAP, warcs)
    with FileServer(root) as server:
        server.rels = rels
        yield server


def test_first_n_warcs_with_faults(mirror, tmp_path, pages):
    mirror.fail(mirror.rels[0], "500", "500")  # 500 twice then 200
    mirror.fail(mirror.rels[1], "cut")  # the connection drops half way: resumed by Range
    settings = {"snapshots": SNAP, "limit": 2, "base_url": mirror.url(), **FAST}
    manifest = run_stage("download_commoncrawl", settings, (), tmp_path / "out")
    out = read_output(tmp_path / "out")
    assert list(out.columns) == list(COLUMNS)
    assert out["url"].tolist() == [u for u, _ in pages[:6]]
    assert manifest["partitions"] == 2 and manifest["counts"] == {"in": 6, "out": 6, "dropped": {}}
    d = manifest["download"]
    assert (d["files"], d["downloaded"], d["resumed"], d["failed"]) == (2, 1, 1, 0)
    assert [s for _, _, s in mirror.hits(mirror.rels[0])] == [500, 500, 200]
    assert [(r is not None, s) for _, r, s in mirror.hits(mirror.rels[1])] == [(False, 200), (True, 206)]
    assert not mirror.hits(mirror.rels[2])  # beyond the limit
    assert not (tmp_path / "out" / "_raw").exists()  # raw files go unless --keep-raw


def test_keep_raw_and_rerun_skips_complete_files(mirror, tmp_path):
    settings = {"snapshots": SNAP, "base_url": mirror.url(), "raw_dir": str(tmp_path / "raw"), "keep_raw": True,
                **FAST}
    first = run_stage("download_commoncrawl", settings, (), tmp_path / "out")
    files = [r.rsplit("/", 1)[1] for r in mirror.rels]
    # each WARC kept as it streamed, with its sidecar naming the URL it came from (the listing is not kept)
    assert sorted(p.name for p in (tmp_path / "raw").iterdir()) == sorted(files + [f + ".url" for f in files])
    n = len(mirror.requests)
    # an interrupted run left the output unfinished: the rerun finds every file finished in the journal
    (tmp_path / "out" / "_SUCCESS").unlink()
    second = run_stage("download_commoncrawl", settings, (), tmp_path / "out")
    assert len(mirror.requests) == n + 1 and second["download"]["finished"] == 3  # + the listing
    # another output: the kept files are read from RAW, not downloaded again
    third = run_stage("download_commoncrawl", settings, (), tmp_path / "out3")
    assert len(mirror.requests) == n + 2 and third["download"]["reused"] == 3
    assert first["counts"] == second["counts"] == third["counts"] == {"in": 9, "out": 9, "dropped": {}}


def test_truncated_warc_and_a_failed_download(mirror, tmp_path, pages):
    warc = mirror.root / mirror.rels[2]
    data = warc.read_bytes()
    warc.write_bytes(data[: len(data) * 2 // 3])  # a truncated gzip on the server
    mirror.fail(mirror.rels[1], *["503"] * 10)  # never comes back
    settings = {"snapshots": SNAP, "base_url": mirror.url(), "retries": 2, **FAST}
    with pytest.raises(DataError, match=mirror.rels[1].rsplit("/", 1)[1]):
        run_stage("download_commoncrawl", settings, (), tmp_path / "out")
    mirror.fail(mirror.rels[1], *["503"] * 10)
    manifest = run_stage("download_commoncrawl", settings, (), tmp_path / "out2", on_error="skip")
    dropped = manifest["counts"]["dropped"]
    assert dropped["download_failed"] == 1 and dropped["truncated_file"] == 1
    out = read_output(tmp_path / "out2")
    assert out["url"].tolist()[:3] == [u for u, _ in pages[:3]] and len(out) >= 4  # WARC 3 kept its start
    rejects = pd.read_parquet(side(tmp_path / "out2", "_rejects"))
    failed = rejects[rejects["_reason"] == "download_failed"]
    assert failed["_detail"].str.contains("HTTP 503").all()


@pytest.mark.parametrize("fault", ["503", "stall"])
def test_a_passing_failure_stays_pending_and_a_plain_rerun_fetches_it(mirror, tmp_path, pages, caplog, fault):
    """Issue 26: a timeout or a 503 under --on-error skip was a final download_failed reject: the
    same command again said "up to date". Now it is pending (journal, manifest, summary); a plain
    rerun fetches exactly that file and merges its documents, and a 404 stays a final reject."""
    from curate.app import runner
    from curate.stages.download.commoncrawl import DownloadCommonCrawlSettings
    from curate.stages.stage import IOSettings

    mirror.stall_seconds = 1.0
    (mirror.root / mirror.rels[1]).unlink()  # 404: permanent
    mirror.fail(mirror.rels[0], fault)  # once: the next request gets the file
    settings = DownloadCommonCrawlSettings(snapshots=(SNAP,), base_url=mirror.url(), retries=0, backoff=0.01,
                                           timeout=0.3)
    io = IOSettings(on_error="skip")
    out = tmp_path / "out"

    first = runner.run_stage("download_commoncrawl", settings, (), str(out), io)
    m = first.manifest
    assert (out / "_SUCCESS").exists() and m["status"] == "complete"  # whole for every other file
    assert m["pending"] == 1 and m["download"]["pending"] == 1 and m["download"]["failed"] == 2
    assert m["download"]["pending_files"] == [mirror.url(mirror.rels[0])]
    assert m["counts"] == {"in": 5, "out": 3, "dropped": {"download_failed": 2}}
    assert json.loads((side(out, "_state") / "fetch-00000.json").read_text())["status"] == "pending"
    assert json.loads((side(out, "_state") / "fetch-00001.json").read_text())["status"] == "done"
    table = runner.summary_table([first])
    assert f"1 input(s) still pending (failed for now: {mirror.url(mirror.rels[0])})" in table
    assert "run the same command again" in table

    # a stage reading it says its input is incomplete
    with caplog.at_level("WARNING", logger="curate.runner"):
        runner.run_stage("normalize", runner.registry.get("normalize").Settings(), (str(out),),
                         str(tmp_path / "norm"), IOSettings())
    assert "has 1 pending input(s)" in caplog.text

    before = {rel: len(mirror.hits(rel)) for rel in mirror.rels}
    second = runner.run_stage("download_commoncrawl", settings, (), str(out), io)
    assert not second.skipped
    again = {rel: len(mirror.hits(rel)) - before[rel] for rel in mirror.rels}
    assert again == {mirror.rels[0]: 1, mirror.rels[1]: 0, mirror.rels[2]: 0}  # the 404 is not asked again
    m2 = second.manifest
    assert m2["pending"] == 0 and m2["download"]["finished"] == 2 and m2["download"]["pending_files"] == []
    assert m2["counts"] == {"in": 7, "out": 6, "dropped": {"download_failed": 1}}
    assert read_output(out)["url"].tolist() == [u for u, _ in pages[:3]] + [u for u, _ in pages[6:9]]
    rejects = pd.read_parquet(side(out, "_rejects"))
    assert rejects["_reason"].tolist() == ["download_failed"] and rejects["_detail"].str.contains("HTTP 404").all()
    assert "pending" not in runner.summary_table([second])

    # now up to date; the stage after it sees new documents and runs again
    assert runner.run_stage("download_commoncrawl", settings, (), str(out), io).skipped
    norm = runner.run_stage("normalize", runner.registry.get("normalize").Settings(), (str(out),),
                            str(tmp_path / "norm"), IOSettings())
    assert not norm.skipped and norm.manifest["counts"]["in"] == 6


def test_settings_are_checked():
    from curate.stages.download.commoncrawl import DownloadCommonCrawlSettings

    with pytest.raises(SettingsError, match="snapshots"):
        DownloadCommonCrawlSettings()
    with pytest.raises(SettingsError, match="2023-50"):
        DownloadCommonCrawlSettings(snapshots=("2023-50",))
    with pytest.raises(SettingsError, match="limit"):
        DownloadCommonCrawlSettings(snapshots=(SNAP,), limit=0)
    with pytest.raises(SettingsError, match="algorithm"):
        DownloadCommonCrawlSettings(snapshots=(SNAP,), algorithm="nope")
    assert DownloadCommonCrawlSettings(snapshots=(SNAP,)).base_url == "https://data.commoncrawl.org"


@pytest.mark.slow
def test_cli_download_commoncrawl(mirror, tmp_path):
    curate("download", "commoncrawl", "--snapshots", SNAP, "--limit", "1", "--base-url", mirror.url(),
           "--output", tmp_path / "out", "--raw-dir", tmp_path / "raw", "--keep-raw", "--algorithm", "justext",
           "--workers", "1", "--backoff", "0.01")
    manifest = json.loads((tmp_path / "out" / "_manifest.json").read_text())
    assert manifest["settings"]["algorithm"] == "justext" and manifest["download"]["files"] == 1
    assert manifest["counts"]["in"] == 3
    assert (tmp_path / "raw" / mirror.rels[0].rsplit("/", 1)[1]).exists()
