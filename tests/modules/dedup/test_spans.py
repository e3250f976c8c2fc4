"""paragraph_dedup, line_dedup, sentence_dedup: the text cutting by hand, the stages against a
brute-force oracle on generated documents (three input files, so three partitions), the Bloom mode
against the shuffle mode, and the Bloom filter's false-positive rate against its formula."""

import json
import math
import random

import numpy as np
import pandas as pd
import pytest

from curate.stages.dedup import bloom, segments, spans
from curate.stages.errors import SettingsError
from tests.conftest import read_output, run_stage, write_jsonl

SEPARATOR = {"paragraph": "\n\n", "line": "\n", "sentence": " "}
STAGE = {"paragraph": "paragraph_dedup", "line": "line_dedup", "sentence": "sentence_dedup"}


# --------------------------------------------------------------------------- cutting text by hand


def texts_of(text, unit):
    return [text[a:b] for a, b in segments.units(text, unit)]


def test_units():
    text = "\n\nTitle line\nsecond  line\n \n\n  Para two.\n\n\t\n"
    assert texts_of(text, "paragraph") == ["Title line\nsecond  line", "  Para two."]
    assert texts_of(text, "line") == ["Title line", "second  line", "  Para two."]
    s = 'He said "yes." Then left! Why? e.g. this\nA heading\nEnd.'
    assert texts_of(s, "sentence") == ['He said "yes."', "Then left!", "Why?", "e.g.", "this", "A heading", "End."]
    assert texts_of("", "line") == [] and texts_of(" \n \n", "paragraph") == []


def test_spans_hash_the_words_and_skip_short_ones():
    _, a = segments.spans("Home\nPress S  or / to search\r", "line", 3)
    _, b = segments.spans("Press S or / to\tsearch", "line", 3)
    assert [k for k, _, _ in a] == [1] and a[0][1:] == b[0][1:]  # whitespace never makes copies differ
    _, c = segments.spans("press S or / to search", "line", 3)
    assert c[0][1] != a[0][1]  # case does
    _, s = segments.spans("One a. Two b. Three c. Four d.", "sentence", 1)
    assert [k for k, _, _ in s] == [0, 1] and s[0][2] == 6
    assert segments.spans("One a. Two b.", "sentence", 1)[1] == []  # fewer than three sentences: no span


@pytest.mark.parametrize("removed, expected", [
    ([0], "b\n\nc"), ([1], "a\n\nc"), ([2], "a\n\nb"), ([1, 2], "a"), ([0, 1, 2], ""), ([0, 2], "b"),
])
def test_removal_keeps_the_rest_byte_for_byte(removed, expected):
    text = "a\n\nb\n\nc"
    cut = segments.units(text, "paragraph")
    assert segments.cut_ranges(text, segments.removal_ranges(cut, removed)) == expected


def test_sentence_spans_cover_three_sentences():
    assert segments.covered_units([0, 4], "sentence").tolist() == [0, 1, 2, 4, 5, 6]
    assert segments.covered_units([2, 0], "line").tolist() == [0, 2]


def test_settings():
    with pytest.raises(SettingsError, match="min_span_words"):
        spans.SpanDedupSettings(min_span_words=0)
    with pytest.raises(SettingsError, match="bloom_fp"):
        spans.SpanDedupSettings(bloom_fp=1.0)
    with pytest.raises(SettingsError, match="GiB filter"):
        spans.SpanDedupSettings(bloom=True, bloom_capacity=10**12)


# --------------------------------------------------------------------------- generated corpora and the oracle


