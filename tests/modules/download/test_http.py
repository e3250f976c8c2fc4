"""The resumable downloader against a local HTTP server with injected faults, and moto's S3."""

import builtins
import errno
import hashlib
import os

import dask
import pytest

from curate.stages.download import http
from curate.stages.download.http import DownloadError, DownloadOptions, ForeignFile, download, get_bytes
from curate.stages.errors import DataError
from tests.httpserver import FileServer

FAST = DownloadOptions(retries=3, backoff=0.01, timeout=1.0, chunk_bytes=4096)
DATA = bytes(range(256)) * 2000  # 512000 bytes


@pytest.fixture
def server(tmp_path):
    (tmp_path / "www" / "d").mkdir(parents=True)
    (tmp_path / "www" / "d" / "file.bin").write_bytes(DATA)
    with FileServer(tmp_path / "www", stall_seconds=1.5) as srv:
        yield srv


def _killed_run(dest, data, url):
    """What a killed run leaves: a .part file and the sidecar naming its URL."""
    (dest.parent / (dest.name + ".part")).write_bytes(data)
    (dest.parent / (dest.name + ".url")).write_text(url + "\n")


def test_download_then_skip_when_complete(server, tmp_path):
    dest = tmp_path / "out" / "file.bin"
    r = download(server.url("d/file.bin"), str(dest), FAST)
    assert r.status == "downloaded" and r.bytes == len(DATA) and dest.read_bytes() == DATA
    assert not os.path.exists(str(dest) + ".part")
    again = download(server.url("d/file.bin"), str(dest), FAST)
    assert again.status == "skipped" and len(server.requests) == 1  # no request for a complete file


def test_a_file_of_the_same_name_from_another_url_is_not_skipped(server, tmp_path):
    (tmp_path / "www" / "e").mkdir()
    (tmp_path / "www" / "e" / "file.bin").write_bytes(DATA[::-1])
    dest = tmp_path / "out" / "file.bin"
    download(server.url("d/file.bin"), str(dest), FAST)
    r = download(server.url("e/file.bin"), str(dest), FAST)
    assert r.status == "downloaded" and dest.read_bytes() == DATA[::-1]
    assert (tmp_path / "out" / "file.bin.url").read_text().strip() == server.url("e/file.bin")
    assert download(server.url("e/file.bin"), str(dest), FAST).status == "skipped"
    assert len(server.requests) == 2
    # a file of unknown origin (no sidecar, e.g. copied in by hand) is the user's: neither trusted nor touched
    (tmp_path / "out" / "file.bin.url").unlink()
    dest.write_bytes(b"mine")
    with pytest.raises(ForeignFile, match="not downloaded by curate"):
        download(server.url("e/file.bin"), str(dest), FAST)
    assert dest.read_bytes() == b"mine" and len(server.requests) == 2


def test_a_part_file_of_another_url_is_not_resumed(server, tmp_path):
    _killed_run(tmp_path / "f", b"x" * 1000, server.url("other/file.bin"))
    r = download(server.url("d/file.bin"), str(tmp_path / "f"), FAST)
    assert r.status == "downloaded" and (tmp_path / "f").read_bytes() == DATA
    assert server.requests == [("d/file.bin", None, 200)]  # no Range: started over
    (tmp_path / "g.part").write_bytes(b"x" * 1000)  # no sidecar: unknown origin, neither resumed nor touched
    with pytest.raises(ForeignFile):
        download(server.url("d/file.bin"), str(tmp_path / "g"), FAST)
    assert (tmp_path / "g.part").read_bytes() == b"x" * 1000 and not (tmp_path / "g").exists()


def test_500_twice_then_200(server, tmp_path):
    server.fail("d/file.bin", "500", "500")
    r = download(server.url("d/file.bin"), str(tmp_path / "f"), FAST)
    assert (tmp_path / "f").read_bytes() == DATA
    assert r.attempts == 3 and [s for _, _, s in server.requests] == [500, 500, 200]


def test_connection_cut_mid_file_resumes_with_range(server, tmp_path):
    server.fail("d/file.bin", "cut")
    r = download(server.url("d/file.bin"), str(tmp_path / "f"), FAST)
    assert (tmp_path / "f").read_bytes() == DATA
    assert r.status == "resumed"
    (_, first_range, first), (_, second_range, second) = server.requests
    assert first_range is None and first == 200
    offset = int(second_range.removeprefix("bytes=").rstrip("-"))
    assert 0 < offset <= len(DATA) // 2 and second == 206


def test_a_killed_run_resumes_from_its_part_file(server, tmp_path):
    _killed_run(tmp_path / "f", DATA[:1000], server.url("d/file.bin"))
    r = download(server.url("d/file.bin"), str(tmp_path / "f"), FAST)
    assert r.status == "resumed" and (tmp_path / "f").read_bytes() == DATA
    assert server.requests == [("d/file.bin", "bytes=1000-", 206)]


