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
from tests.conftest import read_output, run_stage, side, write_jsonl

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


def test_removed_units_are_what_no_other_window_needs():
    # sentences: span 0 is a later occurrence; span 1 (a first occurrence, or too short to hash) keeps 1 to 3
    assert segments.removed_units([0], 4, "sentence").tolist() == [0]
    assert segments.removed_units([2, 3], 6, "sentence").tolist() == [4, 5]  # ABABAB: ABA and BAB at 0, 1
    assert segments.removed_units([0, 1], 4, "sentence").tolist() == [0, 1, 2, 3]
    assert segments.removed_units([0], 3, "sentence").tolist() == [0, 1, 2]
    # lines and paragraphs: every later occurrence, the plain rule
    assert segments.removed_units([3, 1], 4, "line").tolist() == [1, 3]
    assert segments.removed_units([], 4, "paragraph").tolist() == []


def test_settings():
    with pytest.raises(SettingsError, match="min_span_words"):
        spans.SpanDedupSettings(min_span_words=0)
    with pytest.raises(SettingsError, match="bloom_fp"):
        spans.SpanDedupSettings(bloom_fp=1.0)
    with pytest.raises(SettingsError, match="GiB filter"):
        spans.SpanDedupSettings(bloom=True, bloom_capacity=10**12)
    with pytest.raises(SettingsError, match="bloom_max_fp"):
        spans.SpanDedupSettings(bloom_max_fp=0.0)
    with pytest.raises(SettingsError, match="bloom_max_fp 1e-07 is below bloom_fp 1e-06"):
        spans.SpanDedupSettings(bloom=True, bloom_max_fp=1e-7)


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
    if unit == "sentence":
        # a span that occurs once stays whole, so what is left is a span of its own: three one-word
        # sentences after windows an earlier document holds
        docs.append((files - 1, "earlier-windows", flat[:3] + ["Hi.", "Yo."]))
        docs.append((files - 1, "few-words-left", flat[:3] + ["Hi.", "Yo.", "Ok."]))
    else:
        docs.append((files - 1, "few-words-left", flat[:3] + [phrase(2, 2)]))
    return docs


def windows_of(units, unit, min_span_words):
    """(position, key, hashed) of every window of a document (a unit, or three consecutive sentences);
    ``hashed``: it has at least ``min_span_words`` words."""
    width = 3 if unit == "sentence" else 1
    keys = [" ".join(u.split()) for u in units]
    found = [(k, " ".join(keys[k:k + width])) for k in range(len(keys) - width + 1)]
    return [(k, key, len(key.split()) >= min_span_words) for k, key in found]


def oracle(docs, unit, min_span_words, min_words):
    """Brute force over every window of every document (documents in order, no hashes): a hashed
    window's first occurrence is its smallest (document, position); a unit is removed when a later
    occurrence covers it and no other window of its document does (a first occurrence, repeated or
    not, or a window too short to hash). A document that lost something and is left under
    ``min_words`` words is dropped unless it holds the first occurrence of a window that repeats.
    ids -> expected text (kept), ids of dropped documents, removed bytes per changed document, and the
    removed unit indices per document (for :func:`check_rule`)."""
    width = 3 if unit == "sentence" else 1
    windows, first, count = [], {}, {}
    for n, (_, _, units) in enumerate(docs):
        found = windows_of(units, unit, min_span_words)
        for k, key, hashed in found:
            if hashed:
                first.setdefault(key, (n, k))
                count[key] = count.get(key, 0) + 1
        windows.append(found)
    kept, dropped, removed_bytes, removed_units = {}, set(), {}, {}
    for n, (_, ident, units) in enumerate(docs):
        later, others, holds = set(), set(), False
        for k, key, hashed in windows[n]:
            if hashed and first[key] != (n, k):
                later |= set(range(k, k + width))
            else:
                others |= set(range(k, k + width))
                holds |= hashed and count[key] > 1
        removed = later - others
        removed_units[ident] = removed
        sep = SEPARATOR[unit]
        text = sep.join(units)
        new = sep.join(u for k, u in enumerate(units) if k not in removed)
        if removed:
            removed_bytes[ident] = len(text.encode()) - len(new.encode())
        if removed and len(new.split()) < max(min_words, 1) and not holds:
            dropped.add(ident)
        else:
            kept[ident] = new
    return kept, dropped, removed_bytes, removed_units