def generate(unit, seed=3, files=3, per_file=14):
    """Documents as lists of units (joined by the unit's separator), with planted repeats: a pool of
    shared units (or, for sentences, runs of shared sentences) drawn into many documents, a unit repeated
    inside its own document, short shared lines ("Home"), whitespace that differs between copies, a
    document made only of earlier units (emptied) and one left with a few words."""
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(400)]

    def phrase(lo, hi):
        words = [rng.choice(vocab) for _ in range(rng.randint(lo, hi))]
        return " ".join(words) + (rng.choice(".!?") if unit == "sentence" else "")

    def spaced(u):  # another copy of u with other whitespace: the same span once normalised
        return u.replace(" ", "  ", 1) if unit == "sentence" else u.replace(" ", "\t ", 1)

    if unit == "sentence":
        pool = [[phrase(3, 8) for _ in range(rng.randint(3, 5))] for _ in range(5)]
    else:
        pool = [[phrase(4, 12)] for _ in range(8)]
    short = ["Home", "Share this"] if unit != "sentence" else ["Home."]
    docs = []
    for f in range(files):
        for j in range(per_file):
            units = []
            for _ in range(rng.randint(2, 6)):
                r = rng.random()
                if r < 0.35:
                    units += [spaced(u) if rng.random() < 0.2 else u for u in rng.choice(pool)]
                elif r < 0.45:
                    units.append(rng.choice(short))
                else:
                    units.append(phrase(2, 10))
                if unit == "paragraph" and rng.random() < 0.2:
                    units[-1] = units[-1].replace(" ", "\n", 1)  # a line break inside a paragraph
            if rng.random() < 0.15 and units:
                units.append(units[0])  # repeated inside its own document
            docs.append((f, f"f{f}-{j:02d}", units))
    flat = [u for pool_units in pool for u in pool_units]
    docs.append((files - 1, "emptied", flat[:3] + flat[:2]))
    docs.append((files - 1, "few-words-left", flat[:3] + [phrase(2, 2)]))
    return docs


def oracle(docs, unit, min_span_words, min_words):
    """Brute force: documents in order, a set of every span key seen; ids -> expected text (kept) and
    ids of dropped documents; removed bytes per changed document."""
    seen, kept, dropped, removed_bytes = set(), {}, set(), {}
    for _, ident, units in docs:
        keys = [" ".join(u.split()) for u in units]
        removed = set()
        width = 3 if unit == "sentence" else 1
        for k in range(len(keys) - width + 1):
            key = " ".join(keys[k:k + width])
            if len(key.split()) < min_span_words:
                continue
            if key in seen:
                removed |= set(range(k, k + width))
            else:
                seen.add(key)
        sep = SEPARATOR[unit]
        text = sep.join(units)
        new = sep.join(u for k, u in enumerate(units) if k not in removed)
        if removed:
            removed_bytes[ident] = len(text.encode()) - len(new.encode())
        if removed and len(new.split()) < max(min_words, 1):
            dropped.add(ident)
        else:
            kept[ident] = new
    return kept, dropped, removed_bytes


def write_files(tmp_path, docs, unit):
    files = sorted({f for f, _, _ in docs})
    return [write_jsonl(tmp_path / "in" / f"part-{f}.jsonl",
                        [{"id": i, "text": SEPARATOR[unit].join(us)} for g, i, us in docs if g == f]) for f in files]


@pytest.mark.parametrize("unit", ["paragraph", "line", "sentence"])
def test_stage_equals_the_oracle(tmp_path, unit):
    docs = generate(unit)
    settings = {"min_span_words": 3, "min_words": 6}
    kept, dropped, removed_bytes = oracle(docs, unit, 3, 6)
    assert len(removed_bytes) > 10 and len(dropped) >= 2 and "emptied" in dropped  # the planted repeats bite
    assert any("Home" in t for t in kept.values())
    out = tmp_path / "out"
    manifest = run_stage(STAGE[unit], settings, write_files(tmp_path, docs, unit), out)
    assert manifest["partitions"] == 3
    got = read_output(out)
    assert dict(zip(got["id"], got["text"])) == kept
    rejects = pd.read_parquet(out / "_rejects")
    assert set(rejects["id"]) == dropped and set(rejects["_reason"]) == {spans.REASONS[unit]}
    assert manifest["counts"]["dropped"] == {spans.REASONS[unit]: len(dropped)}
    audit = pd.read_parquet(out / "_duplicates")
    assert dict(zip(audit["id"], audit["removed_bytes"])) == removed_bytes
    assert set(audit.loc[audit["dropped"], "id"]) == dropped
    info = manifest["dedup"]
    assert info["bytes_removed"] == sum(removed_bytes.values()) and info["documents_changed"] == len(removed_bytes)
    assert sum(info["removed_bytes_per_document"].values()) == len(removed_bytes)
    assert info["largest"][0][1] == max(removed_bytes.values())


