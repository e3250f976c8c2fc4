"""extract_wikipedia: the two real dumps (one in UTF-16) and small hand-built ones."""

import bz2
import random
import string
import tracemalloc

import pandas as pd
import pytest

from curate.stages.errors import DataError
from curate.stages.extract import RawFile
from curate.stages.extract.wikipedia import (
    COLUMNS,
    ExtractWikipediaSettings,
    detect_encoding,
    extract_wikipedia_file,
)
from tests.conftest import read_output, run_stage, side
from tests.rawdata import BGWIKI, ENWIKI, mediawiki_xml, write_dump


def _frame(path, on_error="skip", **settings):
    path = str(path)
    return extract_wikipedia_file(RawFile(path, path.rsplit("/", 1)[-1]), ExtractWikipediaSettings(**settings),
                                  on_error)


PAGES = [
    {"id": 1, "title": "Tomato", "text": (
        "{{Infobox plant|name=Tomato}}\n"
        "The '''tomato''' is a [[berry|fruit]] of the plant ''Solanum''.<ref>Smith 2001</ref>\n\n"
        "== History ==\n"
        "It came from [[South America]].[[File:Tomato.jpg|thumb|A [[red]] tomato]]\n\n"
        "{| class=\"wikitable\"\n|-\n| cell one || cell two\n|}\n"
        "* Red\n* Yellow\n\n"
        "[[Category:Fruits]]\n[[de:Tomate]]\n__NOTOC__")},
    {"id": 2, "title": "Tomatoes", "redirect": "Tomato", "text": "#REDIRECT [[Tomato]]"},
    {"id": 3, "title": "Talk:Tomato", "ns": 1, "text": "Is it a fruit?"},
    {"id": 4, "title": "Empty", "text": "{{stub}}"},
    {"id": 5, "title": "Pepper", "text": "A '''pepper''' is spicy. See [[:Category:Spices]]."},
]


def test_wikitext_to_plain_text_by_hand(tmp_path):
    df = _frame(write_dump(tmp_path / "enwiki-test-pages-articles.xml.bz2", mediawiki_xml(PAGES)))
    kept = df[df["_reason"].isna()]
    assert kept["id"].tolist() == ["enwiki:1", "enwiki:5"]
    assert kept["text"].iloc[0] == (
        "The tomato is a fruit of the plant Solanum.\n\n"
        "History\n"
        "It came from South America.\n\n"
        "Red\nYellow"
    )
    assert kept["text"].iloc[1] == "A pepper is spicy. See Category:Spices."
    assert kept["url"].tolist() == ["https://en.wikipedia.org/wiki/Tomato", "https://en.wikipedia.org/wiki/Pepper"]
    assert (kept["language"] == "en").all()
    reasons = dict(zip(df["id"], df["_reason"]))
    assert reasons["enwiki:2"] == "redirect" and reasons["enwiki:3"] == "not_article" and reasons["enwiki:4"] == "no_text"


def test_real_english_dump_heavy_in_tables():
    df = _frame(ENWIKI)
    assert df["_reason"].isna().all()
    assert df["title"].tolist() == ["Constructive vote of no confidence", "List of Prison Break characters",
                                    "Academy Award for Best Production Design", "Economy of Estonia",
                                    "Brahui language"]
    assert df["id"].tolist() == ["enwiki:217916", "enwiki:3277686", "enwiki:316", "enwiki:9391", "enwiki:4702"]
    for marker in ("{{", "}}", "[[", "{|", "|}", "<ref", "Category:", "thumb|"):
        assert not df["text"].str.contains(marker, regex=False).any(), marker
    first = df["text"].iloc[0]
    assert first.startswith("The constructive vote of no confidence (in German: konstruktives Misstrauensvotum")
    assert "\nGermany\n" in first  # headings are kept as their own line


def test_real_bulgarian_dump_in_utf16_is_decoded():
    assert bz2.open(BGWIKI).read(2) == b"\xff\xfe"  # the fixture really is UTF-16 LE with a BOM
    df = _frame(BGWIKI)
    kept = df[df["_reason"].isna()]
    assert kept["title"].tolist() == ["Григориански календар"]
    assert kept["id"].tolist() == ["bgwiki:558"]
    assert kept["language"].tolist() == ["bg"]
    text = kept["text"].iloc[0]
    assert text.startswith("Григорианският календар (понякога наричан и Грегориански календар")
    assert "\ufffd" not in text and "Файл:" not in text and "File:" not in text
    assert df["_reason"].dropna().tolist() == ["not_article", "not_article"]