def test_a_complete_part_file_is_finished_by_a_416(server, tmp_path):
    _killed_run(tmp_path / "f", DATA, server.url("d/file.bin"))
    download(server.url("d/file.bin"), str(tmp_path / "f"), FAST)
    assert (tmp_path / "f").read_bytes() == DATA and [s for _, _, s in server.requests] == [416]


def test_server_ignoring_range_starts_over(server, tmp_path):
    _killed_run(tmp_path / "f", b"stale bytes from an older copy", server.url("d/file.bin"))
    server.fail("d/file.bin", "ignore-range")
    download(server.url("d/file.bin"), str(tmp_path / "f"), FAST)
    assert (tmp_path / "f").read_bytes() == DATA


def test_timeout_is_retried(server, tmp_path):
    server.fail("d/file.bin", "stall")
    r = download(server.url("d/file.bin"), str(tmp_path / "f"), DownloadOptions(backoff=0.01, timeout=0.5))
    assert (tmp_path / "f").read_bytes() == DATA and r.attempts == 2


def test_404_fails_at_once_naming_the_url(server, tmp_path):
    with pytest.raises(DownloadError, match=r"d/missing\.bin: HTTP 404"):
        download(server.url("d/missing.bin"), str(tmp_path / "f"), FAST)
    assert len(server.requests) == 1 and not (tmp_path / "f").exists()


def test_retries_run_out(server, tmp_path):
    server.fail("d/file.bin", *["503"] * 10)
    with pytest.raises(DownloadError, match=r"file\.bin: HTTP 503.*gave up after 4"):
        download(server.url("d/file.bin"), str(tmp_path / "f"), FAST)
    assert len(server.requests) == 4 and not (tmp_path / "f").exists()


def test_listing_size_and_sha1_are_checked(server, tmp_path):
    with pytest.raises(DownloadError, match="listing says 10"):
        download(server.url("d/file.bin"), str(tmp_path / "a"), FAST, expected_size=10)
    with pytest.raises(DownloadError, match="SHA-1"):
        download(server.url("d/file.bin"), str(tmp_path / "b"), FAST, sha1="0" * 40)
    good = hashlib.sha1(DATA).hexdigest()
    download(server.url("d/file.bin"), str(tmp_path / "c"), FAST, expected_size=len(DATA), sha1=good)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists() and (tmp_path / "c").exists()


def test_unsupported_scheme(tmp_path):
    with pytest.raises(DownloadError, match="unsupported URL scheme"):
        download("ftp://example.org/x", str(tmp_path / "x"))


def test_per_worker_concurrency_limit(tmp_path):
    for i in range(4):
        (tmp_path / "www" / f"{i}.bin").parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "www" / f"{i}.bin").write_bytes(DATA[:1000])
    with FileServer(tmp_path / "www", delay=0.2) as srv:
        opts = DownloadOptions(max_inflight=1, backoff=0.01)
        tasks = [dask.delayed(download)(srv.url(f"{i}.bin"), str(tmp_path / "o" / f"{i}.bin"), opts)
                 for i in range(4)]
        with dask.config.set(scheduler="threads", num_workers=4):
            dask.compute(*tasks)
        assert srv.max_active == 1 and len(srv.requests) == 4


@pytest.mark.slow
def test_s3_requester_pays_anonymous_and_resume(tmp_path, s3_endpoint):
    import boto3

    endpoint = s3_endpoint
    s3 = boto3.client("s3", endpoint_url=endpoint)
    s3.create_bucket(Bucket="paid")
    s3.put_object(Bucket="paid", Key="src/a.tar", Body=DATA)
    s3.put_bucket_request_payment(Bucket="paid", RequestPaymentConfiguration={"Payer": "Requester"})
    s3.create_bucket(Bucket="open")
    s3.put_object(Bucket="open", Key="b.bin", Body=DATA[:5000], ACL="public-read")
    paid = DownloadOptions(requester_pays=True, s3_endpoint_url=endpoint, backoff=0.01, chunk_bytes=100_000)
    r = download("s3://paid/src/a.tar", str(tmp_path / "a.tar"), paid)
    assert r.status == "downloaded" and (tmp_path / "a.tar").read_bytes() == DATA
    # anonymous is refused by a requester-pays bucket: a permanent error, not retried forever
    anon = DownloadOptions(s3_endpoint_url=endpoint, backoff=0.01, retries=1)
    with pytest.raises(DownloadError, match="s3://paid/src/a.tar"):
        download("s3://paid/src/a.tar", str(tmp_path / "anon.tar"), anon)
    # a killed run left a .part: only the rest is fetched
    _killed_run(tmp_path / "b.tar", DATA[:123_456], "s3://paid/src/a.tar")
    r = download("s3://paid/src/a.tar", str(tmp_path / "b.tar"), paid)
    assert r.status == "resumed" and (tmp_path / "b.tar").read_bytes() == DATA
    open_opts = DownloadOptions(s3_endpoint_url=endpoint, backoff=0.01)
    download("s3://open/b.bin", str(tmp_path / "b.bin"), open_opts)
    assert (tmp_path / "b.bin").read_bytes() == DATA[:5000]
    with pytest.raises(DownloadError, match="s3://open/nope"):
        download("s3://open/nope", str(tmp_path / "nope"), open_opts)