def test_bloom_mode_equals_the_shuffle_mode(tmp_path):
    docs = generate("line", seed=5)
    files = write_files(tmp_path, docs, "line")
    exact = run_stage("line_dedup", {"min_span_words": 2}, files, tmp_path / "exact")
    one_pass = run_stage("line_dedup", {"min_span_words": 2, "bloom": True, "bloom_capacity": 5000},
                         files, tmp_path / "bloom")
    assert read_output(tmp_path / "bloom").equals(read_output(tmp_path / "exact"))
    assert one_pass["counts"] == exact["counts"]
    assert {k: v for k, v in one_pass["dedup"].items() if k not in ("mode", "bloom")} == \
        {k: v for k, v in exact["dedup"].items() if k != "mode"}
    info = one_pass["dedup"]["bloom"]
    assert info["hash_functions"] == 20 and info["inserted"] < 5000 and info["false_positive_rate_at_end"] < 1e-6
    assert pd.read_parquet(tmp_path / "bloom" / "_duplicates").equals(pd.read_parquet(tmp_path / "exact" / "_duplicates"))


def test_rerun_is_byte_identical_the_cli_words_and_the_report(tmp_path):
    from curate.app import cli

    docs = generate("sentence", seed=7, files=2, per_file=6)
    files = write_files(tmp_path, docs, "sentence")
    out = tmp_path / "out"
    args = ["--log-level", "WARNING", "dedup", "sentences", "--input", *map(str, files), "--output", str(out),
            "--min-span-words", "3", "--min-words", "6"]
    assert cli.main(args) == 0
    first = [p.read_bytes() for p in sorted(out.glob("part-*"))]
    assert json.loads((out / "_manifest.json").read_text())["stage"] == "sentence_dedup"
    assert cli.main([*args, "--force"]) == 0
    assert [p.read_bytes() for p in sorted(out.glob("part-*"))] == first
    page = tmp_path / "report.html"  # the report shows the bytes removed per document
    assert cli.main(["--log-level", "WARNING", "report", str(out), "--html", str(page)]) == 0
    assert "removed inside documents" in page.read_text()


# --------------------------------------------------------------------------- the Bloom filter


def test_bloom_false_positive_rate_matches_the_formula():
    rng = np.random.default_rng(11)
    n, p = 20_000, 0.01
    bf = bloom.BloomFilter(n, p)
    def hashes(size):  # uniform 64-bit values, as XXH3 gives; two draws share one with chance ~ 2^-45
        return rng.integers(0, 2**64 - 1, size=size, dtype=np.uint64, endpoint=True)

    items = hashes(n)
    bf.add(items)
    assert bf.contains(items).all()  # no false negatives
    others = hashes(400_000)
    assert not np.isin(others, items).any()
    observed = bf.contains(others).mean()
    expected = bloom.false_positive_rate(bf.m, bf.k, n)
    assert abs(expected - p) < 0.1 * p  # the sizing formula gives the target rate at capacity
    sigma = math.sqrt(expected * (1 - expected) / len(others))
    assert abs(observed - expected) < 5 * sigma, (observed, expected)
    # the fill the formula implies: 1 - exp(-kn/m)
    assert abs(bf.fill() - (1 - math.exp(-bf.k * n / bf.m))) < 0.01
    # beyond its capacity the rate grows as the formula says
    bf.add(hashes(n))
    worse = bloom.false_positive_rate(bf.m, bf.k, 2 * n)
    assert abs(bf.contains(others[:100_000]).mean() - worse) < 5 * math.sqrt(worse / 100_000)