def check_rule(docs, unit, min_span_words, kept, dropped, removed_units):
    """What the rule promises, checked by brute force on a result (the output texts ``kept``, the
    ``dropped`` ids, the removed unit indices per document): (1) every distinct window of the input,
    hashed or not, occurs whole in the output of the first document that holds it, read back from the
    output texts, unless that document was dropped, which never happens to one holding the first
    occurrence of a hashed window that repeats (so no repeat loses every copy, and a window that occurs
    once goes only with a dropped document); (2) every removed unit lies in a later occurrence of a
    window whose first occurrence is kept whole in a kept document; (3) every later occurrence is cut,
    unless the document's other windows cover all of it."""
    width = 3 if unit == "sentence" else 1
    windows = [windows_of(units, unit, min_span_words) for _, _, units in docs]
    occurrences, hashed = {}, {}
    for n, found in enumerate(windows):
        for k, key, h in found:
            occurrences.setdefault(key, []).append((n, k))
            hashed[key] = h
    ids = [ident for _, ident, _ in docs]
    out_windows = {ident: {key for _, key, _ in windows_of(texts_of(text, unit), unit, min_span_words)}
                   for ident, text in kept.items()}
    assert not set(kept) & set(dropped) and set(kept) | set(dropped) == set(ids)

    def whole(n, k):
        return ids[n] not in dropped and not removed_units[ids[n]] & set(range(k, k + width))

    for key, places in occurrences.items():
        n = places[0][0]
        if ids[n] in dropped:
            assert not (hashed[key] and len(places) > 1), (key, ids[n])  # (1)
        else:
            assert key in out_windows[ids[n]], (key, ids[n])  # (1)
    others = {n: set() for n in range(len(docs))}
    later = {n: [] for n in range(len(docs))}
    for key, places in occurrences.items():
        for j, (n, k) in enumerate(places):
            if hashed[key] and j > 0:
                later[n].append((k, places[0]))
            else:
                others[n] |= set(range(k, k + width))
    for n, ident in enumerate(ids):
        for u in removed_units[ident]:
            assert any(k <= u < k + width and whole(*first) for k, first in later[n]), (ident, u)  # (2)
        for k, _ in later[n]:
            span = set(range(k, k + width))
            assert span & removed_units[ident] or span <= others[n], (ident, k)  # (3)


def write_files(tmp_path, docs, unit):
    files = sorted({f for f, _, _ in docs})
    return [write_jsonl(tmp_path / "in" / f"part-{f}.jsonl",
                        [{"id": i, "text": SEPARATOR[unit].join(us)} for g, i, us in docs if g == f]) for f in files]


@pytest.mark.parametrize("unit", ["paragraph", "line", "sentence"])
def test_stage_equals_the_oracle(tmp_path, unit):
    docs = generate(unit)
    settings = {"min_span_words": 3, "min_words": 6}
    kept, dropped, removed_bytes, removed_units = oracle(docs, unit, 3, 6)
    check_rule(docs, unit, 3, kept, dropped, removed_units)
    assert len(removed_bytes) > 10 and {"emptied", "few-words-left"} <= dropped  # the planted repeats bite
    assert any("Home" in t for t in kept.values())
    out = tmp_path / "out"
    manifest = run_stage(STAGE[unit], settings, write_files(tmp_path, docs, unit), out)
    assert manifest["partitions"] == 3
    got = read_output(out)
    assert dict(zip(got["id"], got["text"])) == kept
    rejects = pd.read_parquet(side(out, "_rejects"))
    assert set(rejects["id"]) == dropped and set(rejects["_reason"]) == {spans.REASONS[unit]}
    assert manifest["counts"]["dropped"] == {spans.REASONS[unit]: len(dropped)}
    audit = pd.read_parquet(side(out, "_duplicates"))
    assert dict(zip(audit["id"], audit["removed_bytes"])) == removed_bytes
    assert set(audit.loc[audit["dropped"], "id"]) == dropped
    info = manifest["dedup"]
    assert info["bytes_removed"] == sum(removed_bytes.values()) and info["documents_changed"] == len(removed_bytes)
    assert sum(info["removed_bytes_per_document"].values()) == len(removed_bytes)
    assert info["largest"][0][1] == max(removed_bytes.values())


