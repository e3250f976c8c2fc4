"""url_dedup (issue 44, point 2): URLs normalised as datatrove's users expect, one document kept per URL
by the policy, over several partitions, checked against a brute-force oracle written from the rule."""

import json

import pandas as pd
import pytest

from curate.stages.dedup.urls import UrlDedupSettings, normalize
from curate.stages.errors import SettingsError
from tests.conftest import read_output, run_stage, side, write_jsonl

S = UrlDedupSettings()


@pytest.mark.parametrize("a,b", [
    ("http://example.com/a", "https://example.com/a"),                 # scheme
    ("https://www.example.com/a", "https://example.com/a"),            # www.
    ("https://EXAMPLE.com:443/a", "https://example.com/a"),            # host case, default port
    ("http://example.com:80/a/", "https://example.com/a"),             # trailing slash
    ("https://example.com/a#top", "https://example.com/a"),            # fragment
    ("https://example.com/a?utm_source=x&id=3&fbclid=y", "https://example.com/a?id=3"),  # tracking
    ("https://bücher.de/x", "https://xn--bcher-kva.de/x"),             # IDNA
    ("https://example.com", "https://example.com/"),
])
def test_the_same_url(a, b):
    assert normalize(a, S) == normalize(b, S)


@pytest.mark.parametrize("a,b", [
    ("https://example.com/A", "https://example.com/a"),                # the path keeps its case
    ("https://example.com/a?id=3", "https://example.com/a?id=4"),
    ("https://example.com:8080/a", "https://example.com/a"),           # a port of its own
    ("https://example.com/a?b=1&a=2", "https://example.com/a?a=2&b=1"),  # parameters keep their order
    ("https://a.example.com/", "https://example.com/"),
])
def test_different_urls(a, b):
    assert normalize(a, S) != normalize(b, S)


def test_options_keep_what_they_name():
    strict = UrlDedupSettings(keep_scheme=True, keep_www=True, keep_fragment=True, drop_params=())
    assert normalize("http://x.org/a", strict) != normalize("https://x.org/a", strict)
    assert normalize("https://www.x.org/a", strict) != normalize("https://x.org/a", strict)
    assert normalize("https://x.org/a#1", strict) != normalize("https://x.org/a#2", strict)
    assert normalize("https://x.org/a?utm_source=1", strict) != normalize("https://x.org/a", strict)
    assert normalize(None, S) is None and normalize("  ", S) is None and normalize(float("nan"), S) is None
    assert normalize(pd.NA, S) is None  # a null of a string column: "<NA>" would make every such URL one
    with pytest.raises(SettingsError, match="keep"):
        UrlDedupSettings(keep="biggest")
    with pytest.raises(SettingsError, match="column"):
        UrlDedupSettings(column="_reason")


DOCS = [  # id, url, text
    ("a", "https://example.com/page", "short"),
    ("b", "http://www.example.com/page/", "the longest text of the page"),
    ("c", "https://example.com/page#x", "middle text"),
    ("d", "https://example.com/other?utm_campaign=z", "other page"),
    ("e", "https://example.com/other", "other page again, longer"),
    ("f", None, "no url at all"),
    ("g", "", "an empty url"),
    ("h", "https://unique.org/", "a page of its own"),
    ("i", None, "no url at all"),  # the same text as f: not url_dedup's business
]


def oracle(docs, keep):
    """Brute force: group by the normalised URL, keep one per group by the rule."""
    groups = {}
    for n, (i, u, t) in enumerate(docs):
        key = normalize(u, S)
        if key is not None:
            groups.setdefault(key, []).append((n, i, t))
    kept = {i for i, u, t in docs if normalize(u, S) is None}
    for members in groups.values():
        if keep == "longest":
            best = min(members, key=lambda m: (-len(m[2]), m[1], m[0]))
        elif keep == "first":
            best = min(members, key=lambda m: m[0])
        else:
            best = min(members, key=lambda m: (m[1], m[0]))
        kept.add(best[1])
    return kept


@pytest.mark.parametrize("keep", ["longest", "first", "smallest-id"])
def test_one_document_per_url_over_partitions(tmp_path, keep):
    # the first-read document of the /page group is "c" in the second file: "first" keeps it, not "a"
    order = [DOCS[2], DOCS[3], DOCS[5], DOCS[0], DOCS[1], DOCS[4], DOCS[6], DOCS[7], DOCS[8]]
    for k, chunk in enumerate((order[:3], order[3:6], order[6:])):
        write_jsonl(tmp_path / "in" / f"{k}.jsonl", [{"id": i, "url": u, "text": t} for i, u, t in chunk])
    m = run_stage("url_dedup", {"keep": keep}, tmp_path / "in", tmp_path / "out")
    kept = set(read_output(tmp_path / "out")["id"])
    assert kept == oracle(order, keep), (keep, kept)
    assert m["counts"]["dropped"] == {"url_duplicate": len(order) - len(kept)}
    dups = pd.concat([pd.read_parquet(p) for p in (side(tmp_path / "out", "_duplicates")).glob("*.parquet")])
    for _, row in dups[dups["removed"]].iterrows():  # every removal names a kept document of its URL
        assert row["kept_id"] in kept and row["id"] not in kept
    rejects = pd.concat([pd.read_parquet(p) for p in (side(tmp_path / "out", "_rejects")).glob("**/*.parquet")])
    assert set(rejects["_reason"]) == {"url_duplicate"}


def test_a_missing_column_is_named(tmp_path):
    write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "text": "x"}])
    from curate.stages.errors import CurateError

    with pytest.raises(CurateError, match="url"):
        run_stage("url_dedup", {}, tmp_path / "in.jsonl", tmp_path / "out")


def test_the_cli(tmp_path):
    from curate.app.cli import main

    write_jsonl(tmp_path / "in.jsonl", [{"id": i, "url": u, "text": t} for i, u, t in DOCS])
    assert main(["dedup", "urls", "--input", str(tmp_path / "in.jsonl"), "--output", str(tmp_path / "out"),
                 "--cluster", "threads"]) == 0
    manifest = json.loads((tmp_path / "out" / "_manifest.json").read_text())
    assert manifest["stage"] == "url_dedup" and manifest["counts"]["out"] == len(oracle(DOCS, "longest"))
