"""Remote output (``--output s3://bucket/prefix``) against moto's S3 server on 127.0.0.1."""

import pytest

from tests.conftest import ROOT, curate, run_stage, write_jsonl

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def s3():
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    env = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_ENDPOINT_URL": f"http://{host}:{port}"}
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        import fsspec

        fs = fsspec.filesystem("s3", skip_instance_cache=True)
        fs.mkdir("bkt")
        yield fs, env
    server.stop()


def make_input(tmp_path):
    for k in range(3):
        docs = [{"id": f"{k}-{j}", "text": f"remote document {k}.{j} ü"} for j in range(4)]
        write_jsonl(tmp_path / "in" / f"f{k}.jsonl", docs + [{"id": f"{k}-empty", "text": ""}])
    return str(tmp_path / "in" / "*.jsonl")


def test_tokenize_to_s3(s3, tmp_path, monkeypatch):
    from curate.stages import output
    from curate.stages.tokenize import merge, verify

    fs, _ = s3
    puts = []
    real_open = output.Output.open

    def spy(self, rel):
        puts.append(rel)
        return real_open(self, rel)

    monkeypatch.setattr(output.Output, "open", spy)
    inputs = make_input(tmp_path)
    m = run_stage("tokenize", {"tokenizer": "tiktoken:cl100k_base"}, inputs, "s3://bkt/tok")
    local = run_stage("tokenize", {"tokenizer": "tiktoken:cl100k_base"}, inputs, tmp_path / "local")
    assert m["output"] == "s3://bkt/tok"
    assert m["files"] == local["files"] and m["counts"] == local["counts"]
    # each partition: its intent, bin, idx, rejects, then its done record; manifest and _SUCCESS last
    assert puts[-2:] == ["_manifest.json", "_SUCCESS"]
    for i in range(3):
        record = f"_state/part-{i:05d}.json"
        assert puts.index(record) < puts.index(f"part_{i:05d}.bin") < puts.index(f"part_{i:05d}.idx")
        assert len(puts) - 1 - puts[::-1].index(record) > puts.index(f"part_{i:05d}.idx")
    fs.invalidate_cache()
    for i in range(3):
        for ext in ("bin", "idx"):
            assert fs.cat_file(f"bkt/tok/part_{i:05d}.{ext}") == (tmp_path / "local" / f"part_{i:05d}.{ext}").read_bytes()
    assert fs.exists("bkt/tok.side/_rejects/part-00001.parquet")  # the side folder, beside the token files
    assert not (tmp_path / "s3:").exists()

    report = verify.verify("s3://bkt/tok")
    assert report.ok, report.problems
    assert report.sets["part"]["documents"] == 12
    merge.merge("s3://bkt/tok", str(tmp_path / "merged"))
    merge.merge(str(tmp_path / "local"), str(tmp_path / "merged_local"))
    assert (tmp_path / "merged.bin").read_bytes() == (tmp_path / "merged_local.bin").read_bytes()
    assert (tmp_path / "merged.docs.parquet").read_bytes() == (tmp_path / "merged_local.docs.parquet").read_bytes()

    # resume on S3: a killed run lost _SUCCESS and one index
    fs.rm_file("bkt/tok/_SUCCESS")
    fs.rm_file("bkt/tok/part_00001.idx")
    m = run_stage("tokenize", {"tokenizer": "tiktoken:cl100k_base"}, inputs, "s3://bkt/tok")
    assert m["resumed_partitions"] == 2
    assert verify.verify("s3://bkt/tok").ok


def test_cli_with_workers_uploads(s3, tmp_path):
    fs, env = s3
    inputs = make_input(tmp_path)
    proc = curate("tokenize", "--input", inputs, "--output", "s3://bkt/cli", "--tokenizer", "tiktoken:cl100k_base",
                  "--workers", "2", env=env)
    assert "ran" in proc.stdout
    fs.invalidate_cache()
    names = sorted(p.rsplit("/", 1)[-1] for p in fs.ls("bkt/cli"))
    assert sorted(p.rsplit("/", 1)[-1] for p in fs.ls("bkt/cli.side")) == ["_rejects", "_state"]
    assert names == ["_SUCCESS", "_manifest.json",
                     "part_00000.bin", "part_00000.docs.parquet", "part_00000.idx",
                     "part_00001.bin", "part_00001.docs.parquet", "part_00001.idx",
                     "part_00002.bin", "part_00002.docs.parquet", "part_00002.idx"]
    assert not (ROOT / "s3:").exists()  # no local folder named after the URL (the performance report)
    from curate.stages.tokenize.verify import verify

    assert verify("s3://bkt/cli").ok