def test_get_bytes_stops_past_max_bytes(server):
    assert get_bytes(server.url("d/file.bin"), FAST, max_bytes=len(DATA)) == DATA
    with pytest.raises(DownloadError, match=r"d/file\.bin: larger than 1000 bytes"):
        get_bytes(server.url("d/file.bin"), FAST, max_bytes=1000)  # told by Content-Length
    server.fail("d/file.bin", "endless")  # no Content-Length, and no end
    with pytest.raises(DownloadError, match="larger than 1048576 bytes"):
        get_bytes(server.url("d/file.bin"), FAST, max_bytes=1 << 20)
    assert server.sent["d/file.bin"] < 64 << 20  # it hung up early (the server would send 256 MiB)


class _FakeS3:
    """s3fs's info/cat_file, raising the given errors first (one per call to info)."""

    def __init__(self, errors):
        self.errors, self.calls = list(errors), 0

    def info(self, key):
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return {"size": 5000}

    def cat_file(self, key, start, end):
        return DATA[start:end]


def _client_error(status, code):
    from botocore.exceptions import ClientError

    return ClientError({"Error": {"Code": code, "Message": code}, "ResponseMetadata": {"HTTPStatusCode": status}},
                       "HeadObject")


def _s3fs_error(status, code):
    from s3fs.errors import translate_boto_error

    return translate_boto_error(_client_error(status, code))  # what s3fs raises for an S3 answer


def _fake_s3(monkeypatch, *errors):
    fs = _FakeS3(errors)
    monkeypatch.setattr(http, "s3_filesystem", lambda options: fs)
    return fs


def test_s3_retries_only_transport_timeouts_and_5xx(tmp_path, monkeypatch):
    import aiohttp
    from botocore.exceptions import EndpointConnectionError, ReadTimeoutError

    opts = DownloadOptions(retries=6, backoff=0.001)
    fs = _fake_s3(monkeypatch, ReadTimeoutError(endpoint_url="http://s3"), EndpointConnectionError(endpoint_url="x"),
                  aiohttp.ServerDisconnectedError(), _s3fs_error(503, "SlowDown"), _client_error(500, "InternalError"),
                  TimeoutError("read timed out"))
    r = download("s3://b/k", str(tmp_path / "k"), opts)
    assert r.attempts == 7 and fs.calls == 7 and (tmp_path / "k").read_bytes() == DATA[:5000]


@pytest.mark.parametrize("error, kind, match", [
    (lambda: _s3fs_error(403, "AccessDenied"), DownloadError, "PermissionError"),
    (lambda: _s3fs_error(404, "NoSuchKey"), DownloadError, "FileNotFoundError"),
    (lambda: __import__("botocore.exceptions").exceptions.NoCredentialsError(), DataError, "NoCredentialsError"),
    (lambda: _client_error(400, "InvalidArgument"), DataError, "ClientError"),
], ids=["access_denied", "no_such_key", "no_credentials", "bad_request"])
def test_s3_permanent_errors_fail_at_once_naming_the_url(tmp_path, monkeypatch, error, kind, match):
    fs = _fake_s3(monkeypatch, error())
    with pytest.raises(kind, match=rf"^s3://b/k: {match}") as info:
        download("s3://b/k", str(tmp_path / "k"), DownloadOptions(retries=6, backoff=0.001))
    assert fs.calls == 1 and "\n" not in str(info.value)
    # a refused or missing file is one file's failure (skipped under --on-error skip); no credentials stop the run
    assert (kind is DataError) == (not isinstance(info.value, DownloadError))


def test_s3_a_full_disk_is_not_retried(tmp_path, monkeypatch):
    fs = _fake_s3(monkeypatch)

    def full(path, *args, **kwargs):
        if str(path).endswith(".part"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return builtins.open(path, *args, **kwargs)

    monkeypatch.setattr(http, "open", full, raising=False)
    with pytest.raises(DataError, match=r"^s3://b/k: cannot write .*k\.part: .*No space left") as info:
        download("s3://b/k", str(tmp_path / "k"), DownloadOptions(retries=6, backoff=0.001))
    assert fs.calls == 1 and not isinstance(info.value, DownloadError)
