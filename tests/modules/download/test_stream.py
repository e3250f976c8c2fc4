"""Streaming fetch -> extract: RemoteStream against the local fault server, and the download stages
streaming with nothing on disk, resuming at the exact byte, bounded in flight, resuming a killed
run, keeping raw files only when asked, leaving a user's files alone and never writing secrets.

The oracle for every streamed file is the path-based extractor on the same file read from disk.
"""

import gzip
import json
import logging
import time
import zlib
from concurrent.futures import ThreadPoolExecutor

import pytest

from curate.stages.download.base import FetchJob, stream_extract, stream_file, union_meta
from curate.stages.download.http import DownloadError, DownloadOptions, ForeignFile, TransientDownloadError
from curate.stages.download.stream import RemoteStream
from curate.stages.errors import DataError, SettingsError
from curate.stages.extract import RawFile
from curate.stages.extract.warc import ExtractWarcSettings, extract_warc_file
from curate.stages.secrets import redact_url
from tests.conftest import read_output, run_stage, side
from tests.httpserver import FileServer
from tests.rawdata import damaged_warc, page_warc, rust_pages, warc_record

FAST = DownloadOptions(backoff=0.01, timeout=2.0, retries=3)


@pytest.fixture(scope="module")
def pages():
    return rust_pages(12)


def members(data: bytes) -> list[int]:
    """Start offsets of the gzip members of ``data`` (an independent walk with zlib)."""
    starts, pos = [], 0
    while pos < len(data):
        starts.append(pos)
        d = zlib.decompressobj(wbits=31)
        d.decompress(data[pos:])
        pos = len(data) - len(d.unused_data)
    return starts


def documents(df):
    return list(zip(df["id"], df["url"], df["text"]))


def oracle(path):
    return extract_warc_file(RawFile(str(path), path.name), ExtractWarcSettings())


def stream_docs(url, name, **kw):
    df, outcome, kept = stream_extract(FetchJob(url, name, "warc"), ExtractWarcSettings(), union_meta(["warc"]),
                                       kw.pop("options", FAST), kw.pop("on_error", "raise"), kw.pop("keep", None))
    return df, outcome


