"""Saved dedup indexes and --against.

The contract: on generated snapshots A and B (two partitions each), ``dedup(B --against index(A))``
removes from B exactly what the joint run removes from B when A's documents are preferred, with the
same kept ids and cluster sizes. Under ``--keep smallest-id`` that is the joint run with the same
policy (A's ids are the smaller); under ``--keep hub`` the joint run ranks A first by its key
(``--keep oldest:snap``, A older), since among documents ranked equal hub lets the one similar to the
most others go first, which in a joint run would count B's documents too. Exact and fuzzy, with
planted exact and near copies within B and across A/B, a chain A1 ~ A2 ~ B1 where A's run removed A2,
and chains within B. Then a third snapshot against the saved union, the tables themselves on a tiny
case, and every refusal through the CLI (exit 2, one line, nothing written, the index untouched).
"""

import functools
import json
import random

import numpy as np
import pandas as pd
import pytest

from curate.stages.dedup import index, minhash
from tests.conftest import DATA, copy_output, curate, read_output, run_stage, side, write_jsonl

SENTENCES = (DATA / "dedup" / "sentences.txt").read_text(encoding="utf-8").splitlines()
VOCAB = sorted({w for s in SENTENCES for w in s.split()})


def _doc(rng, k=12):
    return " ".join(rng.sample(SENTENCES, k))


def _edit(rng, text, frac):
    words = text.split()
    for _ in range(max(1, int(len(words) * frac))):
        words[rng.randrange(len(words))] = rng.choice(VOCAB)
    return " ".join(words)


def _chain(rng):
    """(x, y, z) with x ~ y ~ z at Jaccard >= 0.8 but x and z below it: y changes a few words of x, z
    as many others (each word is in 5 shingles)."""
    x = _doc(rng, 14)
    words = x.split()
    n = len(words)

    def changed(ws, positions):
        ws = list(ws)
        for k in positions:
            ws[k] = next(w for w in iter(lambda: rng.choice(VOCAB), None) if w != ws[k])
        return ws

    k = max(1, round(0.015 * n))  # 5k of ~n shingles differ: Jaccard ~0.86, twice as many ~0.74
    y = changed(words, [int((i + 0.25) * n / k) for i in range(k)])
    z = changed(y, [int((i + 0.75) * n / k) for i in range(k)])
    x, y, z = x, " ".join(y), " ".join(z)
    j = minhash.jaccard([x, y, x], [y, z, z])
    assert j[0] >= 0.8 and j[1] >= 0.8 and j[2] < 0.8, j
    return x, y, z


