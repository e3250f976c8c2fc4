"""A saved index carries its own identity (issue 29, point 9): an index whose manifest was edited to
match altered or swapped files, or whose fields are out of range, is refused in one line (exit 2)
naming what is wrong, never a bare exception or a silently wrong result.

The tamperer here knows the format: after each edit the manifest's file records and even the entry's
digests are recomputed, so each check must stand on its own."""

from __future__ import annotations

import json
import shutil

import pytest

from curate.stages.dedup import index
from curate.stages.output import file_checksum
from tests.conftest import copy_output, curate, curate_here, write_jsonl

WORDS = "river valley stone bread oven flour library shelf loan quiet garden rain seed harvest".split()


def docs(prefix, n, shift=0):
    return [{"id": f"{prefix}{k}", "text": " ".join(WORDS[(k + j + shift) % len(WORDS)] for j in range(40)) + f" {k}"}
            for k in range(n)]


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    d = tmp_path_factory.mktemp("ix")
    write_jsonl(d / "A" / "a.jsonl", docs("a", 6))
    write_jsonl(d / "A" / "b.jsonl", docs("b", 6, 3))
    write_jsonl(d / "B" / "a.jsonl", docs("c", 4))
    write_jsonl(d / "B" / "b.jsonl", docs("d", 4, 5))
    for kind in ("exact", "fuzzy"):  # through cli.main in this process: the indexes are what the tests start from
        for snap, name in (("A", ""), ("B", "B")):
            proc = curate_here("dedup", kind, "--input", str(d / snap / "*.jsonl"), "--output", str(d / f"out{name}-{kind}"),
                               "--save-index", str(d / f"ix{name}-{kind}"), "--cluster", "threads")
            assert proc.returncode == 0, proc.stderr
    return d


def resign(folder, edit=None, files=True, digests=True):
    """Edit the manifest's index entry, then make the manifest consistent again as a tamperer would:
    file records from the files on disk, and (``digests``) the entry's digests."""
    path = folder / "_manifest.json"
    m = json.loads(path.read_text())
    if edit:
        edit(m["index"])
    if files:
        for r in m["outputs"]:
            with open(folder / r["path"], "rb") as f:
                r["bytes"], r["xxh3_128"] = file_checksum(f)
    if digests:
        info = {k: v for k, v in m["index"].items() if k not in ("sha256", "content")}
        info["content"] = index.content_digest(m["outputs"])
        info["sha256"] = index._digest(info)
        m["index"] = info
    path.write_text(json.dumps(m, indent=2))


def against(made, kind, ix, here=True):
    """The dedup of B against ``ix`` through cli.main in this process; ``here=False``: in a real process
    (test_a_part_swapped_in_from_another_index_is_refused keeps one)."""
    args = ("dedup", kind, "--input", str(made / "B" / "*.jsonl"), "--output", str(made / "new"),
            "--against", str(ix), "--cluster", "threads")
    return curate_here(*args) if here else curate(*args, check=False)


def refused_with(proc, *words):
    assert proc.returncode == 2, proc.stderr
    err = proc.stderr.strip()
    assert "\n" not in err and "Traceback" not in err, err
    for w in words:
        assert w in err, err


@pytest.mark.parametrize("kind, field, value, words", [
    ("fuzzy", "tiers", [], "tiers []"),
    ("fuzzy", "parts", 0, "parts 0"),
    ("fuzzy", "partitions", 9, "partitions (9)"),
    ("exact", "parts", 2**40, "parts 1099511627776"),
    ("fuzzy", "documents", -1, "documents -1"),
    ("fuzzy", "tiers", [2, 1], "tiers [2, 1]"),
])
def test_fields_out_of_range_are_refused_by_name(made, tmp_path, kind, field, value, words):
    ix = tmp_path / "ix"
    copy_output(made / f"ix-{kind}", ix)
    resign(ix, lambda info: info.__setitem__(field, value))
    refused_with(against(made, kind, ix), words, "rebuild the index")


def test_an_edited_entry_without_new_digests_is_refused(made, tmp_path):
    ix = tmp_path / "ix"
    copy_output(made / "ix-fuzzy", ix)
    resign(ix, lambda info: info.__setitem__("tiers", []), digests=False)
    refused_with(against(made, "fuzzy", ix), "sha256", "the manifest was edited")


def test_a_part_swapped_in_from_another_index_is_refused(made, tmp_path):
    """The issue's case: a hashes part of the run's own input's index swapped in, sizes and checksums
    recomputed, slips past the own-input guard and removes all of B."""
    ix = tmp_path / "ix"
    copy_output(made / "ix-exact", ix)
    shutil.copy(made / "ixB-exact" / "hashes" / "part-00000.parquet", ix / "hashes" / "part-00000.parquet")
    resign(ix, digests=False)
    refused_with(against(made, "exact", ix, here=False), "content", "files were swapped or edited")


def test_a_changed_kind_is_refused(made, tmp_path):
    ix = tmp_path / "ix"
    copy_output(made / "ix-fuzzy", ix)
    resign(ix, lambda info: info.__setitem__("kind", "exact"))
    refused_with(against(made, "exact", ix))


def test_a_set_outside_its_file_is_bad_data_named(made, tmp_path):
    import numpy as np

    from curate.stages.dedup import shingles
    from curate.stages.errors import DataError

    f = tmp_path / "sets.u64"
    f.write_bytes(np.arange(10, dtype="<u8").tobytes())
    with open(f, "rb") as fh:
        values, offsets = shingles.read_ranges(fh, [2], [3], "x")
        assert values.tolist() == [2, 3, 4]
        for start, count in ((0, -1), (8, 5), (0, 2**40), (-3, 1)):
            with pytest.raises(DataError, match=r"x: shorter than its table says: a set at values .* outside the file.s 10 values"):
                shingles.read_ranges(fh, [start], [count], "x")
