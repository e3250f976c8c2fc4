"""substring_dedup against a brute-force oracle: every window of min-tokens tokens of every document,
in document order, looked up in a dict of all windows seen (no hashes, no shuffle). Generated text in
several input files (partitions), with overlapping repeats, a repeat split over a document boundary,
a span repeated 1,000 times, and hashes made to collide on purpose."""

import random

import numpy as np
import pandas as pd
import pytest

from curate.stages.dedup import substrings, windows as win
from curate.stages.errors import SettingsError
from tests.conftest import read_output, run_stage, side, write_jsonl

ENCODING = "tiktoken:cl100k_base"


def encoder():
    from curate.stages.tokenize.load import load_tokenizer

    return load_tokenizer(ENCODING)._enc


def oracle(docs, width):
    """id -> (expected text, removed byte positions as a set, whether it holds a first occurrence of a
    repeated window) by direct search over token windows: a window's later occurrences lose their
    tokens, except those that first occurrences of repeated windows cover (never cut)."""
    enc = encoder()
    ids = [enc.encode_ordinary(text) for _, text in docs]
    first, count = {}, {}
    for n, t in enumerate(ids):
        for p in range(len(t) - width + 1):
            key = tuple(t[p:p + width])
            first.setdefault(key, (n, p))
            count[key] = count.get(key, 0) + 1
    out = {}
    for n, ((ident, _), t) in enumerate(zip(docs, ids)):
        later, anchor = np.zeros(len(t), dtype=bool), np.zeros(len(t), dtype=bool)
        for p in range(len(t) - width + 1):
            key = tuple(t[p:p + width])
            if first[key] != (n, p):
                later[p:p + width] = True
            elif count[key] > 1:
                anchor[p:p + width] = True
        removed = later & ~anchor
        pieces = [enc.decode_single_token_bytes(x) for x in t]
        gone, at = set(), 0
        for piece, r in zip(pieces, removed):
            if r:
                gone.update(range(at, at + len(piece)))
            at += len(piece)
        out[ident] = (b"".join(p for p, r in zip(pieces, removed) if not r).decode(), gone, bool(anchor.any()))
    return out


def check_windows(docs, width, texts):
    """By brute force on the output texts: every window that occurs more than once in the input occurs
    whole in the output of the document where it first occurs, so no repeat loses every copy."""
    enc = encoder()
    first, count = {}, {}
    for ident, text in docs:
        t = enc.encode_ordinary(text)
        for p in range(len(t) - width + 1):
            key = tuple(t[p:p + width])
            first.setdefault(key, ident)
            count[key] = count.get(key, 0) + 1
    repeated = [key for key, c in count.items() if c > 1]
    for key in repeated:
        assert enc.decode_bytes(list(key)) in texts[first[key]].encode(), (first[key], enc.decode(list(key)))
    return len(repeated)


def words(rng, n):
    vocab = ["river", "stone", "valley", "light", "harbor", "market", "bread", "table", "window", "garden",
             "winter", "signal", "copper", "meadow", "lantern", "engine", "forest", "letter", "silver", "paper"]
    return " ".join(rng.choice(vocab) + str(rng.randint(0, 99)) for _ in range(n))


def write(tmp_path, files):
    return [write_jsonl(tmp_path / "in" / f"part-{k}.jsonl", [{"id": i, "text": t} for i, t in docs])
            for k, docs in enumerate(files)]


def check(tmp_path, files, width, **settings):
    docs = [d for f in files for d in f]
    expected = oracle(docs, width)
    out = tmp_path / "out"
    manifest = run_stage("substring_dedup", {"min_tokens": width, **settings}, write(tmp_path, files), out)
    got = read_output(out)
    texts = dict(zip(got["id"], got["text"]))
    dropped = {i for i, (t, _, holds) in expected.items() if not t.split() and not holds}
    assert texts == {i: t for i, (t, _, _) in expected.items() if i not in dropped}
    check_windows(docs, width, texts)
    if dropped:
        rejects = pd.read_parquet(side(out, "_rejects"))
        assert set(rejects["id"]) == dropped and set(rejects["_reason"]) == {substrings.REASON}
    audit = pd.read_parquet(side(out, "_duplicates"))
    assert dict(zip(audit["id"], audit["removed_bytes"])) == {i: len(g) for i, (_, g, _) in expected.items() if g}
    assert manifest["dedup"]["bytes_removed"] == sum(len(g) for _, g, _ in expected.values())
    return manifest, expected, texts