def test_cuts_inside_gzip_members_resume_at_the_exact_byte(tmp_path, pages):
    """Three cuts: inside a member's header, inside a member's deflate data, one byte before a member
    ends; every record comes out once, in order, as from the file on disk."""
    www = tmp_path / "www"
    path = page_warc(www / "a.warc.gz", pages[:6])
    data = path.read_bytes()
    starts = members(data)
    assert len(starts) >= 6  # one member per record (plus warcinfo)
    cuts = [starts[1] + 5, (starts[2] + starts[3]) // 2, starts[4] - 1]
    with FileServer(www) as server:
        server.fail("a.warc.gz", *[f"cut-at:{c}" for c in cuts])
        df, outcome = stream_docs(server.url("a.warc.gz"), "a.warc.gz")
        hits = server.hits("a.warc.gz")
    assert documents(df) == documents(oracle(path))
    assert df["url"].tolist() == [u for u, _ in pages[:6]]
    # the first request has no Range, each resume asks for exactly the byte where the cut fell
    assert [r for _, r, _ in hits] == [None] + [f"bytes={c}-" for c in cuts]
    assert outcome["status"] == "resumed" and outcome["bytes"] == len(data) and outcome["attempts"] == 4
    assert not list(tmp_path.glob("*.part"))


def test_cuts_inside_records_of_an_uncompressed_warc(tmp_path, pages):
    www = tmp_path / "www"
    path = page_warc(www / "b.warc", pages[:4], compress=False)
    data = path.read_bytes()
    heads = [i for i in range(len(data)) if data.startswith(b"WARC/1.0\r\n", i)]
    # inside a WARC header line, inside an HTTP header, inside an HTML payload
    cuts = [heads[1] + 3, data.index(b"Content-Type: text/html", heads[2]) + 4, heads[3] + (heads[4] - heads[3]) // 2 if
            len(heads) > 4 else len(data) - 10]
    with FileServer(www) as server:
        server.fail("b.warc", *[f"cut-at:{c}" for c in cuts])
        df, outcome = stream_docs(server.url("b.warc"), "b.warc")
        ranges = [r for _, r, _ in server.hits("b.warc")]
    assert documents(df) == documents(oracle(path))
    assert ranges == [None] + [f"bytes={c}-" for c in cuts]
    assert len(df) == 4 and outcome["bytes"] == len(data)


def test_a_server_ignoring_range_is_skipped_forward(tmp_path, pages):
    www = tmp_path / "www"
    path = page_warc(www / "c.warc.gz", pages[:3])
    cut = members(path.read_bytes())[2] + 7
    with FileServer(www) as server:
        server.fail("c.warc.gz", f"cut-at:{cut}", "ignore-range")
        df, outcome = stream_docs(server.url("c.warc.gz"), "c.warc.gz")
        codes = [s for _, _, s in server.hits("c.warc.gz")]
    assert documents(df) == documents(oracle(path))
    assert codes == [200, 200]


def test_a_file_changed_between_attempts_fails_naming_it(tmp_path, pages):
    www = tmp_path / "www"
    path = page_warc(www / "d.warc.gz", pages[:3])
    data = path.read_bytes()
    with FileServer(www) as server:
        server.fail("d.warc.gz", f"cut-at:{len(data) // 2}")
        stream = RemoteStream(server.url("d.warc.gz"), FAST)
        stream.read(len(data) // 4)
        path.write_bytes(data + b"x")  # republished meanwhile
        with pytest.raises(DownloadError, match="changed while streaming"):
            stream.read(len(data))
        stream.release()


def test_slow_servers_minimum_rate_and_deadline(tmp_path, pages):
    www = tmp_path / "www"
    path = page_warc(www / "e.warc.gz", pages[:2])
    size = path.stat().st_size
    slow = DownloadOptions(backoff=0.01, timeout=2.0, retries=1, min_rate=4096, rate_window=0.3)
    with FileServer(www, trickle_bytes=16) as server:
        # one trickling answer: dropped after the rate window, resumed at its byte, then complete
        server.fail("e.warc.gz", "trickle")
        df, outcome = stream_docs(server.url("e.warc.gz"), "e.warc.gz", options=slow)
        assert documents(df) == documents(oracle(path))
        ranges = [r for _, r, _ in server.hits("e.warc.gz")]
        assert ranges[0] is None and ranges[1].startswith("bytes=") and 0 < int(ranges[1][6:-1]) < size
        # a server that stays slow: slowness counts as failure even though bytes arrive
        server.fail("e.warc.gz", "trickle", "trickle", "trickle")
        with pytest.raises(DownloadError, match="transfer rate .* below the minimum"):
            stream_docs(server.url("e.warc.gz"), "e.warc.gz", options=slow)
        server.fail("e.warc.gz", "trickle", "trickle", "trickle")
        deadline = DownloadOptions(backoff=0.01, timeout=2.0, retries=1, deadline=0.25, min_rate=0)
        n = len(server.hits("e.warc.gz"))
        with pytest.raises(DownloadError, match="deadline of 0.25s"):
            stream_docs(server.url("e.warc.gz"), "e.warc.gz", options=deadline)
        assert len(server.hits("e.warc.gz")) == n + 2  # retries=1: two attempts, each cut at its deadline
        # small documents (listings, dumpstatus.json) are held to the same pace
        from curate.stages.download.http import get_bytes

        server.fail("e.warc.gz", "trickle", "trickle", "trickle")
        with pytest.raises(DownloadError, match="below the minimum"):
            get_bytes(server.url("e.warc.gz"), slow)


def test_a_damaged_member_streamed_loses_only_its_record(tmp_path, pages):
    """Issue 26: as from disk, the damaged member's record is one corrupt_record reject naming the
    compressed offset, every record after it is read; under raise the stream fails naming it."""
    www = tmp_path / "www"
    path = www / "d.warc.gz"
    offset = damaged_warc(path, [warc_record(u, h) for u, h in pages[:5]], 2, 0.5)
    with FileServer(www) as server:
        df, outcome = stream_docs(server.url("d.warc.gz"), "d.warc.gz", on_error="skip")
        with pytest.raises(DataError, match=rf"/d\.warc\.gz: gzip member at compressed byte {offset} is damaged"):
            stream_docs(server.url("d.warc.gz"), "d.warc.gz")
    assert documents(df) == documents(extract_warc_file(RawFile(str(path), path.name), ExtractWarcSettings(), "skip"))
    assert df.loc[df["_reason"].isna(), "url"].tolist() == [u for u, _ in pages[:5] if u != pages[2][0]]
    assert df["_reason"].dropna().tolist() == ["corrupt_record"]
    assert f"compressed byte {offset}" in df["_detail"].dropna().iloc[0]
    assert outcome["status"] == "downloaded" and outcome["bytes"] == path.stat().st_size
    # the stage: every record counted, and under raise no _SUCCESS
    with FileServer(www) as server:
        (tmp_path / "urls.txt").write_text(server.url("d.warc.gz") + "\n")
        settings = {"list": str(tmp_path / "urls.txt"), **SETTINGS}
        manifest = run_stage("download_urls", settings, (), tmp_path / "out", on_error="skip")
        with pytest.raises(DataError, match=rf"/d\.warc\.gz: gzip member at compressed byte {offset} is damaged"):
            run_stage("download_urls", settings, (), tmp_path / "out2")
    assert manifest["counts"] == {"in": 5, "out": 4, "dropped": {"corrupt_record": 1}}
    assert manifest["pending"] == 0 and (tmp_path / "out" / "_SUCCESS").exists()
    assert not (tmp_path / "out2" / "_SUCCESS").exists()


def test_a_content_length_shorter_than_the_file_fails_for_now(tmp_path, pages):
    """Issue 26: an answer that announces half the file looked complete: the gzip broke off, one
    truncated_file reject, exit 0 under raise. The server has more: a transient failure (raise fails,
    skip rejects, the kept copy goes); a file truncated on the server stays the file's own break."""
    www = tmp_path / "www"
    path = page_warc(www / "s.warc.gz", pages[:4])
    data = path.read_bytes()
    url = None
    with FileServer(www) as server:
        url = server.url("s.warc.gz")
        server.fail("s.warc.gz", "short-length")
        with pytest.raises(TransientDownloadError, match=rf"s\.warc\.gz: .*ended at byte {len(data) // 2} "
                                                         r"\(its Content-Length\) and the server has more"):
            stream_docs(url, "s.warc.gz")
        server.fail("s.warc.gz", "short-length")
        raw = tmp_path / "raw"
        df, outcome = stream_docs(url, "s.warc.gz", on_error="skip", keep=str(raw / "s.warc.gz"))
        assert df["_reason"].tolist() == ["download_failed"] and "(transient" in df["_detail"][0]
        assert outcome["status"] == "failed" and outcome["transient"]
        assert not (raw / "s.warc.gz").exists() and not (raw / "s.warc.gz.part").exists()
        # truncated on the server: one request past the end (416) says the file ends there
        path.write_bytes(data[: len(data) * 2 // 3])
        df, outcome = stream_docs(url, "s.warc.gz")
        assert df["_reason"].dropna().tolist()[-1] == "truncated_file"
        assert df["_reason"].isna().sum() >= 2 and outcome["status"] == "downloaded"
        assert server.hits("s.warc.gz")[-2:] == [("s.warc.gz", None, 200),
                                                 ("s.warc.gz", f"bytes={len(data) * 2 // 3}-", 416)]


@pytest.mark.parametrize("where", ["inside-a-member", "at-a-member-start"])
def test_a_206_that_restarts_at_byte_0_fails_for_now(tmp_path, pages, where):
    """Issue 26: a server answering a Range request with the file's first bytes broke the gzip (one
    truncated_file reject, exit 0 under raise) or, resumed at a member start, read records twice."""
    www = tmp_path / "www"
    path = page_warc(www / "r.warc.gz", pages[:6])
    starts = members(path.read_bytes())
    cut = starts[3] + (20 if where == "inside-a-member" else 0)
    with FileServer(www) as server:
        url = server.url("r.warc.gz")
        server.fail("r.warc.gz", f"cut-at:{cut}", "restart")
        with pytest.raises(TransientDownloadError, match=rf"r\.warc\.gz: the answer to Range bytes={cut}- starts "
                                                         r"over with the file's first 256 bytes"):
            stream_docs(url, "r.warc.gz")
        server.fail("r.warc.gz", f"cut-at:{cut}", "restart")
        raw = tmp_path / "raw" / "r.warc.gz"
        df, outcome = stream_docs(url, "r.warc.gz", on_error="skip", keep=str(raw))
        assert df["_reason"].tolist() == ["download_failed"] and outcome["transient"]
        # not a byte of the bad answer was kept: the rerun goes on from the cut, and reads the file whole
        assert raw.with_name("r.warc.gz.part").stat().st_size == cut
        df, _ = stream_docs(url, "r.warc.gz", keep=str(raw))
        assert server.hits("r.warc.gz")[-1][1] == f"bytes={cut}-"
    assert documents(df) == documents(oracle(path))
    assert raw.read_bytes() == path.read_bytes()


@pytest.fixture
def fresh_s3fs():
    """s3fs caches its filesystems by arguments, not by endpoint: none may outlive this test's server."""
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()
    yield
    s3fs.S3FileSystem.clear_instance_cache()


def test_s3_stream_with_a_dropped_read(tmp_path, pages, s3_endpoint, monkeypatch, fresh_s3fs):
    import s3fs

    path = page_warc(tmp_path / "f.warc.gz", pages[:4])
    data = path.read_bytes()
    fs = s3fs.S3FileSystem(anon=False, client_kwargs={"endpoint_url": s3_endpoint})
    fs.mkdir("stream-src")  # moto keeps buckets across tests in one process: names of our own
    fs.pipe("stream-src/cc/f.warc.gz", data)
    real = s3fs.S3FileSystem.cat_file
    calls = []

    def flaky(self, key, start=None, end=None, **kw):
        calls.append(start)
        if len(calls) == 3:
            raise ConnectionResetError("connection reset by peer")
        return real(self, key, start=start, end=end, **kw)

    monkeypatch.setattr(s3fs.S3FileSystem, "cat_file", flaky)
    options = DownloadOptions(backoff=0.01, retries=2, s3_block_bytes=4096, requester_pays=True,
                              s3_endpoint_url=s3_endpoint)
    df, outcome = stream_docs("s3://stream-src/cc/f.warc.gz", "f.warc.gz", options=options)
    assert documents(df) == documents(oracle(path))
    assert calls[2] == calls[3] and calls[3] > 0  # the failed ranged GET is asked again at its byte
    assert calls == sorted(calls) and len(calls) == -(-len(data) // 4096) + 1
    assert outcome["bytes"] == len(data)


# --------------------------------------------------------------------------- the stages


@pytest.fixture
def mirror(tmp_path, pages):
    """Four WARCs of three pages, served on 127.0.0.1, and a list of their URLs."""
    www = tmp_path / "www"
    paths = [page_warc(www / f"w{i}.warc.gz", pages[3 * i: 3 * i + 3]) for i in range(4)]
    with FileServer(www) as server:
        server.paths = paths
        lst = tmp_path / "urls.txt"
        lst.write_text("".join(server.url(p.name) + "\n" for p in paths))
        server.list = str(lst)
        yield server


SETTINGS = {"backoff": 0.01, "timeout": 2.0, "retries": 3}


def disk_files(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def test_download_urls_streams_with_no_raw_bytes_on_disk(mirror, tmp_path, pages):
    for p in mirror.paths[:2]:
        mirror.fail(p.name, f"cut-at:{members(p.read_bytes())[2] + 3}")
    out = tmp_path / "out"
    manifest = run_stage("download_urls", {"list": mirror.list, **SETTINGS}, (), out)
    df = read_output(out)
    assert df["url"].tolist() == [u for u, _ in pages]
    assert manifest["counts"] == {"in": 12, "out": 12, "dropped": {}}
    d = manifest["download"]
    assert (d["files"], d["downloaded"], d["resumed"], d["failed"], d["kept_raw"]) == (4, 2, 2, 0, False)
    assert d["bytes"] == sum(p.stat().st_size for p in mirror.paths)
    # nothing but the dataset: no _raw folder, no .part, no sidecar
    assert not any(f.startswith("_raw") or f.endswith((".part", ".url", ".gz")) for f in disk_files(out))


def test_max_inflight_bounds_streams_per_worker(mirror, tmp_path):
    from curate.stages.output import Output

    mirror.delay = 0.2
    out = Output.at(str(tmp_path / "o"))
    out.begin({"kind": "stage", "stage": "download_urls"})
    options = DownloadOptions(backoff=0.01, timeout=5.0, max_inflight=2)
    meta = union_meta(["warc"])
    jobs = [FetchJob(mirror.url(p.name), p.name, "warc") for p in mirror.paths]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda ij: stream_file(ij[1], ij[0], out, ExtractWarcSettings(), meta, options,
                                                       "raise", None, None, "jsonl", "run"), enumerate(jobs)))
    assert mirror.max_active == 2
    assert [r["out"] for r in results] == [3, 3, 3, 3]


def test_a_failed_run_resumes_skipping_finished_files(mirror, tmp_path, pages):
    """The journal of the stage output says which files are finished; only the others stream again."""
    broken = mirror.paths[2]
    data = broken.read_bytes()
    broken.unlink()  # a 404: the run fails (on_error raise) after the files before it
    out = tmp_path / "out"
    with pytest.raises(DataError, match="w2.warc.gz: HTTP 404"):
        run_stage("download_urls", {"list": mirror.list, **SETTINGS}, (), out)
    assert not (out / "_SUCCESS").exists()
    journal = {p.name for p in (side(out, "_state")).iterdir()}
    finished = {i for i in range(4) if {f"fetch-{i:05d}.json", f"part-{i:05d}.json"} <= journal}
    assert finished and 2 not in finished
    broken.write_bytes(data)
    before = {p.name: len(mirror.hits(p.name)) for p in mirror.paths}
    manifest = run_stage("download_urls", {"list": mirror.list, **SETTINGS}, (), out)
    again = [len(mirror.hits(p.name)) - before[p.name] for p in mirror.paths]
    assert again == [0 if i in finished else 1 for i in range(4)]
    assert manifest["download"]["finished"] == len(finished)
    assert read_output(out)["url"].tolist() == [u for u, _ in pages]


def test_keep_raw_writes_as_it_streams_and_a_later_run_reuses_or_resumes(mirror, tmp_path, pages):
    raw = tmp_path / "raw"
    first = mirror.paths[0]
    size = first.stat().st_size
    mirror.fail(first.name, f"cut-at:{size // 2}")
    settings = {"list": mirror.list, "keep_raw": True, "raw_dir": str(raw), **SETTINGS, "retries": 0}
    m1 = run_stage("download_urls", settings, (), tmp_path / "o1", on_error="skip")
    # retries 0: the cut file failed, its .part (with its sidecar) stays for a later run
    assert m1["download"]["failed"] == 1 and m1["counts"]["dropped"] == {"download_failed": 1}
    assert (raw / f"{first.name}.part").stat().st_size == size // 2
    assert {p.name for p in raw.iterdir()} >= {p.name for p in mirror.paths[1:]}
    for p in mirror.paths[1:]:
        assert (raw / p.name).read_bytes() == p.read_bytes()
        assert (raw / f"{p.name}.url").read_text().strip() == mirror.url(p.name)
    n = {p.name: len(mirror.hits(p.name)) for p in mirror.paths}
    m2 = run_stage("download_urls", settings, (), tmp_path / "o2")
    assert [r for _, r, _ in mirror.hits(first.name)][n[first.name]:] == [f"bytes={size // 2}-"]
    assert all(len(mirror.hits(p.name)) == n[p.name] for p in mirror.paths[1:])  # read from RAW
    d = m2["download"]
    assert (d["reused"], d["resumed"]) == (3, 1)
    assert (raw / first.name).read_bytes() == first.read_bytes()
    assert read_output(tmp_path / "o2")["url"].tolist() == [u for u, _ in pages]


def test_keep_raw_inside_the_output_is_listed_in_its_manifest(mirror, tmp_path):
    out = tmp_path / "out"
    manifest = run_stage("download_urls", {"list": mirror.list, "keep_raw": True, **SETTINGS}, (), out)
    listed = {r["path"]: r for r in manifest["outputs"]}
    for p in mirror.paths:
        assert listed[f"_raw/{p.name}"]["bytes"] == p.stat().st_size
        assert f"_raw/{p.name}.url" in listed
    from curate.stages.output import file_checksum

    for rel, rec in listed.items():  # checksums computed while streaming equal a second read's
        with open(out / rel, "rb") as f:
            assert file_checksum(f) == (rec["bytes"], rec["xxh3_128"])
    from curate.app.cli import main

    assert main(["verify", str(out), "--checksums"]) == 0
    # a rerun (a lost _SUCCESS) accepts its own _raw folder and reads the kept files
    (out / "_SUCCESS").unlink()
    n = len(mirror.requests)
    again = run_stage("download_urls", {"list": mirror.list, "keep_raw": True, **SETTINGS}, (), out)
    assert len(mirror.requests) == n and again["counts"] == manifest["counts"]


def test_a_failed_kept_file_inside_the_output_stays_the_outputs(mirror, tmp_path):
    """A cut with no retries left: the .part in OUTPUT/_raw is still claimed by the journal, so the
    next run (other settings) is not refused and cleans it up."""
    first = mirror.paths[0]
    mirror.fail(first.name, f"cut-at:{first.stat().st_size // 2}")
    out = tmp_path / "out"
    settings = {"list": mirror.list, "keep_raw": True, **SETTINGS}
    m1 = run_stage("download_urls", {**settings, "retries": 0}, (), out, on_error="skip")
    assert m1["counts"]["dropped"] == {"download_failed": 1}
    m2 = run_stage("download_urls", settings, (), out, on_error="skip")
    assert m2["counts"]["dropped"] == {} and m2["counts"]["out"] == 12
    assert not list((out / "_raw").glob("*.part"))


def test_raw_dir_with_foreign_files_is_refused_and_left_alone(mirror, tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    mine = raw / mirror.paths[1].name
    mine.write_bytes(b"the user's own file")
    other = raw / "notes.txt"
    other.write_text("keep me")
    settings = {"list": mirror.list, "keep_raw": True, "raw_dir": str(raw), **SETTINGS}
    with pytest.raises(ForeignFile, match=f"{mine}.*not downloaded by curate") as e:
        run_stage("download_urls", settings, (), tmp_path / "out")
    assert isinstance(e.value, SettingsError) and e.value.exit_code == 2
    assert not mirror.requests and not (tmp_path / "out" / "part-00000.jsonl").exists()
    # without --keep-raw nothing is written there: the run goes on and never reads the file
    run_stage("download_urls", {**settings, "keep_raw": False}, (), tmp_path / "out2")
    assert len(mirror.hits(mine.name)) == 1
    assert sorted(p.name for p in raw.iterdir()) == sorted([mine.name, "notes.txt"])
    assert mine.read_bytes() == b"the user's own file" and other.read_text() == "keep me"


def test_no_secrets_in_logs_manifests_rejects_or_sidecars(mirror, tmp_path, caplog):
    secret_urls = [mirror.url(mirror.paths[0].name).replace("http://", "http://alice:hunter2@")
                   + "?X-Amz-Signature=deadbeef&X-Amz-Credential=AKIAABCDEFGHIJKLMNOP%2Fx",
                   mirror.url("missing.warc.gz") + "?sig=s3cr3t&token=t0k3n"]
    lst = tmp_path / "secret.txt"
    lst.write_text("\n".join(secret_urls) + "\n")
    out, raw = tmp_path / "out", tmp_path / "raw"
    with caplog.at_level(logging.INFO):
        run_stage("download_urls", {"list": str(lst), "keep_raw": True, "raw_dir": str(raw), **SETTINGS,
                                    "retries": 1}, (), out, on_error="skip")
    secrets = ("hunter2", "deadbeef", "AKIAABCDEFGHIJKLMNOP", "s3cr3t", "t0k3n")
    written = {p: p.read_bytes() for p in [*out.rglob("*"), *raw.rglob("*")] if p.is_file()}
    for p, data in written.items():
        for s in secrets:
            assert s.encode() not in data, (p, s)
    rejects = read_output(side(out, "_rejects"))
    assert rejects["_reason"].tolist() == ["download_failed"]
    assert "sig=***&token=***" in rejects["_detail"][0]
    sidecar = (raw / f"{mirror.paths[0].name}.url").read_text()
    assert "alice:***@" in sidecar and "X-Amz-Signature=***" in sidecar
    # a failed download leaves no sidecar behind
    assert not (raw / "missing.warc.gz.url").exists()
    # the log formatter's filter redacts what a record would print
    from curate.app.logs import RedactFilter

    records = [r for r in caplog.records if "missing.warc.gz" in r.getMessage()]
    assert records
    for r in records:
        RedactFilter().filter(r)
        assert not any(s in r.getMessage() for s in secrets)


def test_redact_url_cases():
    # a task's arguments appear in Dask's "Compute Failed" log lines
    assert "hunter2" not in repr(FetchJob("https://a:hunter2@h/x.warc.gz", "x.warc.gz", "warc"))
    cases = {
        "https://user:pass@host/p?a=1": "https://user:***@host/p?a=1",
        "https://tok@host/p": "https://***@host/p",
        "s3://b/k?X-Amz-Signature=abc&X-Amz-Date=1&X-Amz-Security-Token=zz":
            "s3://b/k?X-Amz-Signature=***&X-Amz-Date=1&X-Amz-Security-Token=***",
        "GET /k?Signature=x&AWSAccessKeyId=AKIAABCDEFGHIJKLMNOP failed": "GET /k?Signature=***&AWSAccessKeyId=*** failed",
        "https://h/a?sig=1;token=2#frag": "https://h/a?sig=***;token=***#frag",
        "aws_secret_access_key=abc/def": "aws_secret_access_key=***",
        "no url here, user@example.org": "no url here, user@example.org",
        "https://h/p@q?keep=1": "https://h/p@q?keep=1",
    }
    for raw, want in cases.items():
        assert redact_url(raw) == want


def test_commoncrawl_listing_is_not_landed(tmp_path, pages):
    from tests.rawdata import cc_mirror

    www = tmp_path / "www"
    warcs = {f"CC-MAIN-2023120{i}-0000{i}.warc.gz": page_warc(tmp_path / "b" / f"{i}.warc.gz",
                                                               pages[2 * i: 2 * i + 2]).read_bytes()
             for i in range(2)}
    rels = cc_mirror(www, "CC-MAIN-2023-50", warcs)
    with FileServer(www) as server:
        server.fail(rels[1], f"cut-at:{members(warcs[rels[1].rsplit('/', 1)[1]])[1] + 2}")
        m = run_stage("download_commoncrawl", {"snapshots": "CC-MAIN-2023-50", "base_url": server.url(), **SETTINGS},
                      (), tmp_path / "out")
    assert m["download"]["resumed"] == 1 and m["counts"]["out"] == 4
    assert disk_files(tmp_path / "out") == sorted(disk_files(tmp_path / "out"))
    assert not any(".gz" in f for f in disk_files(tmp_path / "out"))
    assert json.loads((tmp_path / "out" / "_manifest.json").read_text())["status"] == "complete"
    assert gzip  # the listing was gzip on the server only


@pytest.mark.slow
def test_a_killed_run_resumes_where_it_stopped(mirror, tmp_path, pages):
    """kill -9 while a file trickles in, --keep-raw into the output: the rerun skips the finished files
    (journal), resumes the killed file from its kept .part with Range, and the output is complete."""
    import os
    import signal
    import subprocess

    from tests.conftest import CURATE, ROOT

    slow = mirror.paths[3]
    mirror.trickle_bytes = 4096
    mirror.fail(slow.name, "trickle")
    out = tmp_path / "out"
    cmd = [*CURATE, "download", "urls", "--list", mirror.list, "--output", str(out), "--keep-raw",
           "--workers", "1", "--min-rate", "0", "--backoff", "0.01"]
    proc = subprocess.Popen(cmd, cwd=ROOT, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    part = out / "_raw" / f"{slow.name}.part"
    deadline = time.time() + 120
    try:
        while not (part.exists() and part.stat().st_size >= 8192):
            assert proc.poll() is None and time.time() < deadline, "the slow file never started"
            time.sleep(0.05)
    finally:  # a failed wait must not leave the run trickling on after the test
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    state = {p.name for p in (side(out, "_state")).iterdir()}
    finished = [i for i in range(4) if f"part-{i:05d}.json" in state and
                json.loads((side(out, "_state") / f"part-{i:05d}.json").read_text())["status"] == "done"]
    before = {p.name: len(mirror.hits(p.name)) for p in mirror.paths}
    kept = part.stat().st_size
    # the rerun in this process (same settings, so the same fingerprint; the dead run's lock is taken over)
    manifest = run_stage("download_urls", {"list": mirror.list, "keep_raw": True, "min_rate": "0", "backoff": 0.01},
                         (), out)
    assert manifest["download"]["finished"] == len(finished)
    again = {p.name: mirror.hits(p.name)[before[p.name]:] for p in mirror.paths}
    for i in finished:
        assert again[mirror.paths[i].name] == []
    assert [r for _, r, _ in again[slow.name]] == [f"bytes={kept}-"]
    assert read_output(out)["url"].tolist() == [u for u, _ in pages]
    assert (out / "_raw" / slow.name).read_bytes() == slow.read_bytes()


def test_download_streams_into_an_object_store_output(mirror, tmp_path, pages, s3_endpoint, monkeypatch,
                                                      fresh_s3fs):
    """--output s3://...: parts PUT whole, journal and manifest there, nothing local; a rerun after a
    lost _SUCCESS streams nothing again."""
    import fsspec

    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    fs = fsspec.filesystem("s3", skip_instance_cache=True)
    fs.mkdir("stream-out")
    m = run_stage("download_urls", {"list": mirror.list, **SETTINGS}, (), "s3://stream-out/web")
    assert m["counts"]["out"] == 12 and m["download"]["downloaded"] == 4
    names = {p.rsplit("/", 1)[1] for p in fs.find("stream-out/web")}
    assert {"_SUCCESS", "_manifest.json", "part-00000.parquet"} <= names
    assert "fetch-00003.json" in {p.rsplit("/", 1)[1] for p in fs.find("stream-out/web.side/_state")}
    n = len(mirror.requests)
    fs.rm("stream-out/web/_SUCCESS")
    again = run_stage("download_urls", {"list": mirror.list, **SETTINGS}, (), "s3://stream-out/web")
    assert len(mirror.requests) == n and again["download"]["finished"] == 4
    with pytest.raises(SettingsError, match="local --raw-dir"):
        run_stage("download_urls", {"list": mirror.list, "keep_raw": True, **SETTINGS}, (), "s3://stream-out/web2")
