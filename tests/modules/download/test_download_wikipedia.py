"""download_wikipedia against a local dumps mirror (index page, dumpstatus.json, dump files)."""

import pytest

from curate.stages.errors import DataError, SettingsError
from curate.stages.extract.wikipedia import COLUMNS
from tests.conftest import read_output, run_stage
from tests.httpserver import FileServer
from tests.rawdata import BGWIKI, ENWIKI, mediawiki_xml, wiki_mirror

FAST = {"backoff": 0.01, "timeout": 2.0}
EXTRA = mediawiki_xml([{"id": 900, "title": "Extra", "text": "An extra article in the second part."}]).encode()


@pytest.fixture
def mirror(tmp_path):
    import bz2

    root = tmp_path / "www"
    # an older finished dump in two parts, and a newer one still running
    wiki_mirror(root, "en", "20240101", {
        "enwiki-20240101-pages-articles1.xml-p1p41242.bz2": ENWIKI.read_bytes(),
        "enwiki-20240101-pages-articles2.xml-p41243p151573.bz2": bz2.compress(EXTRA),
    })
    wiki_mirror(root, "en", "20240201", {"enwiki-20240201-pages-articles1.xml-p1p41242.bz2": b"partial"},
                status="in-progress")
    wiki_mirror(root, "bg", "20240101", {"bgwiki-20240101-pages-articles.xml.bz2": BGWIKI.read_bytes()})
    with FileServer(root) as server:
        yield server


def test_newest_finished_dump_is_found_and_extracted(mirror, tmp_path):
    manifest = run_stage("download_wikipedia", {"language": "en", "base_url": mirror.url(), **FAST}, (),
                         tmp_path / "out")
    out = read_output(tmp_path / "out")
    assert list(out.columns) == list(COLUMNS)
    assert manifest["partitions"] == 2 and manifest["download"]["files"] == 2
    assert out["id"].tolist() == ["enwiki:217916", "enwiki:3277686", "enwiki:316", "enwiki:9391", "enwiki:4702",
                                  "enwiki:900"]
    assert not any("20240201" in path for path, _, _ in mirror.requests if path.endswith(".bz2"))


def test_utf16_bulgarian_dump_by_date_and_limit(mirror, tmp_path):
    settings = {"language": "bg", "dump_date": "20240101", "base_url": mirror.url(), "limit": 1, **FAST}
    manifest = run_stage("download_wikipedia", settings, (), tmp_path / "out")
    out = read_output(tmp_path / "out")
    assert out["title"].tolist() == ["Григориански календар"] and out["language"].tolist() == ["bg"]
    assert manifest["counts"]["dropped"] == {"not_article": 2}
    assert not any(path.endswith("index.html") or path.endswith("bgwiki/") for path, _, _ in mirror.requests)


def test_unfinished_dump_date_and_corrupt_file(mirror, tmp_path):
    with pytest.raises(DataError, match="20240201 \\(in-progress\\)"):
        run_stage("download_wikipedia", {"dump_date": "20240201", "base_url": mirror.url(), **FAST}, (),
                  tmp_path / "o1")
    # the server's copy no longer matches dumpstatus.json's SHA-1
    part2 = mirror.root / "enwiki" / "20240101" / "enwiki-20240101-pages-articles2.xml-p41243p151573.bz2"
    part2.write_bytes(part2.read_bytes()[:-1] + b"X")
    with pytest.raises(DataError, match="SHA-1"):
        run_stage("download_wikipedia", {"base_url": mirror.url(), **FAST}, (), tmp_path / "o2")
    manifest = run_stage("download_wikipedia", {"base_url": mirror.url(), **FAST}, (), tmp_path / "o3",
                         on_error="skip")
    assert manifest["counts"]["out"] == 5 and manifest["counts"]["dropped"] == {"download_failed": 1}


def test_settings_are_checked():
    from curate.stages.download.wikipedia import DownloadWikipediaSettings

    with pytest.raises(SettingsError, match="dump_date"):
        DownloadWikipediaSettings(dump_date="2024-01-01")
    with pytest.raises(SettingsError, match="language"):
        DownloadWikipediaSettings(language="EN!")
    assert DownloadWikipediaSettings(language="zh-yue").wiki == "zh_yuewiki"


def test_bz2_dump_cut_twice_streams_every_page_once(mirror, tmp_path):
    """Cuts inside the bz2 stream resume at their byte; the articles equal those of the file on disk,
    and the dump's SHA-1 (checked at the last byte) matches."""
    from curate.stages.extract import RawFile
    from curate.stages.extract.wikipedia import ExtractWikipediaSettings, extract_wikipedia_file

    rel = "enwiki/20240101/enwiki-20240101-pages-articles1.xml-p1p41242.bz2"
    size = (mirror.root / rel).stat().st_size
    mirror.fail(rel, f"cut-at:{size // 3}", f"cut-at:{2 * size // 3}")
    run_stage("download_wikipedia", {"base_url": mirror.url(), "limit": 1, **FAST}, (), tmp_path / "out")
    assert [r for _, r, _ in mirror.hits(rel)] == [None, f"bytes={size // 3}-", f"bytes={2 * size // 3}-"]
    out = read_output(tmp_path / "out")
    local = extract_wikipedia_file(RawFile(str(mirror.root / rel), rel.rsplit("/", 1)[1]), ExtractWikipediaSettings())
    local = local[local["_reason"].isna()]
    assert out["id"].tolist() == local["id"].tolist() and out["text"].tolist() == local["text"].tolist()
    assert not list((tmp_path / "out").rglob("*.bz2*"))