def test_overlapping_repeats_and_document_boundaries(tmp_path):
    rng = random.Random(4)
    x, y, z = words(rng, 40), words(rng, 40), words(rng, 40)
    xs = x.split()
    a0 = words(rng, 30) + " " + x + " " + words(rng, 10)
    files = [
        [("a0", a0),
         ("a1", words(rng, 20) + " " + " ".join(xs[15:]) + " " + y + " " + words(rng, 5)),  # overlaps x's tail
         ("a2", x + " " + words(rng, 8) + " " + x),                                         # x twice in one doc
         ("a3", words(rng, 25) + " " + z + " end")],
        [("b0", words(rng, 12) + " " + " ".join(z.split()[:20])),   # z split over a document boundary:
         ("b1", " ".join(z.split()[20:]) + " " + words(rng, 12)),   # neither half is long enough alone
         ("b2", a0),                                               # wholly repeated: emptied, dropped
         ("b4", y + " " + x),                                      # all but the start (no space before y)
         ("b3", ("tick " * 150).strip())],                         # a period-1 repeat of itself
        [("c0", words(rng, 15) + " " + " ".join(xs[:30]) + " " + " ".join(y.split()[10:]) + " tail"),
         ("c1", words(rng, 3))],                                   # shorter than a window
    ]
    manifest, expected, texts = check(tmp_path, files, 50)
    assert texts["b0"] == files[1][0][1] and texts["b1"] == files[1][1][1]  # nothing cut across the boundary
    assert "b2" not in texts and texts["a0"] == a0                         # the first occurrence stays
    assert texts["b4"] and y.startswith(texts["b4"])  # what remains: tokens of y's first word (no space before)
    assert texts["b3"].startswith("tick") and len(texts["b3"]) < 300
    assert manifest["partitions"] == 3 and manifest["counts"]["dropped"] == {substrings.REASON: 1}
    assert {"windows", "matches", "runs", "fetched", "verified"} <= set(manifest["steps"])


def test_periodic_text_keeps_its_windows(tmp_path):
    """"ha" 60 times at --min-tokens 20 (cl100k: "h", 57 "ah", "ahaha") became "haha": every window is
    a later copy of one of the first, and cutting them whole cut the first ones too. The first
    occurrences stay whole: "h" and the first 20 "ah", and the last window (19 "ah", "ahaha"), which
    "ha" 30 times, all of it repeats, shares."""
    files = [[("ha", "ha" * 60), ("x", "ha" * 30)]]
    manifest, expected, texts = check(tmp_path, files, 20)
    assert texts["ha"] == "h" + "ah" * 20 + "ah" * 19 + "ahaha"  # before: "haha"
    assert "x" not in texts and manifest["dedup"]["repeated_tokens_kept"] > 0


def test_a_window_shared_by_two_later_documents_stays_in_one(tmp_path):
    """d1 = A B, d2 = A B C, d3 = B C D (blocks of several tokens, the window two blocks wide): cutting
    the later windows whole would leave B C in no document; d2 keeps it."""
    rng = random.Random(3)
    a, b, c, d = (words(rng, 6) for _ in range(4))
    # d3 starts with "zz " so that b's first token carries its space there too
    files = [[("d1", f"{a} {b}"), ("d2", f"{a} {b} {c}")], [("d3", f"zz {b} {c} {d}")]]
    width = len(encoder().encode_ordinary(" " + b)) + 2
    manifest, expected, texts = check(tmp_path, files, width)
    assert f" {b} {c}" in texts["d2"] and f"{b} {c}" not in texts["d3"] and manifest["partitions"] == 2


