"""semantic_dedup end to end on two input partitions, against brute force over its own embeddings."""

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curate.stages.dedup.semantic import encoders
from curate.stages.dedup.semantic.settings import SemanticDedupSettings
from curate.stages.errors import SettingsError
from tests.conftest import read_output, run_stage, side, write_jsonl
from tests.modules.dedup.semantic_models import static_model, tiny_bert
from tests.modules.dedup.test_semantic_rules import brute_greedy, brute_nemo

VOCAB = [f"w{i}" for i in range(300)]


def corpus(n=160, seed=0, changes=(0, 3), share=0.35):
    """(id, text): random 40-word documents, ``share`` of them near or exact copies of earlier ones
    (``changes`` words changed: 0-2 by default)."""
    rng = np.random.default_rng(seed)
    docs = []
    for i in range(n):
        if i > 10 and rng.random() < share:
            words = docs[int(rng.integers(0, len(docs)))][1].split()
            for _ in range(int(rng.integers(*changes))):
                words[int(rng.integers(len(words)))] = VOCAB[int(rng.integers(len(VOCAB)))]
        else:
            words = [VOCAB[int(j)] for j in rng.integers(0, len(VOCAB), 40)]
        docs.append((f"d{i:04d}", " ".join(words)))
    return docs


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return static_model(tmp_path_factory.mktemp("static"), [" ".join(VOCAB)], dim=24)


@pytest.fixture
def two_files(tmp_path):
    docs = corpus()
    rows = [{"id": i, "text": t} for i, t in docs]
    return [write_jsonl(tmp_path / "in" / "a.jsonl", rows[:90]), write_jsonl(tmp_path / "in" / "b.jsonl", rows[90:])]


def expected(out, rule, eps):
    """Brute force over the stage's own embeddings and clusters: {removed id: kept id}. ``nemo``: a
    document is removed when its cosine to an earlier one (the ``--keep`` order over all documents) is at
    least 1 - eps, where the earlier one shares its home cluster or probes it (a witness row there); its
    kept id follows the nearest earlier ones back. ``greedy``: within each home cluster."""
    rows = pd.concat([pd.read_parquet(p) for p in sorted((side(out, "_work") / "clusters").glob("part-*"))])
    t = np.float32(1 - eps)
    home = rows[~rows["witness"]].sort_values(["key", "id", "doc"])
    probes = rows[rows["witness"]].groupby("doc")["cluster"].agg(set).to_dict()
    want = {}
    if rule == "greedy":
        for _, members in home.groupby("cluster", sort=True):
            x = np.stack(members["vector"].to_numpy()).astype(np.float32)
            ids = members["id"].tolist()
            removed, kept = brute_greedy(x, t)
            want.update({ids[i]: ids[kept[i]] for i in np.flatnonzero(removed)})
        return want
    x = np.stack(home["vector"].to_numpy()).astype(np.float32)
    ids, docs, cl = home["id"].tolist(), home["doc"].tolist(), home["cluster"].to_numpy()
    sims = x @ x.T
    kept = np.arange(len(x))
    for i in range(len(x)):
        scope = [j for j in range(i) if cl[j] == cl[i] or cl[i] in probes.get(docs[j], ())]
        if scope:
            j = scope[int(np.argmax(sims[i, scope]))]
            if sims[i, j] >= t:
                kept[i] = kept[j]
                want[ids[i]] = ids[kept[i]]
    return want


