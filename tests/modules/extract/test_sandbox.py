"""The extraction sandbox: a page that hangs, eats memory or crashes its extractor costs a reject,
and the file goes on.

Edge cases: a hang (killed at the timeout, the next call gets a fresh child), a MemoryError under the
bound, a crash (SIGSEGV), an exception of the function (re-raised as itself), a result bigger than a
pipe buffer; in ``extract warc``, a hanging page and a memory-hungry page among good ones in two
files (two partitions), and the sandboxed output byte-identical to the in-process one.
"""

from __future__ import annotations

import time

import pytest

from curate.stages.extract.sandbox import PageCrashed, PageTimeout, PageTooLarge, Sandbox
from tests.conftest import read_output, run_stage
from tests.rawdata import page_warc, rust_pages

T = "tests.modules.extract.sandbox_targets"


def test_results_exceptions_timeouts_memory_and_crashes():
    with Sandbox(timeout=2.0, memory=1 << 30) as box:
        assert box.call(f"{T}:add", 2, 3) == 5
        first = box.call(f"{T}:pid")
        assert box.call(f"{T}:add", "x" * 3_000_000, "y") == "x" * 3_000_000 + "y"  # > a pipe's buffer
        with pytest.raises(ValueError, match="bad page"):
            box.call(f"{T}:fail", "bad page")
        assert box.call(f"{T}:pid") == first  # an exception keeps the child
        started = time.monotonic()
        with pytest.raises(PageTimeout, match="no result after 2 s"):
            box.call(f"{T}:sleep_forever")
        assert time.monotonic() - started < 10
        assert box.call(f"{T}:pid") != first  # a fresh child after the kill
        with pytest.raises(PageTooLarge, match="1,024 MiB"):
            box.call(f"{T}:eat_memory", 4 << 30)
        assert box.call(f"{T}:eat_memory", 1 << 20) == 1 << 20
        with pytest.raises(PageCrashed, match="signal 11"):
            box.call(f"{T}:crash")
        assert box.call(f"{T}:add", 1, 1) == 2
        assert box.started == 4


def test_extract_warc_rejects_hanging_and_hungry_pages_and_goes_on(tmp_path, monkeypatch):
    from curate.stages.extract import warc

    pages = rust_pages(4)
    bad = [("https://x.test/hang", b"<html><body><p>HANG-ME</p></body></html>"),
           ("https://x.test/eat", b"<html><body><p>EAT-MEMORY</p></body></html>")]
    page_warc(tmp_path / "in" / "a.warc.gz", [pages[0], bad[0], pages[1]])
    page_warc(tmp_path / "in" / "b.warc.gz", [pages[2], bad[1], pages[3]])
    monkeypatch.setattr(warc, "PAGE_ROW", f"{T}:hanging_page_row")
    started = time.monotonic()
    manifest = run_stage("extract_warc", {"extract_timeout": 2, "extract_memory": "1GiB"},
                         str(tmp_path / "in" / "*.warc.gz"), tmp_path / "out", on_error="skip")
    assert time.monotonic() - started < 60
    assert manifest["counts"]["in"] == 6 and manifest["counts"]["dropped"] == {"timeout": 1, "too_large": 1}
    assert sorted(read_output(tmp_path / "out")["url"]) == sorted(u for u, _ in pages)
    rejects = read_output(tmp_path / "out" / "_rejects").set_index("_reason")["_detail"]
    assert "a.warc.gz: record" in rejects["timeout"] and "no result after 2 s" in rejects["timeout"]
    assert "b.warc.gz: record" in rejects["too_large"] and "--extract-memory" in rejects["too_large"]


def test_sandboxed_output_equals_in_process_output(tmp_path):
    page_warc(tmp_path / "in" / "a.warc.gz", rust_pages(6))
    run_stage("extract_warc", {"extract_timeout": 0}, str(tmp_path / "in" / "a.warc.gz"), tmp_path / "plain")
    run_stage("extract_warc", {}, str(tmp_path / "in" / "a.warc.gz"), tmp_path / "boxed")
    assert (tmp_path / "plain" / "part-00000.parquet").read_bytes() == \
        (tmp_path / "boxed" / "part-00000.parquet").read_bytes()


def test_extract_wikipedia_rejects_a_hanging_page(tmp_path, monkeypatch):
    from curate.stages.extract import wikipedia
    from tests.rawdata import mediawiki_xml, write_dump

    pages = [{"id": 1, "title": "A", "text": "'''Alpha''' is the first letter."},
             {"id": 2, "title": "B", "text": "This page HANG-ME hangs the parser."},
             {"id": 3, "title": "C", "text": "Gamma is the third letter."}]
    write_dump(tmp_path / "in" / "a.xml", mediawiki_xml(pages[:2]))
    write_dump(tmp_path / "in" / "b.xml", mediawiki_xml(pages[2:]))
    monkeypatch.setattr(wikipedia, "WIKITEXT_TO_TEXT", f"{T}:hanging_wikitext")
    manifest = run_stage("extract_wikipedia", {"extract_timeout": 2}, str(tmp_path / "in" / "*.xml"),
                         tmp_path / "out", on_error="skip")
    assert manifest["counts"]["dropped"] == {"timeout": 1}
    assert sorted(read_output(tmp_path / "out")["title"]) == ["A", "C"]
    [detail] = read_output(tmp_path / "out" / "_rejects")["_detail"]
    assert "a.xml: page 2 ('B')" in detail and "no result after 2 s" in detail


def test_extract_arxiv_rejects_a_hanging_paper(tmp_path, monkeypatch):
    import gzip

    from curate.stages.extract import arxiv
    from tests.rawdata import arxiv_bulk_tar

    hang = gzip.compress(b"\\documentclass{article}\\begin{document}HANG-ME\\end{document}", mtime=0)
    arxiv_bulk_tar(tmp_path / "in" / "a.tar", extra=[("2301/2301.00004.gz", hang)])
    monkeypatch.setattr(arxiv, "PAPER_TEXT", f"{T}:hanging_paper_text")
    manifest = run_stage("extract_arxiv", {"extract_timeout": 2}, str(tmp_path / "in" / "a.tar"),
                         tmp_path / "out", on_error="skip")
    assert manifest["counts"]["dropped"]["timeout"] == 1
    assert sorted(read_output(tmp_path / "out")["id"]) == ["2301.00001", "2301.00002"]