def periodic_texts(seed, files=3, per_file=6):
    """Words of a four-word alphabet: periodic runs (period 1 to 3), one word changed in some, and
    documents that are a shifted, cut or extended copy of an earlier one."""
    rng = random.Random(seed)
    alphabet = ["ab", "cd", "ef", "gh"]
    made, out = [], []
    for f in range(files):
        group = []
        for j in range(per_file):
            if made and rng.random() < 0.35:
                w = list(rng.choice(made))
                w = w[rng.randint(0, len(w) // 2):] + [rng.choice(alphabet) for _ in range(rng.randint(0, 4))]
            else:
                pattern = [rng.choice(alphabet) for _ in range(rng.randint(1, 3))]
                w = [pattern[k % len(pattern)] for k in range(rng.randint(3, 24))]
                if rng.random() < 0.4:
                    w[rng.randrange(len(w))] = rng.choice(alphabet)
            made.append(w)
            group.append((f"f{f}-{j}", " ".join(w)))
        out.append(group)
    return out


@pytest.mark.parametrize("seed, width", [(1, 3), (2, 4), (3, 5), (4, 6)])
def test_periodic_and_overlapping_repeats_against_brute_force(tmp_path, seed, width):
    files = periodic_texts(seed)
    manifest, expected, texts = check(tmp_path, files, width)
    assert manifest["partitions"] == 3 and manifest["dedup"]["bytes_removed"] > 0


def test_a_span_repeated_a_thousand_times(tmp_path):
    rng = random.Random(9)
    span = words(rng, 30)
    docs = [(f"d{k:04d}", f"{words(rng, 3)} {span} {words(rng, 2)}") for k in range(1000)]
    manifest, expected, texts = check(tmp_path, [docs[:400], docs[400:750], docs[750:]], 40)
    assert texts["d0000"] == docs[0][1]
    # a window across the span's edge ("3" of "lantern3", then 39 tokens of the span) repeats wherever
    # two prefixes end alike: its first occurrence keeps up to 39 tokens of the span, and where a
    # document holds such firsts at both edges of the span (63 tokens, under twice 39), all of it
    changed = sum(t != d for (_, d), t in zip(docs, (texts[i] for i, _ in docs)))
    assert changed == sum(bool(g) for _, g, _ in expected.values()) > 900
    assert manifest["dedup"]["documents_changed"] == changed


def test_partitions_are_capped_whatever_the_blocksize(tmp_path, monkeypatch):
    """A partition costs ~15x its text in the windows step: the stage reads at most MAX_PARTITION_BYTES
    a partition (at --blocksize 128MiB a worker died at 2 GiB), and the result is the oracle's."""
    monkeypatch.setattr(substrings, "MAX_PARTITION_BYTES", 4000)
    rng = random.Random(4)
    span = words(rng, 30)
    docs = [(f"d{k:03d}", f"{words(rng, 8)} {span} {words(rng, 4)}") for k in range(200)]
    manifest, _, texts = check(tmp_path, [docs[:120], docs[120:]], 25)
    assert manifest["partitions"] > 5 and manifest["io"]["blocksize"] == "4000"
    assert texts["d000"] == docs[0][1] and manifest["dedup"]["documents_changed"] == 199


def test_hash_collisions_never_remove_text(tmp_path, monkeypatch):
    """With window hashes squeezed to 9 bits, hundreds of different windows share a hash: matches are
    only ever proposed by hashes, so whatever is removed must still be a true repeat."""
    rng = random.Random(2)
    x = words(rng, 30)
    files = [[(f"a{k}", words(rng, 20) + " " + x + " " + words(rng, 10)) for k in range(5)],
             [(f"b{k}", words(rng, 25) + " " + x) for k in range(5)]]
    mix = win._mix
    monkeypatch.setattr(win, "_mix", lambda z: mix(z) & np.uint64(511))
    docs = [d for f in files for d in f]
    expected = oracle(docs, 20)
    out = tmp_path / "out"
    manifest = run_stage("substring_dedup", {"min_tokens": 20}, write(tmp_path, files), out)
    removals = pd.read_parquet(side(out, "_work") / "verified")
    hashes = pd.read_parquet(side(out, "_work") / "windows")["hash"]
    assert hashes.nunique() <= 512 < manifest["dedup"]["windows"]  # more windows than hashes
    number = {(p << 32) + r: i for p, f in enumerate(files) for r, (i, _) in enumerate(f)}
    for d, a, b in zip(removals["doc"], removals["start"], removals["end"]):
        assert set(range(a, b)) <= expected[number[d]][1]
    assert len(removals)  # and collisions did not stop every true repeat from being found
    got = read_output(out)  # a window whose comparison failed stays whole: no repeat lost its first copy
    assert check_windows(docs, 20, dict(zip(got["id"], got["text"]))) > 0


@pytest.mark.parametrize("seed", [1, 5])
def test_hash_collisions_never_cost_a_first_occurrence(tmp_path, monkeypatch, seed):
    """Periodic text with window hashes squeezed to 3 bits: most windows are paired with another content,
    whose comparison fails. Such a window may be the first occurrence of its own content, paired with
    nothing equal: it is kept whole, so still no repeat loses every copy, and what goes is a true repeat."""
    files = periodic_texts(seed)
    mix = win._mix
    monkeypatch.setattr(win, "_mix", lambda z: mix(z) & np.uint64(7))
    docs = [d for f in files for d in f]
    expected = oracle(docs, 4)
    out = tmp_path / "out"
    run_stage("substring_dedup", {"min_tokens": 4}, write(tmp_path, files), out)
    removals = pd.read_parquet(side(out, "_work") / "verified")
    number = {(p << 32) + r: i for p, f in enumerate(files) for r, (i, _) in enumerate(f)}
    for d, a, b in zip(removals["doc"], removals["start"], removals["end"]):
        assert set(range(a, b)) <= expected[number[d]][1]
    got = read_output(out)
    assert check_windows(docs, 4, dict(zip(got["id"], got["text"]))) > 10


def test_byte_ranges_keep_whole_characters():
    length, inside, _ = win.token_tables(ENCODING)
    enc = encoder()
    text = "ab 😀😀 cd"
    ids = np.array(enc.encode_ordinary(text), dtype=np.uint32)
    split = [k for k in range(len(ids)) if inside[ids[k]]]
    assert split  # cl100k splits the emoji's bytes over tokens
    ranges = win.byte_ranges(ids, [(split[0], len(ids))], length, inside)
    raw = text.encode()
    for a, b in ranges:
        (raw[:a] + raw[b:]).decode()  # no character cut in half


def test_windows_never_cross_documents_and_hash_by_content():
    values = win.token_tables(ENCODING)[2]
    tokens = np.array([1, 2, 3, 4, 1, 2, 3, 9, 1, 2], dtype=np.uint32)
    offsets = np.array([0, 4, 8, 10])
    h, d, p = win.window_hashes(tokens, offsets, 3, values)
    assert d.tolist() == [0, 0, 1, 1] and p.tolist() == [0, 1, 0, 1]  # the 2-token document has none
    assert h[0] == h[2] and len(set(h.tolist())) == 3
    r = win.runs([5, 5, 5, 7], [0, 1, 3, 0], [1, 1, 1, 1], [4, 5, 6, 0])
    assert r["windows"].tolist() == [2, 1, 1] and r["start"].tolist() == [0, 3, 0]
    a = np.array([1, 2, 3, 4, 5, 6]), np.array([1, 2, 3, 0, 5, 6])
    assert win.verified(a[0], a[0], 10, 3) == [(10, 16)] and win.verified(*a, 10, 3) == [(10, 13)]
    assert win.verified(np.array([1, 2, 3, 4, 5]), np.array([1, 2, 3, 4, 0]), 0, 2) == [(0, 4)]
    assert win.verify_windows(*a, 10, 3) == ([(10, 13)], [(11, 16)])  # failed windows: kept whole
    assert win.verify_windows(a[0], a[0][:0], 0, 3) == ([], [(0, 6)])  # nothing fetched: all kept
    # later occurrences less first occurrences; the tokens that saved
    assert win.removed_tokens([(0, 4), (6, 9)], [(2, 7)], 10) == ([(0, 2), (7, 9)], 3)


def test_settings():
    with pytest.raises(SettingsError, match="min_tokens"):
        substrings.SubstringDedupSettings(min_tokens=1)
    with pytest.raises(SettingsError, match="tiktoken"):
        substrings.SubstringDedupSettings(tokenizer="gpt2")