@functools.cache
def snapshots(seed=0):
    """Records of A, B and C (each a list of two files' records), with the planted cases named."""
    rng = random.Random(seed)
    a = [_doc(rng) for _ in range(24)]
    a += [a[3], a[5], a[5]]                                          # exact copies within A
    a += [_edit(rng, a[k], f) for k, f in ((1, 0.02), (2, 0.04), (7, 0.06), (9, 0.0))]  # near copies
    a1, a2, b1 = _chain(rng)                                         # A's run removes a2 (for a1)
    a += [a1, a2]
    b = [_doc(rng) for _ in range(8)]
    b += [a[3], a[24], a[0]]                                         # exact copies of A (kept and removed)
    b += [_edit(rng, a[k], f) for k, f in ((4, 0.02), (6, 0.05), (25, 0.03), (29, 0.02))]  # near copies of A
    b += [b[0], b[1], _edit(rng, b[2], 0.03), _edit(rng, b[3], 0.05)]  # exact and near copies within B
    b2, b3, b4 = _chain(rng)                                         # a chain within B
    b += [b1, _edit(rng, a1, 0.005), b2, b3, b4]                     # b1 ~ a2 only; the next ~ a1
    c = [_doc(rng) for _ in range(4)] + [b[0], a[1], _edit(rng, b[12], 0.02), _edit(rng, a[8], 0.03)]

    def records(texts, prefix, snap):
        recs = [{"id": f"{prefix}{k:03d}", "text": t, "snap": snap} for k, t in enumerate(texts)]
        random.Random(seed + len(prefix)).shuffle(recs)
        return [recs[: len(recs) // 2], recs[len(recs) // 2:]]

    return {"A": records(a, "a", "2023-01-01"), "B": records(b, "b", "2024-01-01"),
            "C": records(c, "c", "2025-01-01")}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("snapshots")
    files = {}
    for name, parts in snapshots().items():
        files[name] = [write_jsonl(folder / name / f"part-{k}.jsonl", recs) for k, recs in enumerate(parts)]
    return files


def results(out, prefix):
    """What a run did to the documents whose ids start with ``prefix``: removed id -> (reason, kept id),
    kept id -> dup_cluster_size, and the audit rows (id -> component, kept id, removed)."""
    rejects = pd.concat([pd.read_parquet(p) for p in sorted((side(out, "_rejects")).glob("part-*"))]) \
        if (side(out, "_rejects")).exists() else pd.DataFrame(columns=["id", "_reason", "_detail"])
    rejects = rejects[rejects["id"].str.startswith(prefix)]
    removed = {i: (r, d.split(" in index ")[0]) for i, r, d in zip(rejects["id"], rejects["_reason"], rejects["_detail"])}
    kept = read_output(out)
    kept = kept[kept["id"].str.startswith(prefix)]
    sizes = dict(zip(kept["id"], kept["dup_cluster_size"].astype(int)))
    audit = pd.read_parquet(side(out, "_duplicates"))
    audit = audit[audit["id"].str.startswith(prefix)]
    rows = {i: (k, bool(r)) for i, k, r in zip(audit["id"], audit["kept_id"], audit["removed"])}
    return removed, sizes, rows


def assert_same(got, joint):
    for what, g, j in zip(("removed", "dup_cluster_size", "audit"), got, joint):
        assert g == j, f"{what}: against-run {g}\njoint run {j}"


FUZZY = [{}, {"false_positive_check": False, "in_memory_edges": 0}]


#: per --keep of the saved and the against runs, the --keep of the joint run that prefers A's documents
JOINT_KEEP = {"hub": "oldest:snap", "smallest-id": "smallest-id"}


@pytest.mark.parametrize("keep", list(JOINT_KEEP))
@pytest.mark.parametrize("stage,settings", [("exact_dedup", {})] + [("fuzzy_dedup", s) for s in FUZZY],
                         ids=["exact", "fuzzy", "fuzzy-unchecked-distributed"])
def test_against_an_index_equals_the_joint_run(data, tmp_path, stage, settings, keep):
    settings = {**settings, "keep": keep}
    preferring_a = {**settings, "keep": JOINT_KEEP[keep]}
    run_stage(stage, {**settings, "save_index": str(tmp_path / "idxA")}, data["A"], tmp_path / "A")
    manifest = run_stage(stage, {**settings, "against": [str(tmp_path / "idxA")],
                                 "save_index": str(tmp_path / "idxAB")}, data["B"], tmp_path / "B")
    run_stage(stage, preferring_a, data["A"] + data["B"], tmp_path / "AB")
    got, joint = results(tmp_path / "B", "b"), results(tmp_path / "AB", "b")
    assert_same(got, joint)
    removed = got[0]
    assert len(removed) >= 5 and any(k.startswith("duplicate of a") for _, k in removed.values())
    assert any(k.startswith("duplicate of b") for _, k in removed.values())
    against = manifest["dedup"]["against"]
    assert against["indexes"] == [str(tmp_path / "idxA")] and against["removed_for_index"] > 0
    rejects = pd.concat([pd.read_parquet(p) for p in (side(tmp_path / "B", "_rejects")).glob("part-*")])
    named = rejects[rejects["_detail"].str.contains(" in index ")]
    assert len(named) == against["removed_for_index"]
    assert all(d.endswith(f" in index {tmp_path / 'idxA'}") for d in named["_detail"])
    # A third snapshot against the union index: as the joint run of all three
    run_stage(stage, {**settings, "against": [str(tmp_path / "idxAB")]}, data["C"], tmp_path / "C")
    run_stage(stage, preferring_a, data["A"] + data["B"] + data["C"], tmp_path / "ABC")
    assert_same(results(tmp_path / "C", "c"), results(tmp_path / "ABC", "c"))
    assert curate("verify", tmp_path / "idxAB", "--checksums").returncode == 0


def test_the_chain_through_a_removed_document(data, tmp_path):
    """b1 is similar to a2 only, and A's run removed a2 for a1: the joint run keeps b1 (a2 is no
    representative), and so does the run against A's index, which still knows a2 and its component."""
    records = {r["id"]: r["text"] for part in snapshots()["A"] + snapshots()["B"] for r in part}
    a1, a2, b1 = records["a031"], records["a032"], records["b019"]
    j = minhash.jaccard([a1, a2, a1], [a2, b1, b1])
    assert j[0] >= 0.8 and j[1] >= 0.8 and j[2] < 0.8
    run_stage("fuzzy_dedup", {"save_index": str(tmp_path / "idx")}, data["A"], tmp_path / "A")
    removed_a = set(pd.read_parquet(side(tmp_path / "A", "_rejects"))["id"])
    assert "a032" in removed_a and "a031" not in removed_a
    run_stage("fuzzy_dedup", {"against": [str(tmp_path / "idx")]}, data["B"], tmp_path / "B")
    removed, sizes, audit = results(tmp_path / "B", "b")
    assert "b019" not in removed and sizes["b019"] == 1 and audit["b019"] == ("b019", False)
    assert removed["b020"] == ("fuzzy_duplicate", "duplicate of a031")
    labels = pd.read_parquet(tmp_path / "idx" / "labels")
    assert labels["removed"].any()  # removed documents are indexed too, flagged


def test_exact_index_tables_by_hand(tmp_path):
    a = write_jsonl(tmp_path / "a.jsonl", [{"id": "a1", "text": "alpha"}, {"id": "a2", "text": "beta"},
                                           {"id": "a3", "text": "alpha"}])
    b = write_jsonl(tmp_path / "b.jsonl", [{"id": "b1", "text": "alpha"}, {"id": "b2", "text": "gamma"},
                                           {"id": "b3", "text": "gamma"}, {"id": "b4", "text": "delta"}])
    run_stage("exact_dedup", {"save_index": str(tmp_path / "idxA")}, [a], tmp_path / "A")
    table = pd.read_parquet(tmp_path / "idxA" / "hashes")
    assert sorted(table["id"]) == ["a1", "a2"] and list(table.columns) == ["h1", "h2", "id"]
    manifest = json.loads((tmp_path / "idxA" / "_manifest.json").read_text())
    info = manifest["index"]
    assert (info["format"], info["kind"], info["settings"], info["documents"]) == (1, "exact", {"hash": "md5"}, 2)
    assert manifest["stage"] == "dedup_index" and (tmp_path / "idxA" / "_SUCCESS").exists()
    assert all("xxh3_128" in r for r in manifest["outputs"])
    run_stage("exact_dedup", {"against": [str(tmp_path / "idxA")], "save_index": str(tmp_path / "idxAB")},
              [b], tmp_path / "B")
    rejects = pd.read_parquet(side(tmp_path / "B", "_rejects")).set_index("id")["_detail"].to_dict()
    assert rejects == {"b1": f"duplicate of a1 in index {tmp_path / 'idxA'}", "b3": "duplicate of b2"}
    kept = read_output(tmp_path / "B")
    assert dict(zip(kept["id"], kept["dup_cluster_size"])) == {"b2": 2, "b4": 1}
    assert sorted(pd.read_parquet(tmp_path / "idxAB" / "hashes")["id"]) == ["a1", "a2", "b2", "b4"]
    union = json.loads((tmp_path / "idxAB" / "_manifest.json").read_text())["index"]
    assert union["contains"] == [info["id"]] and union["documents"] == 4
    proc = curate("verify", tmp_path / "idxAB", "--checksums")
    assert "exact dedup index, 4 documents, 1 files" in proc.stdout


def test_fuzzy_index_tables(data, tmp_path):
    run_stage("fuzzy_dedup", {"save_index": str(tmp_path / "idx")}, data["A"], tmp_path / "A")
    info = json.loads((tmp_path / "idx" / "_manifest.json").read_text())["index"]
    assert info["settings"] == {"num_perm": 128, "bands": 21, "rows": 6, "ngram": 5, "shingle": "word", "seed": 42,
                                "threshold": 0.8, "false_positive_check": True}
    assert (info["parts"], info["partitions"], info["tiers"]) == (2, 2, [2])
    docs = pd.read_parquet(tmp_path / "idx" / "docs")
    assert len(docs) == info["documents"] == sum(len(p) for p in snapshots()["A"])
    texts = {r["id"]: r["text"] for part in snapshots()["A"] for r in part}
    ix = index.Index("idx", str(tmp_path / "idx"), info)
    for p in range(2):  # each set, whole from the raw file, and a few read in another order
        part = pd.read_parquet(tmp_path / "idx" / "docs" / f"part-0000{p}.parquet")
        raw = np.fromfile(tmp_path / "idx" / "shingles" / f"part-0000{p}.u64", dtype="<u8")
        want = minhash.shingle_sets([texts[i] for i in part["id"]]).to_pylist()
        assert [raw[s:s + c].tolist() for s, c in zip(part["start"], part["count"])] == want
        pick = part["doc"].to_numpy()[[4, 0, 9, 4]]
        assert index.read_sets(ix, p, pick).to_pylist() == [want[4], want[0], want[9], want[4]]
    buckets = pd.read_parquet(tmp_path / "idx" / "buckets")
    assert buckets["bucket"].is_unique and len(buckets) <= 21 * len(docs)
    for k in range(2):  # each part holds the keys part_of sends there
        part = pd.read_parquet(tmp_path / "idx" / "buckets" / f"part-0000{k}.parquet")
        assert (index.part_of(part["bucket"].to_numpy(), 2) == k).all()
    comps = pd.read_parquet(tmp_path / "idx" / "components")
    labels = pd.read_parquet(tmp_path / "idx" / "labels")
    assert sorted(zip(comps["doc"], comps["comp"])) == sorted(zip(labels["doc"], labels["comp"]))
    removed = set(pd.read_parquet(side(tmp_path / "A", "_rejects"))["id"])
    ids = dict(zip(docs["doc"], docs["id"]))
    assert {ids[d] for d in labels.loc[labels["removed"], "doc"]} == removed


# --------------------------------------------------------------------------- refusals through the CLI


def _listing(path):
    return {p.relative_to(path): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def indexes(data, tmp_path_factory):
    folder = tmp_path_factory.mktemp("indexes")
    run_stage("exact_dedup", {"save_index": str(folder / "exact")}, data["A"], folder / "outA")
    run_stage("fuzzy_dedup", {"save_index": str(folder / "fuzzy")}, data["A"], folder / "outFA")
    return folder


def refused(tmp_path, words, *args, touched=(), capsys=None):
    """The refusal through the CLI: exit 2, one line, nothing written, ``touched`` untouched. In a real
    process; or, given ``capsys``, through ``cli.main`` in this one (the same code path, without a
    process start per case: each test keeps at least one case in a real process)."""
    out = tmp_path / "out"
    before = {p: _listing(p) for p in touched}
    if capsys is None:
        proc = curate("dedup", *args, "--output", out, check=False)
        code, err = proc.returncode, proc.stderr
    else:
        from curate.app.cli import main

        capsys.readouterr()
        code = main(["dedup", *map(str, args), "--output", str(out)])
        err = capsys.readouterr().err
    assert code == 2, err
    assert err.strip().count("\n") == 0, err
    assert words in err, err
    assert not out.exists()
    for p, listing in before.items():
        assert _listing(p) == listing


def test_refusals(data, indexes, tmp_path, capsys):

    a, b = map(str, data["A"]), map(str, data["B"])
    a, b = list(a), list(b)
    exact, fuzzy = indexes / "exact", indexes / "fuzzy"
    copy = tmp_path / "copy"
    copy_output(exact, copy)
    cases = []
    # incomplete
    (copy / "_SUCCESS").unlink()
    cases.append(("exact", copy, "incomplete (no _SUCCESS"))
    # tampered: a flipped byte, same size
    tampered = tmp_path / "tampered"
    copy_output(fuzzy, tampered)
    part = tampered / "buckets" / "part-00001.parquet"
    raw = bytearray(part.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    part.write_bytes(bytes(raw))
    cases.append(("fuzzy", tampered, "damaged: " + str(part) + ": checksum"))
    # foreign: a stage output, a directory curate did not write, a stray file in an index
    cases.append(("exact", indexes / "outA", "not a dedup index but the output of stage 'exact_dedup'"))
    (tmp_path / "mine").mkdir()
    cases.append(("exact", tmp_path / "mine", "not a curate dedup index (no _manifest.json)"))
    stray = tmp_path / "stray"
    copy_output(exact, stray)
    (stray / "hashes" / "part-00009.parquet").write_bytes(b"x")
    cases.append(("exact", stray, "unlisted"))
    # another format (a newer curate)
    newer = tmp_path / "newer"
    copy_output(exact, newer)
    manifest = json.loads((newer / "_manifest.json").read_text())
    manifest["index"]["format"] = 2
    (newer / "_manifest.json").write_text(json.dumps(manifest))
    cases.append(("exact", newer, "index format 2 (written by curate 0.1.0); this curate 0.1.0 reads format 1"))
    # the other kind
    cases.append(("fuzzy", exact, "an index of exact dedup, not of fuzzy dedup"))
    for i, (kind, idx, words) in enumerate(cases):  # the first in a real process, the others in this one
        refused(tmp_path, words, kind, "--input", *b, "--against", idx, touched=[idx], capsys=capsys if i else None)
    # other settings: each difference named
    refused(tmp_path, "made with other settings: hash 'md5' (this run: 'xxh3')",
            "exact", "--input", *b, "--against", exact, "--hash", "xxh3", touched=[exact], capsys=capsys)
    refused(tmp_path, "made with other settings: num_perm 128 (this run: 64), bands 21 (this run: 16), rows 6 "
            "(this run: 4), ngram 5 (this run: 3)",
            "fuzzy", "--input", *b, "--against", fuzzy, "--num-perm", "64", "--bands", "16", "--rows", "4",
            "--ngram", "3", touched=[fuzzy], capsys=capsys)
    # the dataset itself, the same index twice, writing the index read, the output inside the index
    refused(tmp_path, "an index of this run's own input", "fuzzy", "--input", *a, "--against", fuzzy, touched=[fuzzy], capsys=capsys)
    refused(tmp_path, "the same index as", "exact", "--input", *b, "--against", exact, exact, touched=[exact], capsys=capsys)
    refused(tmp_path, "--save-index " + str(exact) + ": also read by --against",
            "exact", "--input", *b, "--against", exact, "--save-index", exact, touched=[exact], capsys=capsys)
    refused(tmp_path, "--save-index " + str(tmp_path / "out" / "idx") + ": overlaps the output",
            "exact", "--input", *b, "--save-index", tmp_path / "out" / "idx", capsys=capsys)
    refused(tmp_path, "--save-index " + str(indexes / "outA") + ": written by stage 'exact_dedup'",
            "exact", "--input", *b, "--save-index", indexes / "outA", touched=[indexes / "outA"], capsys=capsys)


def test_an_index_holding_another_is_refused_beside_it(data, indexes, tmp_path):
    run_stage("exact_dedup", {"against": [str(indexes / "exact")], "save_index": str(tmp_path / "union")},
              data["B"], tmp_path / "B")
    refused(tmp_path, "already holds", "exact", "--input", *map(str, data["C"]),
            "--against", indexes / "exact", tmp_path / "union", touched=[tmp_path / "union"])
    # two indexes of other snapshots are fine: B against both A's index and C's
    run_stage("exact_dedup", {"save_index": str(tmp_path / "idxC")}, data["C"], tmp_path / "C")
    run_stage("exact_dedup", {"against": [str(indexes / "exact"), str(tmp_path / "idxC")]}, data["B"], tmp_path / "B2")
    removed, _, _ = results(tmp_path / "B2", "b")
    c004 = ("exact_duplicate", "duplicate of c004")  # c004 is a copy of b000 (and so of b015)
    assert removed == {**results(tmp_path / "B", "b")[0], "b000": c004, "b015": c004}
    rejects = pd.concat([pd.read_parquet(p) for p in (side(tmp_path / "B2", "_rejects")).glob("part-*")])
    assert rejects.set_index("id").loc["b000", "_detail"] == f"duplicate of c004 in index {tmp_path / 'idxC'}"


def test_in_a_job_a_later_stage_is_checked_before_any_work(data, indexes, tmp_path):
    from curate.app.runner import load_job, run_job
    from curate.stages.errors import SettingsError

    job = tmp_path / "job.yaml"
    stages = "  - exact_dedup: {{}}\n  - fuzzy_dedup: {{against: [{idx}], save_index: {save}}}\n"
    job.write_text(f"input: [{', '.join(map(str, data['B']))}]\nstages:\n"
                   + stages.format(idx=indexes / "exact", save=tmp_path / "idx"))
    with pytest.raises(SettingsError, match="an index of exact dedup, not of fuzzy dedup"):
        run_job(load_job(str(job)), str(tmp_path / "out"))
    assert not (tmp_path / "out").exists() and not (tmp_path / "idx").exists()
    job.write_text(f"input: [{', '.join(map(str, data['B']))}]\nstages:\n"
                   + stages.format(idx=indexes / "fuzzy", save=tmp_path / "idx"))
    outcomes = run_job(load_job(str(job)), str(tmp_path / "out"))
    assert outcomes[1].manifest["dedup"]["against"]["removed_for_index"] > 0
    assert json.loads((tmp_path / "idx" / "_manifest.json").read_text())["index"]["tiers"] == [2, 4]


@pytest.mark.parametrize("kind", ["exact", "fuzzy"])
def test_a_save_index_on_a_link_is_refused(data, indexes, tmp_path, kind, capsys):
    """Issue 29, point 9: ``--save-index`` on a link is refused as the run's other outputs are (before
    any work, exit 2, one line naming the path, the link's target untouched). The most tempting target
    is a finished index of the same kind: it is curate's own, so only the link check stands in the way."""
    import os

    b = list(map(str, data["B"]))
    decoy = tmp_path / "decoy"
    decoy.mkdir()
    (decoy / "notes.txt").write_text("the user's notes")
    (tmp_path / "empty").mkdir()  # the old code wrote the index there, through the link
    links = {"to-empty-folder": tmp_path / "empty", "to-index": indexes / kind, "to-file": decoy / "notes.txt",
             "dangling": tmp_path / "nowhere"}
    for name, target in links.items():
        os.symlink(target, tmp_path / name)
        for given in (tmp_path / name, f"{tmp_path / name}/"):  # a trailing '/' must not follow the link
            # the first in a real process, the others through cli.main in this one
            first = given == tmp_path / "to-empty-folder"
            refused(tmp_path, f"--save-index {given}: a symbolic link (to {target})", kind, "--input", *b,
                    "--save-index", given, touched=[decoy, indexes / kind], capsys=None if first else capsys)
    assert not (tmp_path / "nowhere").exists() and not any((tmp_path / "empty").iterdir())
    # a link below the index folder: a table's folder led elsewhere
    holder = tmp_path / "holder"
    holder.mkdir()
    os.symlink(decoy, holder / ("hashes" if kind == "exact" else "buckets"))
    refused(tmp_path, f"--save-index {holder}: {holder / ('hashes' if kind == 'exact' else 'buckets')} is a "
            f"symbolic link (to {decoy})", kind, "--input", *b, "--save-index", holder, touched=[decoy, holder], capsys=capsys)
    # a regular file where the index would go
    refused(tmp_path, f"--save-index {decoy / 'notes.txt'}: exists and is not a directory", kind, "--input", *b,
            "--save-index", decoy / "notes.txt", touched=[decoy], capsys=capsys)