@pytest.mark.parametrize("rule", ["nemo", "greedy"])
def test_removals_are_brute_force_over_the_same_embeddings_and_clusters(two_files, tmp_path, model, rule):
    out = tmp_path / "out"
    settings = {"model": str(model), "clusters": 12 if rule == "nemo" else 4, "eps": 0.03, "rule": rule,
                "block_size": 16}
    manifest = run_stage("semantic_dedup", settings, two_files, out)
    audit = pd.read_parquet(side(out, "_duplicates"))
    assert list(audit.columns) == ["id", "kept_id", "cosine", "cluster", "nearest_id"]
    want = expected(out, rule, 0.03)
    assert len(want) > 20
    assert dict(zip(audit["id"], audit["kept_id"])) == want
    kept = read_output(out)
    assert manifest["partitions"] == 2 and len(kept) == 160 - len(want)
    assert set(kept["id"]).isdisjoint(want) and set(want.values()) <= set(kept["id"])
    rejects = pd.concat([pd.read_parquet(p) for p in sorted((side(out, "_rejects")).glob("part-*"))])
    assert set(rejects["_reason"]) == {"semantic_duplicate"}
    assert dict(zip(rejects["id"], rejects["_detail"])) == {i: f"duplicate of {k}" for i, k in want.items()}
    sizes = dict(zip(kept["id"], kept["dup_cluster_size"]))
    assert sum(sizes.values()) == 160
    info = manifest["dedup"]
    k = settings["clusters"]
    assert info["clusters"] == k and info["documents"] == 160 and info["removed"] == len(want)
    assert sum(info["cluster_sizes"]["counts"]) == k and sum(info["removed_cosines"]["counts"]) == len(want)
    # the embeddings: an output of their own, unit vectors of the stored type
    emb = pq.read_table(side(out, "_work") / "embeddings" / "part-00001.parquet")
    assert emb.column_names == ["doc", "id", "weight", "vector"] and emb.num_rows == 70
    vtype = emb.schema.field("vector").type
    assert vtype.list_size == 24 and vtype.value_type == pa.float32()
    # every document sits in the cluster of its nearest centroid (cosine)
    centroids = np.stack(pd.read_parquet(side(out, "_work") / "centroids")["vector"].to_numpy())
    rows = pd.read_parquet(side(out, "_work") / "clusters")
    sims = np.stack(rows["vector"].to_numpy()) @ centroids.T
    home = ~rows["witness"].to_numpy()
    assert home.sum() == 160 and (rows["cluster"].to_numpy()[home] == sims[home].argmax(1)).all()
    # --probes 2 (nemo's default): each document is also a witness in its second nearest cluster
    second = np.argsort(-sims, axis=1, kind="stable")[:, 1]
    assert (~home).sum() == (160 if rule == "nemo" else 0)
    assert (rows["cluster"].to_numpy()[~home] == second[~home]).all()
    # the run report shows the semantic numbers
    from curate.app import report_data, report_html

    data = report_data.collect(str(out), verify=False)
    assert data["stages"][0]["semantic"]["removed"] == len(want)
    assert "semantic clusters" in report_html.render(data)


def test_pairs_split_by_a_cluster_boundary_are_found_through_witnesses(tmp_path, model):
    rows = [{"id": i, "text": t} for i, t in corpus(160, seed=0, changes=(4, 10), share=0.5)]
    files = [write_jsonl(tmp_path / "in" / "a.jsonl", rows[:90]), write_jsonl(tmp_path / "in" / "b.jsonl", rows[90:])]
    base = {"model": str(model), "clusters": 16, "eps": 0.15, "block_size": 16}
    manifest = run_stage("semantic_dedup", base, files, tmp_path / "two")
    links = pd.concat([pd.read_parquet(p) for p in sorted((side(tmp_path / "two", "_work") / "links").glob("part-*"))])
    assert (links["carry"] == 0).sum() >= 3 and (links["carry"] > 0).sum() >= 2  # removals via a witness
    want = expected(tmp_path / "two", "nemo", 0.15)
    audit = pd.read_parquet(side(tmp_path / "two", "_duplicates"))
    assert dict(zip(audit["id"], audit["kept_id"])) == want and manifest["dedup"]["removed"] == len(want)
    kept = read_output(tmp_path / "two")
    assert set(kept["id"]).isdisjoint(want) and set(want.values()) <= set(kept["id"])
    # every document is counted once, by the kept document its chain ends at
    assert kept["dup_cluster_size"].sum() == 160
    ends = pd.Series(list(want.values())).value_counts()
    sizes = dict(zip(kept["id"], kept["dup_cluster_size"]))
    assert all(sizes[k] == 1 + n for k, n in ends.items())
    # --probes 1 is NeMo Curator's within-cluster rule (its per-cluster loop in numpy): a subset
    run_stage("semantic_dedup", {**base, "probes": 1}, files, tmp_path / "one")
    within = pd.read_parquet(side(tmp_path / "one", "_duplicates"))
    rows = pd.read_parquet(side(tmp_path / "one", "_work") / "clusters")
    nemo = {}
    for _, members in rows.sort_values(["cluster", "key", "id", "doc"]).groupby("cluster"):
        x = np.stack(members["vector"].to_numpy()).astype(np.float32)
        removed, _ = brute_nemo(x, np.float32(1 - 0.15))
        nemo.update(dict.fromkeys(members["id"].to_numpy()[removed]))
    assert set(within["id"]) == set(nemo) and set(nemo) < set(want)


def test_block_size_and_saved_embeddings_give_the_same_bytes(two_files, tmp_path, model):
    base = {"model": str(model), "clusters": 3, "eps": 0.03}
    run_stage("semantic_dedup", {**base, "block_size": 16}, two_files, tmp_path / "small")
    run_stage("semantic_dedup", {**base, "block_size": 4096}, two_files, tmp_path / "large")
    again = {"embeddings": str(side(tmp_path / "small", "_work") / "embeddings"), "clusters": 3, "eps": 0.03}
    manifest = run_stage("semantic_dedup", again, two_files, tmp_path / "reused")
    assert "embeddings" not in manifest["steps"]
    import dask

    with dask.config.set(scheduler="threads", num_workers=2):  # another worker count, the same bytes
        run_stage("semantic_dedup", {**base, "block_size": 16}, two_files, tmp_path / "threads")
    for name in ("part-00000.parquet", "part-00001.parquet"):
        assert (tmp_path / "small" / name).read_bytes() == (tmp_path / "threads" / name).read_bytes()
        small = (tmp_path / "small" / name).read_bytes()
        assert small == (tmp_path / "large" / name).read_bytes() == (tmp_path / "reused" / name).read_bytes()


