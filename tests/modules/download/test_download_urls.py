"""download_urls: a mixed list (WARC, Wikipedia dump, arXiv tarball), each extracted by its type."""

import gzip

import pandas as pd
import pytest

from curate.stages.download.base import FetchJob, unique_names, url_file_name
from curate.stages.download.urls import kind_of
from curate.stages.errors import DataError, SettingsError
from tests.conftest import read_output, run_stage, side
from tests.httpserver import FileServer
from tests.rawdata import ENWIKI, SINGLE_TEX, page_warc, rust_pages

FAST = {"backoff": 0.01, "timeout": 2.0}


@pytest.fixture
def server(tmp_path):
    www = tmp_path / "www"
    page_warc(www / "a" / "pages.warc.gz", rust_pages(2))
    (www / "b").mkdir()
    (www / "b" / "enwiki-sample.xml.bz2").write_bytes(ENWIKI.read_bytes())
    (www / "c").mkdir()
    (www / "c" / "2301.00002.gz").write_bytes(gzip.compress(SINGLE_TEX.encode()))
    with FileServer(www) as srv:
        yield srv


def _list(tmp_path, urls):
    path = tmp_path / "urls.txt"
    path.write_text("\n".join(urls) + "\n")
    return str(path)


def test_each_file_goes_to_its_extractor(server, tmp_path):
    urls = [server.url("a/pages.warc.gz"), "", "# a comment", server.url("b/enwiki-sample.xml.bz2"),
            server.url("c/2301.00002.gz")]
    manifest = run_stage("download_urls", {"list": _list(tmp_path, urls), **FAST}, (), tmp_path / "out")
    out = read_output(tmp_path / "out")
    assert manifest["partitions"] == 3 and manifest["counts"] == {"in": 8, "out": 8, "dropped": {}}
    # the union of the extractors' columns (kinds in name order: arxiv, warc, wikipedia)
    assert list(out.columns) == ["id", "text", "url", "source", "warc_record_id", "warc_date", "language",
                                 "language_score", "title"]
    assert out["id"].tolist()[2:] == ["enwiki:217916", "enwiki:3277686", "enwiki:316", "enwiki:9391",
                                      "enwiki:4702", "2301.00002"]
    assert out["title"].isna().tolist() == [True, True, False, False, False, False, False, True]
    assert out["warc_record_id"].notna().sum() == 2


def test_unknown_type_is_a_usage_error_before_any_download(server, tmp_path):
    with pytest.raises(SettingsError, match=r"line 2: .*notes\.pdf: unknown file type"):
        run_stage("download_urls", {"list": _list(tmp_path, [server.url("a/pages.warc.gz"),
                                                             server.url("x/notes.pdf")])}, (), tmp_path / "out")
    with pytest.raises(SettingsError, match="not an http"):
        run_stage("download_urls", {"list": _list(tmp_path, ["/etc/passwd.tar"])}, (), tmp_path / "out")
    with pytest.raises(SettingsError, match="list"):
        run_stage("download_urls", {}, (), tmp_path / "out")
    assert server.requests == []


def test_a_missing_url_fails_or_is_rejected(server, tmp_path):
    urls = [server.url("a/pages.warc.gz"), server.url("gone/missing.warc.gz")]
    with pytest.raises(DataError, match=r"missing\.warc\.gz: HTTP 404"):
        run_stage("download_urls", {"list": _list(tmp_path, urls), **FAST}, (), tmp_path / "out")
    manifest = run_stage("download_urls", {"list": _list(tmp_path, urls), **FAST}, (), tmp_path / "out2",
                         on_error="skip")
    assert manifest["counts"] == {"in": 3, "out": 2, "dropped": {"download_failed": 1}}
    rejects = pd.read_parquet(side(tmp_path / "out2", "_rejects"))
    assert rejects["id"].tolist() == ["missing.warc.gz"]


def test_file_types_and_names():
    assert [kind_of(n) for n in ("a.warc", "a.WARC.GZ", "enwiki-1-pages-articles1.xml-p1p41242.bz2", "d.xml",
                                 "d.xml.gz", "s.tar", "p.tar.gz", "p.tgz", "2301.00001.gz", "x.pdf")] == [
        "warc", "warc", "wikipedia", "wikipedia", "wikipedia", "arxiv", "arxiv", "arxiv", "arxiv", None]
    assert url_file_name("http://h/a/%2e%2e%2f%2e%2e%2fetc%2fx.tar") == "x.tar"  # no escape from the raw folder
    assert url_file_name("http://h/dir/") == "download"


def test_a_job_can_start_with_a_download_stage(server, tmp_path):
    from curate.app.runner import load_job, run_job

    job_file = tmp_path / "job.yaml"
    job_file.write_text(
        "stages:\n"
        f"  - download_urls: {{list: {_list(tmp_path, [server.url('a/pages.warc.gz')])}, backoff: 0.01}}\n"
        "  - normalize: {}\n"
    )
    outcomes = run_job(load_job(str(job_file)), str(tmp_path / "out"))  # no job input: the first stage makes it
    assert [o.manifest["counts"]["out"] for o in outcomes] == [2, 2]
    assert read_output(outcomes[-1].output)["url"].str.startswith("https://doc.rust-lang.org/").all()


def test_clashing_names_do_not_depend_on_list_order():
    a, b, c = (FetchJob(f"http://h/{d}/x.warc.gz", "x.warc.gz", "warc") for d in "abc")
    other = FetchJob("http://h/a/y.warc.gz", "y.warc.gz", "warc")
    names = {j.url: j.name for j in unique_names([a, other, b])}
    assert names[other.url] == "y.warc.gz"  # only clashing names get a prefix
    assert names[a.url] != names[b.url] and names[a.url].endswith("-x.warc.gz")
    assert {j.url: j.name for j in unique_names([b, a, c, other])} == {**names, c.url: unique_names([a, c])[1].name}
    assert [j.url for j in unique_names([a, other, a])] == [a.url, other.url]  # a URL listed twice: fetched once


def test_a_shared_raw_dir_never_mixes_up_files_of_the_same_name(server, tmp_path):
    page_warc(tmp_path / "www" / "x" / "pages.warc.gz", rust_pages(4)[2:])
    raw = str(tmp_path / "raw")
    for d, expected in (("a", 2), ("x", 2), ("a", 2)):
        settings = {"list": _list(tmp_path, [server.url(f"{d}/pages.warc.gz")]), "raw_dir": raw,
                    "keep_raw": True, **FAST}
        manifest = run_stage("download_urls", settings, (), tmp_path / f"out-{d}")
        assert manifest["download"]["reused"] == 0 and manifest["counts"]["out"] == expected
    urls = [read_output(tmp_path / f"out-{d}")["url"].tolist() for d in "ax"]
    assert urls == [[u for u, _ in rust_pages(2)], [u for u, _ in rust_pages(4)[2:]]]


def test_a_longer_url_list_reruns_the_stage(server, tmp_path):
    """The list is input: adding a URL must not find the output 'up to date'."""
    listing = _list(tmp_path, [server.url("a/pages.warc.gz")])
    first = run_stage("download_urls", {"list": listing, **FAST}, (), tmp_path / "out")
    _list(tmp_path, [server.url("a/pages.warc.gz"), server.url("c/2301.00002.gz")])
    second = run_stage("download_urls", {"list": listing, **FAST}, (), tmp_path / "out")
    assert first["partitions"] == 1 and second["partitions"] == 2
    assert second["fingerprint"] != first["fingerprint"]
