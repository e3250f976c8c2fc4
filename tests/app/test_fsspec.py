"""Any fsspec URL in and out: a whole job from s3:// to s3:// (moto on 127.0.0.1), and Parquet over http."""

import json

import pandas as pd
import pytest

from tests.conftest import curate, curate_here, write_jsonl
from tests.httpserver import FileServer

pytestmark = pytest.mark.slow

TEXTS = [f"Record {i}: the quick brown fox number {i % 7} jumps over the lazy dog again and again. " * (1 + i % 3)
         for i in range(40)]


@pytest.fixture
def s3(s3_endpoint, monkeypatch):
    import fsspec

    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    fs = fsspec.filesystem("s3", skip_instance_cache=True)
    fs.mkdir("fsspec-bkt")
    return fs


def here(*args):
    """``curate ARGS`` through cli.main in this process, with none of s3fs's cached filesystems (cached by
    arguments, not by endpoint, each with its listings) kept from before or left for later: each call
    sees the bucket as it is, as a new process would."""
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()
    try:
        return curate_here(*args)
    finally:
        s3fs.S3FileSystem.clear_instance_cache()


def job_file(tmp_path, input_spec, output):
    job = tmp_path / f"job-{abs(hash(output)) % 1000}.yaml"
    job.write_text(
        f"name: remote\ninput: {input_spec}\noutput: {output}\nio: {{on_error: skip}}\nstages:\n"
        "  - clean: {}\n  - exact_dedup: {}\n  - fuzzy_dedup: {bands: 20, rows: 6}\n"
        "  - shuffle: {partitions: 2, seed: 1}\n  - tokenize: {tokenizer: 'tiktoken:cl100k_base'}\n")
    return job


def test_a_whole_job_from_s3_to_s3(s3, tmp_path):
    records = [{"id": f"r{i}", "text": t} for i, t in enumerate(TEXTS)] + [{"id": "dup", "text": TEXTS[3]}]
    for k in range(2):
        write_jsonl(tmp_path / "in" / f"f{k}.jsonl", records[k::2])
        s3.put_file(str(tmp_path / "in" / f"f{k}.jsonl"), f"fsspec-bkt/in/f{k}.jsonl")
    remote = job_file(tmp_path, "s3://fsspec-bkt/in/*.jsonl", "s3://fsspec-bkt/job")
    local = job_file(tmp_path, str(tmp_path / "in" / "*.jsonl"), str(tmp_path / "local"))
    out = curate("run", remote, "--workers", "2").stdout
    assert "curate: output in s3://fsspec-bkt/job/05-tokenize" in out
    # the reference, in this process (cli.main, as the session's sample_job: the same bytes as a cluster's)
    ref = here("run", local, "--cluster", "threads")
    assert ref.returncode == 0, ref.stderr[-4000:]
    s3.invalidate_cache()
    # every stage wrote to the bucket, each with manifest and _SUCCESS, and the job root too
    stages = ["01-clean", "02-exact_dedup", "03-fuzzy_dedup", "04-shuffle", "05-tokenize"]
    for stage in stages:
        assert s3.exists(f"fsspec-bkt/job/{stage}/_SUCCESS") and s3.exists(f"fsspec-bkt/job/{stage}/_manifest.json")
    assert json.loads(s3.cat_file("fsspec-bkt/job/_manifest.json"))["owner"] == {"kind": "job", "job": "remote"}
    # the same bytes as a local run of the same job
    for rel in ("04-shuffle/part-00000.parquet", "04-shuffle/part-00001.parquet", "05-tokenize/part_00000.bin",
                "05-tokenize/part_00001.idx"):
        assert s3.cat_file(f"fsspec-bkt/job/{rel}") == (tmp_path / "local" / rel).read_bytes(), rel
    m = json.loads(s3.cat_file("fsspec-bkt/job/02-exact_dedup/_manifest.json"))
    assert m["counts"]["dropped"] == {"exact_duplicate": 1}
    assert "AWS_SECRET" not in json.dumps(m) and "testing" not in json.dumps(m["io"])
    assert "OK" in here("verify", "s3://fsspec-bkt/job", "--checksums").stdout
    # a reader refuses a prefix without _SUCCESS
    s3.rm_file("fsspec-bkt/job/04-shuffle/_SUCCESS")
    bad = here("tokenize", "--input", "s3://fsspec-bkt/job/04-shuffle", "--output", tmp_path / "t",
               "--tokenizer", "tiktoken:cl100k_base")
    assert bad.returncode == 2 and "no _SUCCESS" in bad.stderr
    # what a kill during stage 4 leaves: resumed, stages 1-3 skipped, the same bytes again
    before = s3.cat_file("fsspec-bkt/job/05-tokenize/part_00000.bin")
    s3.rm_file("fsspec-bkt/job/05-tokenize/_SUCCESS")
    s3.rm_file("fsspec-bkt/job/04-shuffle/part-00001.parquet")
    # in this process: the cluster's S3 access is the first run above, a real process
    resumed = here("run", remote, "--cluster", "threads")
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    out = resumed.stdout
    assert [line.split()[1] for line in out.splitlines()[2:7]] == ["skipped"] * 3 + ["ran"] * 2
    s3.invalidate_cache()
    assert s3.cat_file("fsspec-bkt/job/05-tokenize/part_00000.bin") == before
    assert "OK" in here("verify", "s3://fsspec-bkt/job/05-tokenize").stdout


def test_parquet_over_https_from_a_local_server(tmp_path):
    (tmp_path / "site").mkdir()
    pd.DataFrame({"id": [f"p{i}" for i in range(5)], "text": TEXTS[:5]}).to_parquet(tmp_path / "site" / "d.parquet")
    with FileServer(tmp_path / "site") as server:
        curate("clean", "--input", server.url("d.parquet"), "--output", tmp_path / "out", "--workers", "1")
        assert any(r[1] for r in server.hits("d.parquet"))  # read with Range requests, not landed whole
    df = pd.concat(pd.read_parquet(p) for p in sorted((tmp_path / "out").glob("part-*.parquet")))
    assert df["id"].tolist() == [f"p{i}" for i in range(5)]


@pytest.mark.parametrize("url", ["s3://curate-no-such-bucket/in/*.jsonl", "http://127.0.0.1:9/data/a.jsonl"])
def test_an_input_that_cannot_be_reached_is_named_in_one_line(tmp_path, url):  # issue 47, point 10
    env = {"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
           "AWS_CONFIG_FILE": str(tmp_path / "none"), "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none")}
    proc = curate("clean", "--input", url, "--output", tmp_path / "out", check=False, env=env)
    assert proc.returncode == 1, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"curate: error: input {url}: cannot reach it (") and "Traceback" not in proc.stderr, last