# --------------------------------------------------------------------------- overlapping repeats


def mode(bloom):
    """The settings of the Bloom mode (a filter sized for these small inputs), or none (the shuffle)."""
    return {"bloom": True, "bloom_capacity": 5000} if bloom else {}


def run_units(tmp_path, unit, files, settings, name="out", **io):
    """The stage on documents given as lists of units per input file; id -> output text, dropped ids."""
    docs = [(f, ident, units) for f, group in enumerate(files) for ident, units in group]
    out = tmp_path / name
    manifest = run_stage(STAGE[unit], settings, write_files(tmp_path / f"{name}-in", docs, unit), out, **io)
    got = read_output(out)
    rejects = side(out, "_rejects")
    dropped = set(pd.read_parquet(rejects)["id"]) if rejects.exists() else set()
    return docs, dict(zip(got["id"], got["text"])), dropped, manifest


@pytest.mark.parametrize("bloom", [False, True], ids=["shuffle", "bloom"])
def test_periodic_text_keeps_both_spans(tmp_path, bloom):
    """"A. B. A. B. A. B.": the spans ABA and BAB first occur at sentences 0 and 1; cutting every later
    window (sentences 2 to 5) would leave "A. B.", where neither survives. Only what no other window
    needs goes: in q, BAB (kept in p) loses the B that only it covers, and ABE, which occurs only in q,
    stays whole (before, q kept "E." alone)."""
    a, b, e = "Alpha beta gamma.", "Delta epsilon zeta.", "Eta theta iota."
    files = [[("p", [a, b, a, b, a, b]), ("q", [b, a, b, e])]]
    settings = {"min_span_words": 1, "min_words": 0, **mode(bloom)}
    docs, texts, dropped, _ = run_units(tmp_path, "sentence", files, settings)
    assert texts == {"p": " ".join([a, b, a, b]), "q": " ".join([a, b, e])} and not dropped
    kept, gone, _, removed = oracle(docs, "sentence", 1, 0)
    assert texts == kept and dropped == gone
    check_rule(docs, "sentence", 1, texts, dropped, removed)


@pytest.mark.parametrize("bloom", [False, True], ids=["shuffle", "bloom"])
def test_a_span_next_to_a_removed_repeat_stays_whole(tmp_path, bloom):
    """Issue 47, point 8: e1 = S1 S2 S3, e2 = S1 S2 S3 S4, e3 = S2 S3 S4 S0 (e3 in another partition).
    e2 repeats S1 S2 S3 but holds the first S2 S3 S4, so it keeps S2 S3 S4; e3 repeats S2 S3 S4, but
    S3 S4 S0 occurs only there. Before, e3 lost S2 S3 S4 whole and S3 S4 S0 was in no output."""
    s0, s1, s2, s3, s4 = (f"Sentence {w} here." for w in ("zero", "one", "two", "three", "four"))
    files = [[("e1", [s1, s2, s3]), ("e2", [s1, s2, s3, s4])], [("e3", [s2, s3, s4, s0])]]
    settings = {"min_span_words": 1, "min_words": 0, **mode(bloom)}
    docs, texts, dropped, manifest = run_units(tmp_path, "sentence", files, settings)
    assert manifest["partitions"] == 2
    assert texts == {"e1": f"{s1} {s2} {s3}", "e2": f"{s2} {s3} {s4}", "e3": f"{s3} {s4} {s0}"} and not dropped
    assert manifest["dedup"]["later_spans_left_whole"] == 0 and manifest["dedup"]["spans_removed"] == 2
    kept, gone, _, removed = oracle(docs, "sentence", 1, 0)
    assert texts == kept and dropped == gone
    check_rule(docs, "sentence", 1, texts, dropped, removed)