@pytest.mark.parametrize("encoding,bom", [("utf-16-le", False), ("utf-16-be", True), ("utf-8", True),
                                          ("utf-32-le", False), ("iso-8859-1", False)])
def test_encoding_is_detected(tmp_path, encoding, bom):
    xml = mediawiki_xml([{"id": 7, "title": "Café", "text": "Le café est une boisson très appréciée."}], lang="fr")
    if encoding == "iso-8859-1":
        xml = '<?xml version="1.0" encoding="ISO-8859-1"?>\n' + xml
    data = xml.encode(encoding)
    if bom:
        data = {"utf-16-be": b"\xfe\xff", "utf-8": b"\xef\xbb\xbf"}[encoding] + data
    assert detect_encoding(data[:64])[0].replace("_", "-") in (encoding, "latin-1", "iso8859-1")
    df = _frame(write_dump(tmp_path / "frwiki-x.xml.bz2", data))
    assert df["text"].tolist() == ["Le café est une boisson très appréciée."]
    assert df["title"].tolist() == ["Café"]


def test_two_dumps_dask_equals_pandas(tmp_path):
    manifest = run_stage("extract_wikipedia", {}, [ENWIKI, BGWIKI], tmp_path / "out")
    out = read_output(tmp_path / "out")
    assert manifest["partitions"] == 2
    assert manifest["counts"] == {"in": 8, "out": 6, "dropped": {"not_article": 2}}
    assert list(out.columns) == list(COLUMNS)
    expected = pd.concat([_frame(ENWIKI), _frame(BGWIKI)], ignore_index=True)
    expected = expected[expected["_reason"].isna()].drop(columns=["_reason", "_detail"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(out, expected, check_dtype=False)
    rejects = pd.read_parquet(side(tmp_path / "out", "_rejects"))
    assert "text" not in rejects.columns  # rejected pages keep metadata only


def test_truncated_dump_keeps_the_pages_before_the_break(tmp_path):
    # random words, so that the dump spans several bzip2 blocks of 900 kB (a block decompresses whole)
    rng = random.Random(0)
    vocabulary = ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 9))) for _ in range(5000)]
    pages = [{"id": i, "title": f"Page {i}", "text": f"Text number {i}. " + " ".join(rng.choices(vocabulary, k=6000))}
             for i in range(1, 80)]
    full = bz2.compress(mediawiki_xml(pages).encode())
    (tmp_path / "enwiki-cut.xml.bz2").write_bytes(full[: len(full) // 2])
    df = _frame(tmp_path / "enwiki-cut.xml.bz2")
    kept = df[df["_reason"].isna()]
    assert 3 <= len(kept) < 79
    assert kept["id"].tolist() == [f"enwiki:{i}" for i in range(1, len(kept) + 1)]
    assert df["_reason"].iloc[-1] == "truncated_file"
    assert "enwiki-cut.xml.bz2" in df["_detail"].iloc[-1]


def test_malformed_xml_and_undecodable_page(tmp_path):
    good = mediawiki_xml([{"id": 1, "title": "A", "text": "Alpha text."},
                          {"id": 2, "title": "B", "text": "Beta BADBYTES text."},
                          {"id": 3, "title": "C", "text": "Gamma text."}]).encode()
    data = good.replace(b"BADBYTES", b"\xff\xfe\xfa")  # invalid UTF-8 inside page 2
    df = _frame(write_dump(tmp_path / "enwiki-bad.xml.bz2", data))
    assert dict(zip(df["id"], df["_reason"].fillna("kept"))) == {
        "enwiki:1": "kept", "enwiki:2": "undecodable", "enwiki:3": "kept"}
    broken = good.replace(b"<title>C</title>", b"<title>C</titel>")
    df = _frame(write_dump(tmp_path / "enwiki-broken.xml", broken))
    assert df["id"].tolist()[:2] == ["enwiki:1", "enwiki:2"]
    assert df["_reason"].tolist()[-1] == "malformed_xml" and "line" in df["_detail"].tolist()[-1]


def test_not_a_dump_fails_naming_the_file_unless_skip(tmp_path):
    (tmp_path / "enwiki-x.xml.bz2").write_bytes(bz2.compress(b"this is not xml at all"))
    with pytest.raises(DataError, match="enwiki-x.xml.bz2"):
        _frame(tmp_path / "enwiki-x.xml.bz2", on_error="raise")
    assert _frame(tmp_path / "enwiki-x.xml.bz2")["_reason"].tolist() == ["not_a_dump"]


def _peak_bytes(path):
    tracemalloc.start()
    df = _frame(path)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert (df["_reason"] == "not_article").all()
    return peak


def test_memory_stays_flat_whatever_the_dump_size(tmp_path):
    # talk pages of 100 kB each (no document comes out): 6 MB and 24 MB of XML
    def dump(n):
        pages = [{"id": i, "title": f"Talk:{i}", "ns": 1, "text": "lorem ipsum dolor " * 5500} for i in range(n)]
        return write_dump(tmp_path / f"enwiki-{n}.xml", mediawiki_xml(pages))

    small, big = _peak_bytes(dump(60)), _peak_bytes(dump(240))
    assert big < small + 2 * 2**20, f"peak grows with the dump: {small / 2**20:.1f} -> {big / 2**20:.1f} MiB"
    assert big < 16 * 2**20


def test_multistream_bz2_is_read_to_the_end(tmp_path):
    # Wikipedia's multistream dumps are many bz2 streams end to end
    xml = mediawiki_xml([{"id": 1, "title": "A", "text": "Alpha text."}, {"id": 2, "title": "B", "text": "Beta text."}])
    cut = xml.index("  <page><title>B")
    (tmp_path / "enwiki-multistream.xml.bz2").write_bytes(bz2.compress(xml[:cut].encode())
                                                         + bz2.compress(xml[cut:].encode()))
    assert _frame(tmp_path / "enwiki-multistream.xml.bz2")["text"].tolist() == ["Alpha text.", "Beta text."]


def test_tables_are_dropped_by_default_and_kept_on_request(tmp_path):
    path = write_dump(tmp_path / "enwiki-t.xml.bz2", mediawiki_xml(PAGES))
    default, tables = _frame(path), _frame(path, tables=True)
    tomato = tables.loc[tables["id"] == "enwiki:1", "text"].iloc[0]
    assert "cell one" not in default.loc[default["id"] == "enwiki:1", "text"].iloc[0]
    assert "cell one\ncell two" in tomato and "wikitable" not in tomato  # one cell per line, no markup
    # the real table-heavy pages: the table text comes in addition, nothing else changes order
    real, real_tables = _frame(ENWIKI), _frame(ENWIKI, tables=True)
    assert (real_tables["text"].str.len() > real["text"].str.len()).sum() >= 3
    for marker in ("{|", "|}", "|-", "{{"):
        assert not real_tables["text"].str.contains(marker, regex=False).any(), marker


def test_a_page_over_the_bound_is_skipped_while_streaming(tmp_path):
    pages = [{"id": 1, "title": "Before", "text": "Before text."},
             {"id": 2, "title": "Huge", "text": "lorem ipsum " * 300_000},  # 3.6 MB
             {"id": 3, "title": "After", "text": "After text."}]
    path = write_dump(tmp_path / "enwiki-big.xml.bz2", mediawiki_xml(pages))
    df = _frame(path, max_page_bytes="1MiB")
    assert df.loc[df["_reason"].isna(), "title"].tolist() == ["Before", "After"]
    huge = df[df["_reason"].notna()]
    assert huge["_reason"].tolist() == ["too_large"] and huge["id"].tolist() == ["enwiki:2"]
    assert huge["title"].tolist() == ["Huge"] and "1048576" in huge["_detail"].iloc[0]
    assert len(df) == 3  # pages in = articles out + rejects
    assert _frame(path)["_reason"].isna().all()  # under the default bound (8 MiB) the page is an article


def test_a_300_mb_page_in_a_tiny_bz2_keeps_the_worker_small(tmp_path):
    """The hostile case: 523 bytes of bzip2 inflating to one 300 MB page (tests/data/extract)."""
    import json
    import subprocess
    import sys

    from tests.rawdata import DATA

    # VmHWM is the child's own peak (ru_maxrss would carry over the forking pytest's)
    code = (
        "import json, re\n"
        "from curate.stages.extract import RawFile\n"
        "from curate.stages.extract.wikipedia import ExtractWikipediaSettings, extract_wikipedia_file\n"
        f"df = extract_wikipedia_file(RawFile({str(DATA / 'huge-page.xml.bz2')!r}, 'huge-page.xml.bz2'),"
        " ExtractWikipediaSettings(), 'raise')\n"
        "peak = int(re.search(r'VmHWM:\\s*(\\d+)', open('/proc/self/status').read()).group(1))\n"
        "print(json.dumps({'reasons': df['_reason'].tolist(), 'peak_kib': peak}))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=str(DATA.parent.parent.parent))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert (DATA / "huge-page.xml.bz2").stat().st_size < 600
    assert out["reasons"] == ["too_large"]
    assert out["peak_kib"] < 300 * 1024, f"peak RSS {out['peak_kib'] / 1024:.0f} MiB"
