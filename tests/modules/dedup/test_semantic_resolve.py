"""semantic_dedup's resolve step: chains that leave a cluster, followed to their final kept document."""

import pandas as pd

from curate.stages.dedup.semantic import resolve


def dup_part(path, rows):
    """A duplicates part: (doc, id, kept_doc, kept_id, removed, via) per listed member."""
    pd.DataFrame(rows, columns=["doc", "id", "kept_doc", "kept_id", "removed", "via"]).to_parquet(path)
    return str(path)


def test_a_chain_through_two_witnesses_ends_at_the_kept_document(tmp_path):
    # cluster A: d1 removed for witness w2 (home B); cluster B: w2 removed for witness w3 (home C);
    # cluster C: w3 removed for its member k4, which is kept; w5 is kept at home (not listed)
    a = dup_part(tmp_path / "a.parquet", [(1, "d1", 2, "w2", True, True)])
    b = dup_part(tmp_path / "b.parquet", [(2, "w2", 3, "w3", True, True)])
    c = dup_part(tmp_path / "c.parquet", [(3, "w3", 4, "k4", True, False), (4, "k4", 4, "k4", False, False)])
    final = resolve.final_kept([a, b, c], {2: "w2", 5: "w5"})
    assert final == {2: (4, "k4"), 3: (4, "k4"), 5: (5, "w5")}


def test_resolve_rows_relink_the_removed_and_carry_the_weight(tmp_path):
    a = dup_part(tmp_path / "a.parquet", [(1, "d1", 2, "w2", True, True), (6, "d6", 2, "w2", True, True)])
    b = dup_part(tmp_path / "b.parquet", [(2, "w2", 4, "k4", True, False), (4, "k4", 4, "k4", False, False)])
    links = tmp_path / "links.parquet"
    pd.DataFrame({"doc": [1, 6, 2], "id": ["d1", "d6", "w2"], "end_doc": [2, 2, 2], "end_id": ["w2", "w2", "w2"],
                  "carry": [0, 0, 2]}).to_parquet(links)
    resolve.resolve_task([a, b], [str(links)], tmp_path / "out")
    rows = pd.read_parquet(tmp_path / "out" / "part-00000.parquet")
    removed = rows[rows["removed"]]
    assert dict(zip(removed["doc"], removed["kept_id"])) == {1: "k4", 6: "k4"}
    gains = rows[~rows["removed"]]
    assert gains[["doc", "size"]].values.tolist() == [[4, 2]] and (rows["rank"] == 1).all()