def test_a_short_copy_between_new_sentences_stays_and_is_counted(tmp_path):
    """The price of keeping every span: b repeats a's three sentences between two sentences a does not
    have, so both windows across the copy's edges occur only in b and keep all of it; the copy that
    stays is counted (``later_spans_left_whole``)."""
    s = [f"Sentence {w} here." for w in ("one", "two", "three", "before", "after")]
    files = [[("a", s[0:3])], [("b", [s[3], *s[0:3], s[4]])]]
    docs, texts, dropped, manifest = run_units(tmp_path, "sentence", files, {"min_span_words": 1, "min_words": 0})
    assert texts == {"a": " ".join(s[0:3]), "b": " ".join([s[3], *s[0:3], s[4]])} and not dropped
    assert manifest["dedup"]["later_spans_left_whole"] == 1 and manifest["dedup"]["spans_removed"] == 0
    kept, gone, _, removed = oracle(docs, "sentence", 1, 0)
    assert texts == kept and dropped == gone
    check_rule(docs, "sentence", 1, texts, dropped, removed)


def test_a_short_document_holding_a_first_occurrence_is_kept(tmp_path):
    """d1 loses a line and is left under --min-words, but it holds the first occurrence of a line that
    d2 repeats (and loses): dropping d1 would lose that line everywhere."""
    first, shared = "a line the corpus holds twice", "a second line that d2 repeats later"
    files = [[("d0", [first, "filler words so that d0 is long enough to stay"])],
             [("d1", [first, shared]), ("d2", [shared] + [f"unique words in line {k} of d2" for k in range(5)])]]
    docs, texts, dropped, manifest = run_units(tmp_path, "line", files, {"min_span_words": 2, "min_words": 20})
    assert texts["d1"] == shared and "d2" in texts and shared not in texts["d2"] and not dropped
    kept, gone, _, removed = oracle(docs, "line", 2, 20)
    assert texts == kept and dropped == gone
    check_rule(docs, "line", 2, kept, dropped, removed)


def alphabet_of(unit):
    """Four units, one of them short (so some windows go unhashed at --min-span-words 4)."""
    if unit == "sentence":
        return ["Ab cd.", "Ef gh ij.", "Kl.", "Mn op qr st."]
    return ["ab cd", "ef gh ij", "kl", "mn op qr st"]


def periodic(seed, unit, files=3, per_file=6):
    """Small documents over an alphabet of four units: periodic runs (period 1 to 3), one unit changed
    in some, runs repeated across documents, and documents that are a prefix, suffix or shifted copy
    of an earlier one."""
    rng = random.Random(seed)
    alphabet = alphabet_of(unit)
    made = []
    for f in range(files):
        group = []
        for j in range(per_file):
            r = rng.random()
            if made and r < 0.3:  # an earlier document, cut or shifted
                units = list(rng.choice(made))
                a = rng.randint(0, max(len(units) - 1, 0))
                units = units[a:] + [rng.choice(alphabet) for _ in range(rng.randint(0, 2))]
            else:
                pattern = [rng.choice(alphabet) for _ in range(rng.randint(1, 3))]
                units = [pattern[k % len(pattern)] for k in range(rng.randint(1, 9))]
                if units and rng.random() < 0.3:
                    units[rng.randrange(len(units))] = rng.choice(alphabet)
            made.append(units)
            group.append((f"f{f}-{j}", units))
        yield group


def random_text(seed, unit, files=3, per_file=6):
    """Small documents of units drawn at random from the same four: every window repeats somewhere
    or occurs once, in every overlap."""
    rng = random.Random(seed)
    alphabet = alphabet_of(unit)
    for f in range(files):
        yield [(f"f{f}-{j}", [rng.choice(alphabet) for _ in range(rng.randint(1, 9))]) for j in range(per_file)]


