"""The sandbox's overlapped batches: the parent reads on while the child extracts the batch it was sent.

Edge cases: a page that hangs while the parent is away (it is still a ``timeout``, the pages around it
are extracted, the child replaced); a parent away longer than the timeout while the child's answers
fill the pipe (no page is timed out for the parent's absence); a batch abandoned by a failing file
(its answers never reach the next batch); in ``extract warc`` with small batches, a hanging third page
of five and the other four byte-identical to the in-process rows.
"""

from __future__ import annotations

import os
import time

import pytest

from curate.stages.extract.sandbox import PageTimeout, Sandbox
from tests.rawdata import page_warc, rust_pages

T = "tests.modules.extract.sandbox_targets"


def test_a_page_that_hangs_while_the_parent_reads_on_is_a_timeout_and_the_rest_are_extracted():
    with Sandbox(timeout=1.0, memory=None) as box:
        box.call(f"{T}:add", 1, 1)  # started and warm: no first-page retry
        box.submit(f"{T}:hang_if", [("p1",), ("p2",), ("hang",), ("p4",), ("p5",)])
        time.sleep(1.5)  # the parent busy with its input, past the hanging page's timeout
        out = box.collect()
        assert out[:2] + out[3:] == ["p1", "p2", "p4", "p5"]
        assert isinstance(out[2], PageTimeout)
        assert box.started == 2  # the hanging child replaced, once


def test_a_parent_away_longer_than_the_timeout_times_no_page_out():
    # answers bigger than the pipe's buffer: the child waits to write them while the parent is away,
    # and that wait is not counted against a page
    big = "x" * 700_000
    with Sandbox(timeout=1.0, memory=None) as box:
        box.call(f"{T}:add", 1, 1)
        box.submit(f"{T}:add", [(big, str(k)) for k in range(4)])
        time.sleep(2.5)
        assert box.collect() == [big + str(k) for k in range(4)]
        assert box.started == 1


def test_one_batch_at_a_time_and_an_abandoned_batch_never_reaches_the_next():
    with Sandbox(timeout=5.0, memory=None) as box:
        box.submit(f"{T}:add", [(1, 2)])
        with pytest.raises(RuntimeError, match="already in flight"):
            box.submit(f"{T}:add", [(3, 4)])
        box.abandon()  # its caller failed
        assert box.map(f"{T}:add", [(5, 6), (7, 8)]) == [11, 15]
        with pytest.raises(RuntimeError, match="no batch in flight"):
            box.collect()


def _rows(df):
    return [{k: (None if v != v else v) for k, v in r.items()} for r in df.to_dict("records")]  # NaN == NaN


def test_extract_warc_small_batches_a_hanging_third_page_and_identical_rows(tmp_path, monkeypatch):
    from curate.stages.extract import RawFile, warc

    pages = rust_pages(4)
    hang = ("https://x.test/hang", b"<html><body><p>HANG-ME</p></body></html>")
    path = page_warc(tmp_path / "a.warc.gz", pages[:2] + [hang] + pages[2:])
    raw = RawFile(str(path), os.path.basename(path))
    monkeypatch.setattr(warc.SandboxedPages, "BATCH_PAGES", 2)  # batches of 2: the overlap is exercised
    monkeypatch.setattr(warc, "PAGE_OUTCOME", f"{T}:hanging_page")
    # a memory bound of its own: a sandbox of this test alone (the thread keeps one per setting)
    sandboxed = warc.extract_warc_file(raw, warc.ExtractWarcSettings(extract_timeout=1, extract_memory="1998MiB"),
                                       on_error="skip")
    in_process = warc.extract_warc_file(raw, warc.ExtractWarcSettings(extract_timeout=0), on_error="skip")
    assert list(sandboxed["url"]) == [u for u, _ in pages[:2] + [hang] + pages[2:]]
    assert sandboxed["_reason"].iloc[2] == "timeout" and "no result after 1 s" in sandboxed["_detail"].iloc[2]
    keep = [0, 1, 3, 4]
    assert _rows(sandboxed.iloc[keep]) == _rows(in_process.iloc[keep])
