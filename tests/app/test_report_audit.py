"""The HTML report shows a fuzzy run's accuracy audit and component sizes (issue 33, point 3).

A real fuzzy run over two partitions: eight documents of 100 random words and four near copies of
four of them (one or two words changed: true Jaccard 0.81 to 0.90, all at or above the 0.8
threshold). Four bands of eight rows find such a pair with probability 0.56 to 0.89, so the run
misses some: the audit's recall is below 1 while its precision is 1 (the check removes a document
only for one truly similar), and a swapped row or a misread field shows. The page must carry the
manifest's figures, formatted, and a manifest without an audit must render as before.
"""

from __future__ import annotations

import argparse
import html
import json
import random

import pytest

from curate.app.commands import report
from tests.conftest import copy_output, run_stage, write_jsonl

SETTINGS = {"bands": 4, "rows": 8, "threshold": 0.8, "audit_sample": 50}


def texts():
    rng = random.Random(1)
    vocab = [f"w{i}" for i in range(300)]
    base = [[rng.choice(vocab) for _ in range(100)] for _ in range(8)]

    def edit(words, positions):
        words = list(words)
        for p in positions:
            words[p] = f"changed{p}"
        return words

    near = [edit(base[0], [30]), edit(base[1], [20, 70]), edit(base[2], [50]), edit(base[3], [15, 60])]
    return [" ".join(w) for w in base], [" ".join(w) for w in near]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A fuzzy run with its audit, and the same input through exact dedup and fuzzy without an audit."""
    tmp = tmp_path_factory.mktemp("audit")
    base, near = texts()
    files = [write_jsonl(tmp / "in" / "a.jsonl", [{"id": f"a{k}", "text": t} for k, t in enumerate(base)]),
             write_jsonl(tmp / "in" / "b.jsonl", [{"id": f"b{k}", "text": t} for k, t in enumerate(near)])]
    run_stage("fuzzy_dedup", SETTINGS, files, tmp / "fuzzy")
    run_stage("fuzzy_dedup", {**SETTINGS, "audit_sample": 0}, files, tmp / "unaudited")
    run_stage("exact_dedup", {}, files, tmp / "exact")
    return tmp


def page(folder, tmp_path):
    p = argparse.ArgumentParser()
    report.add_arguments(p)
    path = tmp_path / f"{folder.name}.html"
    assert report.main(p.parse_args([str(folder), "--html", str(path), "--png", str(tmp_path / "s.png")])) == 0
    return path.read_text(encoding="utf-8")


def cells(*values):
    """A table row's cells as the page writes them."""
    return "".join(f"<td>{v}</td>" for v in values)


def test_the_page_shows_the_audit_and_component_sizes_of_the_manifest(runs, tmp_path):
    from curate.stages.dedup import minhash

    base, near = texts()
    # by hand: the four planted pairs are the only pairs at or above the threshold
    assert all(0.8 <= j < 0.91 for j in minhash.jaccard(base[:4], near))
    dedup = json.loads((runs / "fuzzy" / "_manifest.json").read_text())["dedup"]
    audit = dedup["audit"]
    assert (audit["sample"], audit["pairs"], audit["true_pairs"]) == (12, 66, 4)  # all 12 documents, 12*11/2
    found = dedup["removed"]  # each removed document is one planted pair the run found
    assert 0 < found < 4 and audit["recall"] == found / 4 and audit["removed_in_sample"] == found
    assert audit["precision"] == 1.0
    assert sum(dedup["component_sizes"].values()) == dedup["components"] == found

    text = page(runs / "fuzzy", tmp_path)

    def pct(x):
        return f"{x:.2%}"

    lo, hi = audit["recall_ci"]
    assert cells("recall", pct(audit["recall"]), f"{pct(lo)} – {pct(hi)}",
                 "4 sampled pairs at or above the threshold (0.8): the share the run put in one component") in text
    lo, hi = audit["precision_ci"]
    assert cells("precision", "100.00%", f"{pct(lo)} – {pct(hi)}",
                 f"{found} sampled documents removed: the share at or above the threshold with the document "
                 "kept for them") in text
    assert "uniform sample of 12 documents compared all against all by their true Jaccard (66 pairs)" in text
    sizes = dedup["component_sizes"]
    assert "".join(f"<th>{html.escape(k)}</th>" for k in ["component size", *sizes]) in text
    assert cells("components", *(f"{v:,}" for v in sizes.values())) in text
    assert sizes["2"] == found and "&gt;=10000" in text


@pytest.mark.parametrize("folder", ["unaudited", "exact"])
def test_a_manifest_without_an_audit_renders_as_before(runs, tmp_path, folder):
    dedup = json.loads((runs / folder / "_manifest.json").read_text())["dedup"]
    assert "audit" not in dedup and "component_sizes" not in dedup
    text = page(runs / folder, tmp_path)
    assert "<h2 id='dedup'>Deduplication</h2>" in text
    assert "95% interval" not in text and "component size</th>" not in text


def test_an_audit_without_a_pair_in_its_sample_shows_dashes(runs, tmp_path):
    """No pair at or above the threshold in the sample: recall and its interval are None."""

    copy = tmp_path / "copy"
    copy_output(runs / "fuzzy", copy)
    manifest = json.loads((copy / "_manifest.json").read_text())
    manifest["dedup"]["audit"].update(true_pairs=0, recall=None, recall_ci=None)
    (copy / "_manifest.json").write_text(json.dumps(manifest))
    text = page(copy, tmp_path)
    assert cells("recall", "-", "-", "0 sampled pairs at or above the threshold (0.8): the share the run put in "
                 "one component") in text