@pytest.mark.parametrize("text", [periodic, random_text])
@pytest.mark.parametrize("unit", ["sentence", "line", "paragraph"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_periodic_and_overlapping_repeats_against_brute_force(tmp_path, text, unit, seed):
    """The stage equals the oracle and keeps the rule's promises (:func:`check_rule`: every distinct
    span of the input stays whole somewhere), in three partitions and in partitions of about two
    documents, and the Bloom mode gives the same."""
    files = list(text(seed, unit))
    msw = 4
    settings = {"min_span_words": msw, "min_words": 3}
    docs, texts, dropped, manifest = run_units(tmp_path, unit, files, settings)
    kept, gone, removed_bytes, removed = oracle(docs, unit, msw, 3)
    check_rule(docs, unit, msw, kept, gone, removed)
    assert manifest["partitions"] == 3
    assert texts == kept and dropped == gone
    check_rule(docs, unit, msw, texts, dropped, removed)
    audit = pd.read_parquet(side(tmp_path / "out", "_duplicates"))
    assert dict(zip(audit["id"], audit["removed_bytes"])) == removed_bytes
    # the same documents cut into partitions of about two documents: the same result
    _, small, small_dropped, m = run_units(tmp_path, unit, files, settings, name="small", blocksize="100")
    assert m["partitions"] > 6 and small == texts and small_dropped == dropped
    _, one_pass, bloom_dropped, b = run_units(tmp_path, unit, files, {**settings, **mode(True)}, name="bloom")
    assert one_pass == texts and bloom_dropped == dropped
    assert {k: v for k, v in b["dedup"].items() if k not in ("mode", "bloom")} == \
        {k: v for k, v in manifest["dedup"].items() if k != "mode"}
    assert b["dedup"]["bloom"]["repeated_filter"]["inserted"] > 0


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
    assert pd.read_parquet(side(tmp_path / "bloom", "_duplicates")).equals(pd.read_parquet(side(tmp_path / "exact", "_duplicates")))


def test_bloom_mode_stops_past_its_false_positive_bound(tmp_path):
    """240 documents of lines that never repeat, 4.8 times the filter's capacity: past --bloom-max-fp
    the filter would remove lines that are no repeats (200 of 240 documents were dropped, with exit
    0 and a warning); the run stops with one line naming --bloom-capacity instead."""
    from curate.app import cli

    rng = random.Random(8)
    docs = [(k // 80, f"d{k:03d}", [" ".join(f"w{rng.randrange(10**6)}" for _ in range(6)) for _ in range(3)])
            for k in range(240)]
    files = write_files(tmp_path, docs, "line")
    with pytest.raises(SettingsError, match=r"--bloom-capacity 150: too small.*--bloom-max-fp 0.0001"):
        run_stage("line_dedup", {"bloom": True, "bloom_capacity": 150, "min_words": 0}, files, tmp_path / "out")
    # a lenient bound lets it through, with the rate it reached in the manifest
    manifest = run_stage("line_dedup", {"bloom": True, "bloom_capacity": 150, "bloom_max_fp": 0.5, "min_words": 0},
                         files, tmp_path / "lenient")
    assert manifest["dedup"]["bloom"]["estimated_false_positive_rate_at_end"] > 1e-4
    args = ["--log-level", "WARNING", "dedup", "lines", "--input", *map(str, files), "--output",
            str(tmp_path / "cli"), "--bloom", "--bloom-capacity", "150"]
    assert cli.main(args) == 2


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
    # the fill the formula implies: 1 - exp(-kn/m); the rate estimated from it, fill^k
    assert abs(bf.fill() - (1 - math.exp(-bf.k * n / bf.m))) < 0.01
    assert bf.ones == int(np.bitwise_count(bf.bits).sum()) and abs(bf.estimated_rate() - expected) < 0.1 * expected
    # beyond its capacity the rate grows as the formula says
    bf.add(hashes(n))
    worse = bloom.false_positive_rate(bf.m, bf.k, 2 * n)
    assert abs(bf.contains(others[:100_000]).mean() - worse) < 5 * math.sqrt(worse / 100_000)