def test_transformer_encoder_runs_the_stage(tmp_path):
    docs = corpus(60, seed=3)
    bert = tiny_bert(tmp_path / "bert", [" ".join(VOCAB)])
    files = [write_jsonl(tmp_path / "in" / "a.jsonl", [{"id": i, "text": t} for i, t in docs[:30]]),
             write_jsonl(tmp_path / "in" / "b.jsonl", [{"id": i, "text": t} for i, t in docs[30:]])]
    out = tmp_path / "out"
    manifest = run_stage("semantic_dedup", {"model": str(bert), "clusters": 2, "eps": 0.001, "max_tokens": 32,
                                            "batch_size": 8, "dtype": "float16"}, files, out)
    emb = pq.read_table(side(out, "_work") / "embeddings" / "part-00000.parquet")
    vtype = emb.schema.field("vector").type
    assert vtype.list_size == 32 and vtype.value_type == pa.float16()
    assert manifest["dedup"]["clusters"] == 2  # 60 documents: at least 2 x 10, so the 2 asked for
    assert manifest["dedup"]["removed"] == len(expected(out, "nemo", 0.001))
    assert manifest["counts"]["in"] == 60


def test_a_small_job_uses_fewer_clusters(two_files, tmp_path, model, caplog):
    import logging

    with caplog.at_level(logging.INFO):
        manifest = run_stage("semantic_dedup", {"model": str(model)}, two_files, tmp_path / "out")
    assert manifest["dedup"]["clusters_requested"] == 1000 and manifest["dedup"]["clusters"] == 16
    assert "using 16 clusters" in caplog.text


def test_static_encoder_is_model2vec_normalised(model):
    model2vec = pytest.importorskip("model2vec")
    texts = ["w1 w2 w3", "W5 w5 w5 unknownword", "", "nothing known here", " ".join(VOCAB * 3)]
    ours = encoders.StaticEncoder(str(model), 512).encode(texts)
    theirs = model2vec.StaticModel.from_pretrained(str(model)).encode(texts)
    assert np.allclose(ours, theirs, atol=1e-6)
    assert (ours[2] == 0).all() and (ours[3] == 0).all()  # no known token: zero, as model2vec


def test_model_folder_refusals(tmp_path, model, monkeypatch):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SettingsError, match=r"no a \*\.safetensors file .* and no a tokenizer"):
        SemanticDedupSettings(model=str(empty))
    (empty / "tokenizer.json").write_text((model / "tokenizer.json").read_text())
    with pytest.raises(SettingsError, match="safetensors"):
        SemanticDedupSettings(model=str(empty))
    with pytest.raises(SettingsError, match="--model PATH"):
        SemanticDedupSettings()
    with pytest.raises(SettingsError, match="eps"):
        SemanticDedupSettings(model=str(model), eps=1.5)
    assert SemanticDedupSettings(model=str(model)).probes == 2
    assert SemanticDedupSettings(model=str(model), rule="greedy").probes == 1
    with pytest.raises(SettingsError, match="probes: --rule greedy"):
        SemanticDedupSettings(model=str(model), rule="greedy", probes=2)
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "safetensors" else real(name, *a))
    with pytest.raises(SettingsError, match=r"pip install 'curate-llm\[semantic\]'"):
        SemanticDedupSettings(model=str(model))


def test_check_refuses_before_any_work(tmp_path, two_files):
    """The dry run names what the model folder lacks (settings are built there too)."""
    import subprocess

    from tests.conftest import CURATE

    (tmp_path / "m").mkdir()
    job = tmp_path / "job.yaml"
    job.write_text(json.dumps({"name": "sem", "input": str(two_files[0]), "output": str(tmp_path / "o"),
                               "stages": [{"semantic_dedup": {"model": str(tmp_path / "m")}}]}))
    proc = subprocess.run([*CURATE, "run", str(job), "--dry-run"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "no a *.safetensors file" in proc.stderr and "no a tokenizer" in proc.stderr
    assert not (tmp_path / "o").exists()


def test_no_documents_left_is_no_work(tmp_path, model):
    files = [write_jsonl(tmp_path / "in" / "a.jsonl", [], raw_lines=["{broken json"])]
    manifest = run_stage("semantic_dedup", {"model": str(model)}, files, tmp_path / "out", on_error="skip")
    assert manifest["counts"]["out"] == 0 and manifest["dedup"]["removed"] == 0
