"""download_arxiv: a URL list served over HTTP, and the requester-pays S3 layout on moto."""

import pytest

from tests.conftest import read_output, run_stage
from tests.httpserver import FileServer
from tests.rawdata import arxiv_bulk_tar, tar_bytes

FAST = {"backoff": 0.01, "timeout": 2.0}


def test_url_list_source(tmp_path):
    arxiv_bulk_tar(tmp_path / "www" / "src" / "arXiv_src_2301_001.tar")
    arxiv_bulk_tar(tmp_path / "www" / "src" / "arXiv_src_2301_002.tar", extra=[("../../etc/x", b"owned")])
    (tmp_path / "www" / "src" / "arXiv_src_2301_003.tar").write_bytes(tar_bytes([]))
    with FileServer(tmp_path / "www") as server:
        server.fail("src/arXiv_src_2301_002.tar", "cut")
        listing = tmp_path / "www" / "list.txt"
        listing.write_text("# arXiv bulk files\n" + "".join(
            server.url(f"src/arXiv_src_2301_00{i}.tar") + "\n" for i in (1, 2, 3)))
        for source in (str(listing), server.url("list.txt")):  # a local file or a URL
            out = tmp_path / ("out-local" if source == str(listing) else "out-url")
            manifest = run_stage("download_arxiv", {"source": source, "limit": 2, **FAST}, (), out)
            assert manifest["download"]["files"] == 2
            assert manifest["counts"] == {"in": 7, "out": 4, "dropped": {"no_source": 2, "unsafe_path": 1}}
            assert read_output(out)["id"].tolist() == ["2301.00001", "2301.00002"] * 2
        assert not server.hits("src/arXiv_src_2301_003.tar")


@pytest.mark.slow
def test_s3_requester_pays_bucket(tmp_path, s3_endpoint):
    import boto3

    endpoint = s3_endpoint
    s3 = boto3.client("s3", endpoint_url=endpoint)
    s3.create_bucket(Bucket="arxiv")
    for i in (1, 2, 3):
        body = arxiv_bulk_tar(tmp_path / "build" / f"arXiv_src_2301_00{i}.tar").read_bytes()
        s3.put_object(Bucket="arxiv", Key=f"src/arXiv_src_2301_00{i}.tar", Body=body)
    s3.put_object(Bucket="arxiv", Key="src/arXiv_src_manifest.xml", Body=b"<arXivSRC/>")
    s3.put_bucket_request_payment(Bucket="arxiv", RequestPaymentConfiguration={"Payer": "Requester"})
    settings = {"source": "s3://arxiv/src", "s3_endpoint_url": endpoint, "limit": 2, **FAST}
    manifest = run_stage("download_arxiv", settings, (), tmp_path / "out")
    assert manifest["download"]["files"] == 2 and manifest["counts"]["out"] == 4
    assert sorted(read_output(tmp_path / "out")["source"].unique()) == [
        "arXiv_src_2301_001.tar", "arXiv_src_2301_002.tar"]
