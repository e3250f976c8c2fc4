"""extract_warc: real HTML from the Rust book WARC, plus hand-built records for every reject reason."""

import gzip
import json

import pandas as pd
import pytest

from curate.stages.errors import DataError, SettingsError
from curate.stages.extract import RawFile
from curate.stages.extract.warc import COLUMNS, ExtractWarcSettings, extract_warc_file
from tests.conftest import curate, read_output, run_stage, side
from tests.rawdata import (
    MALFORMED_RECORD,
    RUST_BOOK,
    damaged_warc,
    page_warc,
    rust_pages,
    warc_record,
    write_warc,
)

GOOD = b"<html><body><article><p>" + b"This is a real paragraph of text about gardening and tomatoes. " * 5 + \
    b"</p></article></body></html>"


def _frame(path, **settings):
    return extract_warc_file(RawFile(str(path), path.name), ExtractWarcSettings(**settings), "skip")


@pytest.fixture(scope="module")
def pages():
    return rust_pages(12)


def test_rust_book_two_files_dask_equals_pandas(tmp_path, pages):
    a = page_warc(tmp_path / "in" / "a.warc.gz", pages[:7])
    b = page_warc(tmp_path / "in" / "b.warc", pages[7:], compress=False)  # gzip or not
    manifest = run_stage("extract_warc", {}, [tmp_path / "in"], tmp_path / "out")
    out = read_output(tmp_path / "out")
    assert manifest["partitions"] == 2
    assert manifest["counts"] == {"in": 12, "out": 12, "dropped": {}}
    assert list(out.columns) == list(COLUMNS)
    # the Dask run is the plain pandas function, file by file
    expected = pd.concat([_frame(a), _frame(b)], ignore_index=True).drop(columns=["_reason", "_detail"])
    pd.testing.assert_frame_equal(out, expected, check_dtype=False)
    assert out["url"].tolist() == [u for u, _ in pages]
    assert out["source"].tolist() == ["a.warc.gz"] * 7 + ["b.warc"] * 5
    assert (out["language"] == "en").all() and (out["language_score"] > 0.9).all()
    assert out["id"].str.match(r"^urn:uuid:[0-9a-f-]{36}$").all()
    assert (out["warc_record_id"] == "<" + out["id"] + ">").all()
    assert out["text"].str.contains("Rust").sum() >= 10  # a few short chapters keep only their help lines
    assert not out["text"].str.contains("<div|</p>", regex=True).any()


def test_ids_are_stable_across_reruns(tmp_path, pages):
    page_warc(tmp_path / "x.warc.gz", pages[:3])
    run_stage("extract_warc", {}, [tmp_path / "x.warc.gz"], tmp_path / "o1")
    run_stage("extract_warc", {}, [tmp_path / "x.warc.gz"], tmp_path / "o2")
    assert read_output(tmp_path / "o1")["id"].tolist() == read_output(tmp_path / "o2")["id"].tolist()


def test_only_html_200_responses_are_documents_and_rejects_are_counted(tmp_path):
    records = [
        warc_record("http://x/info", b"software: test\r\n", record_type="warcinfo"),
        warc_record("http://x/req", b"GET / HTTP/1.1\r\n\r\n", record_type="request"),
        warc_record("http://x/good", GOOD),
        warc_record("http://x/404", GOOD, status=404),
        warc_record("http://x/img.png", b"\x89PNG....", content_type="image/png"),
        warc_record("http://x/empty", b""),  # edge case: empty page
        warc_record("http://x/blank", b"<html><body>   \n\t </body></html>"),  # whitespace only
        MALFORMED_RECORD,
        warc_record("http://x/after-malformed", GOOD.replace(b"tomatoes", b"peppers")),
        warc_record("http://x/huge", b"<html><body><p>" + b"big " * 50_000 + b"</p></body></html>"),
        warc_record("http://x/binary", bytes(range(256)) * 40, content_type="text/html"),  # invalid UTF-8
    ]
    write_warc(tmp_path / "mixed.warc.gz", records)
    manifest = run_stage("extract_warc", {"max_record_bytes": "100KiB"}, [tmp_path / "mixed.warc.gz"],
                         tmp_path / "out")
    out = read_output(tmp_path / "out")
    assert out["url"].tolist() == ["http://x/good", "http://x/after-malformed"]
    assert manifest["counts"]["dropped"] == {
        "http_status": 1, "not_html": 1, "no_text": 2, "malformed_record": 1, "too_large": 1, "undecodable": 1}
    rejects = pd.read_parquet(side(tmp_path / "out", "_rejects") / "part-00000.parquet")
    assert set(rejects["_reason"]) == set(manifest["counts"]["dropped"])
    assert rejects["_detail"].str.contains("mixed.warc.gz").all()  # every reject names its file
    huge = rejects[rejects["_reason"] == "too_large"].iloc[0]
    assert huge["url"] == "http://x/huge" and "100KiB" not in huge["_detail"] and "102400" in huge["_detail"]


def test_the_sandbox_s_bytes_texts_make_the_frame_the_in_process_strings_make(tmp_path, pages):
    # the child sends each text as UTF-8 bytes and the frame is built by Arrow (warc.rows_frame): the same
    # frame as in process, and as the generic frame() builds from strings, rejects and a garbage run included
    from curate.stages.extract import frame
    from curate.stages.extract.warc import rows_frame, warc_meta

    records = [warc_record(url, html) for url, html in pages[:4]]
    records += [warc_record("http://x/uni", "<html><body><p>caf\u00e9 \u2022 \u65e5\u672c " .encode() * 40
                            + b"</p></body></html>"), MALFORMED_RECORD, b"stray bytes\r\n",
                warc_record("http://x/404", GOOD, status=404), warc_record("http://x/blank", b"<html></html>")]
    write_warc(tmp_path / "mixed.warc.gz", records)
    for settings, reasons, texts in [({}, {"malformed_record", "http_status", "no_text", "no_stoplist"}, 4),
                                     ({"language_id": "none", "min_stopword_density": 0}, {"malformed_record",
                                                                                           "http_status", "no_text"}, 5)]:
        sandboxed = _frame(tmp_path / "mixed.warc.gz", **settings)
        in_process = _frame(tmp_path / "mixed.warc.gz", extract_timeout=0, **settings)
        pd.testing.assert_frame_equal(sandboxed, in_process, check_exact=True)
        assert set(sandboxed["_reason"].dropna()) == reasons
        assert sandboxed["text"].str.len().gt(0).sum() == texts  # the Rust pages (and the page not in Latin-1)
    rows = [{k: v for k, v in row.items() if not pd.isna(v)} for row in in_process.to_dict("records")]
    rows[0]["text"] = rows[0]["text"].encode()
    pd.testing.assert_frame_equal(rows_frame(rows, warc_meta()), frame([dict(r, text=r["text"].decode())
                                                                       if isinstance(r["text"], bytes) else r
                                                                       for r in rows], warc_meta()), check_exact=True)
    pd.testing.assert_frame_equal(rows_frame([], warc_meta()), frame([], warc_meta()))


def test_truncated_gzip_keeps_the_records_before_the_break(tmp_path, pages):
    page_warc(tmp_path / "full.warc.gz", pages[:6])
    data = (tmp_path / "full.warc.gz").read_bytes()
    (tmp_path / "cut.warc.gz").write_bytes(data[: len(data) * 2 // 3])
    df = _frame(tmp_path / "cut.warc.gz")
    kept = df[df["_reason"].isna()]
    assert 2 <= len(kept) < 6
    assert kept["url"].tolist() == [u for u, _ in pages[: len(kept)]]
    assert df["_reason"].dropna().tolist()[-1] == "truncated_file"
    assert set(df["_reason"].dropna()) <= {"truncated_record", "truncated_file"}
    manifest = run_stage("extract_warc", {}, [tmp_path / "cut.warc.gz"], tmp_path / "out")
    assert manifest["counts"]["out"] == len(kept)
    assert manifest["counts"]["dropped"]["truncated_file"] == 1


def test_a_wrong_content_length_is_caught_at_the_gzip_member_boundary(tmp_path):
    records = [warc_record(f"http://x/{i}", GOOD, extra_length=400 if i == 1 else 0) for i in range(5)]
    write_warc(tmp_path / "len.warc.gz", records)
    df = _frame(tmp_path / "len.warc.gz")
    # record 1 claims 400 bytes too many: it is rejected, reading resumes at the next gzip member
    assert df.loc[df["_reason"].isna(), "url"].tolist() == ["http://x/0", "http://x/2", "http://x/3", "http://x/4"]
    assert df.loc[df["url"] == "http://x/1", "_reason"].tolist() == ["malformed_record"]
    assert len(df) == 5  # records in = documents out + rejects


def _counts(df):
    return df["_reason"].isna().sum(), df["_reason"].value_counts().to_dict()


@pytest.mark.parametrize("compress", [False, True], ids=["warc", "warc.gz"])
@pytest.mark.parametrize("lie", [10**9, 400, -30, -200], ids=["past-eof", "too-large", "too-small", "far-too-small"])
def test_a_wrong_content_length_loses_no_later_record(tmp_path, compress, lie):
    # edge cases: a length past the end of the file, into the next record's header, and short of
    # the block's end by a little (inside the HTML) and by a lot (inside the HTTP header)
    urls = [f"http://x/{i}" for i in range(4)]
    records = [warc_record(u, _numbered(i), extra_length=lie if i == 1 else 0) for i, u in enumerate(urls)]
    path = write_warc(tmp_path / ("len.warc.gz" if compress else "len.warc"), records, compress=compress)
    df = _frame(path)
    assert df.loc[df["_reason"].isna(), "url"].tolist() == [urls[0], urls[2], urls[3]]
    bad = df[df["_reason"].notna()]
    assert bad["url"].tolist() == [urls[1]] and bad["_reason"].tolist() == ["malformed_record"]
    assert "Content-Length" in bad["_detail"].iloc[0] and path.name in bad["_detail"].iloc[0]
    assert len(df) == 4  # 4 records in = 3 documents out + 1 reject


def test_bytes_between_records_are_skipped_and_reported(tmp_path):
    records = [warc_record(f"http://x/{i}", _numbered(i)) for i in range(3)]
    data = b"junk before the first record\r\n" + records[0] + b"stray bytes\x00\xff" * 10 + records[1] + records[2]
    (tmp_path / "g.warc").write_bytes(data)
    df = _frame(tmp_path / "g.warc")
    assert df.loc[df["_reason"].isna(), "url"].tolist() == ["http://x/0", "http://x/1", "http://x/2"]
    junk = df[df["_reason"].notna()]
    assert junk["_reason"].tolist() == ["malformed_record"] * 2
    assert junk["_detail"].str.contains("belong to no WARC record").all()


def test_an_oversized_record_is_skipped_unread_and_a_lying_one_resyncs(tmp_path):
    big = b"<html><body><p>" + b"big " * 100_000 + b"</p></body></html>"
    records = [warc_record("http://x/0", GOOD), warc_record("http://x/big", big),
               warc_record("http://x/liar", GOOD, extra_length=10**6), warc_record("http://x/3", GOOD)]
    path = write_warc(tmp_path / "big.warc", records, compress=False)
    df = _frame(path, max_record_bytes="100KiB")
    assert df.loc[df["_reason"].isna(), "url"].tolist() == ["http://x/0", "http://x/3"]
    assert dict(zip(df["url"], df["_reason"])) == {
        "http://x/0": pd.NA, "http://x/big": "too_large", "http://x/liar": "malformed_record", "http://x/3": pd.NA}


def test_the_reader_takes_any_binary_stream(tmp_path, pages):
    """What streaming downloads call: a non-seekable file-like object instead of a path."""
    import io

    class Socketish(io.RawIOBase):  # hands out at most 1,000 bytes per read, cannot seek
        def __init__(self, data):
            self.data, self.pos = data, 0

        def readable(self):
            return True

        def read(self, n=-1):
            n = 1000 if n is None or n < 0 else min(n, 1000)
            out = self.data[self.pos:self.pos + n]
            self.pos += len(out)
            return out

    path = page_warc(tmp_path / "s.warc.gz", pages[:3])
    raw = RawFile("http://mirror/s.warc.gz", "s.warc.gz")
    streamed = extract_warc_file(raw, ExtractWarcSettings(), "raise", fileobj=Socketish(path.read_bytes()))
    pd.testing.assert_frame_equal(streamed, _frame(path))


def test_charset_from_header_meta_or_detection(tmp_path):
    bg = "Това е текст на български език за проверка на кодировката на страницата и нищо повече. " * 3
    fr = "Voilà un texte français où les accents comptent beaucoup pour l'encodage de la page. " * 3
    records = [
        # header says windows-1251, no meta
        warc_record("http://x/hdr", f"<html><body><p>{bg}</p></body></html>".encode("cp1251"),
                    content_type="text/html; charset=windows-1251"),
        # no header charset; the <meta> says it
        warc_record("http://x/meta", f'<html><head><meta charset="iso-8859-1"></head><body><p>{fr}</p></body></html>'
                    .encode("latin-1"), content_type="text/html"),
        # neither: detection
        warc_record("http://x/detect", f"<html><body><p>{bg}</p></body></html>".encode("cp1251"),
                    content_type="text/html"),
    ]
    write_warc(tmp_path / "cs.warc.gz", records)
    df = _frame(tmp_path / "cs.warc.gz")
    assert df["_reason"].isna().all()
    text = dict(zip(df["url"], df["text"]))
    assert "български" in text["http://x/hdr"] and "български" in text["http://x/detect"]
    assert "Voilà" in text["http://x/meta"] and "français" in text["http://x/meta"]
    assert dict(zip(df["url"], df["language"])) == {"http://x/hdr": "bg", "http://x/meta": "fr", "http://x/detect": "bg"}


def test_a_declared_charset_wins_over_a_guess_despite_a_stray_byte():
    from curate.stages.extract.html import decode_html

    page = "<html><body><p>Un café très apprécié à Paris.</p>".encode() + b"\xff" + b"<p>more text</p>" * 100
    text, charset = decode_html(page, "utf-8")
    assert "café très apprécié" in text and charset == "utf-8 (with replacements)"
    assert decode_html(page.replace(b"\xff", b""), None) == (page.replace(b"\xff", b"").decode(), "utf-8")


@pytest.mark.parametrize("algorithm", ["resiliparse", "justext", "trafilatura"])
def test_every_algorithm_extracts_the_main_text(tmp_path, pages, algorithm):
    page_warc(tmp_path / "p.warc.gz", pages[:3])
    df = _frame(tmp_path / "p.warc.gz", algorithm=algorithm)
    # the introduction's first sentence is main content for every algorithm
    assert pd.isna(df["_reason"].iloc[0])
    assert "Welcome to The Rust Programming Language" in df["text"].iloc[0]
    assert "Keyboard shortcuts" not in df["text"].iloc[0].split("Welcome")[1]
    # a short page may be all boilerplate to one algorithm (jusText drops the 2-paragraph chapter 1)
    assert set(df["_reason"].dropna()) <= {"no_text"}
    assert (df.loc[df["_reason"].isna(), "language"] == "en").all()


def test_justext_uses_nemo_parameters_and_the_page_language():
    from curate.stages.extract.html import JUSTEXT, extract_justext

    assert JUSTEXT == {"length_low": 70, "length_high": 200, "stopwords_low": 0.30, "stopwords_high": 0.32,
                       "max_link_density": 0.2, "max_heading_distance": 200}
    para = "Това е дълъг абзац на български език, който трябва да остане след премахването на шаблонния текст. " * 3
    html = f"<html><body><div><a href='/'>Начало</a> | <a href='/x'>Контакти</a></div><p>{para}</p></body></html>"
    text = extract_justext(html)
    assert "български език" in text and "Контакти" not in text


def test_unreadable_file_fails_naming_it_or_is_rejected_with_skip(tmp_path, pages):
    page_warc(tmp_path / "in" / "good.warc.gz", pages[:2])
    (tmp_path / "in" / "bad.warc.gz").write_bytes(b"\x1f\x8b\x08\x00 not really gzip")
    with pytest.raises(DataError, match=r"bad\.warc\.gz"):
        run_stage("extract_warc", {}, [tmp_path / "in"], tmp_path / "out")
    manifest = run_stage("extract_warc", {}, [tmp_path / "in"], tmp_path / "out2", on_error="skip")
    assert manifest["counts"]["out"] == 2 and manifest["counts"]["dropped"] == {"unreadable_file": 1}


def test_missing_input_and_bad_settings_are_usage_errors(tmp_path):
    with pytest.raises(SettingsError, match="nope.warc.gz"):
        run_stage("extract_warc", {}, [tmp_path / "nope.warc.gz"], tmp_path / "out")
    with pytest.raises(SettingsError, match="algorithm"):
        ExtractWarcSettings(algorithm="boilerpipe")
    with pytest.raises(SettingsError, match="max_record_bytes"):
        ExtractWarcSettings(max_record_bytes="lots")


@pytest.mark.slow
def test_cli_extract_warc_on_the_rust_book(tmp_path):
    proc = curate("extract", "warc", "--input", RUST_BOOK, "--output", tmp_path / "out", "--workers", "1",
                  "--algorithm", "resiliparse")
    manifest = json.loads((tmp_path / "out" / "_manifest.json").read_text())
    counts = manifest["counts"]
    # NeMo's stop-word post-filter leaves nothing of a few chapters that are mostly code
    assert counts["in"] == 124 and counts["out"] >= 100 and set(counts["dropped"]) <= {"no_text"}, proc.stdout
    assert counts["out"] + sum(counts["dropped"].values()) == 124
    assert (tmp_path / "out" / "_SUCCESS").exists()
    with gzip.open(RUST_BOOK) as f:
        assert f.read(8) == b"WARC/1.0"


def _numbered(i):
    return GOOD.replace(b"tomatoes", f"tomatoes number {i}".encode())


@pytest.mark.parametrize("cut", [5, 40, -4])
def test_a_break_inside_the_last_member_keeps_the_intact_record_before_it(tmp_path, cut):
    # the break's member never ended, so its start must not make the record before it look too long
    records = [warc_record(f"http://x/{i}", _numbered(i)) for i in range(3)]
    data = write_warc(tmp_path / "full.warc.gz", records).read_bytes()
    third = len(gzip.compress(records[0], mtime=0)) + len(gzip.compress(records[1], mtime=0))
    (tmp_path / "cut.warc.gz").write_bytes(data[: third + cut] if cut > 0 else data[:cut])
    df = _frame(tmp_path / "cut.warc.gz")
    expected_ok = ["http://x/0", "http://x/1"] + (["http://x/2"] if cut < 0 else [])
    assert df.loc[df["_reason"].isna(), "url"].tolist() == expected_ok
    assert df["_reason"].dropna().tolist() == ["truncated_file"]
    assert len(df) == len(expected_ok) + 1


@pytest.mark.parametrize("keep", [5, 0.5, -6], ids=["in-gzip-header", "in-deflate-data", "in-trailer"])
def test_a_damaged_member_loses_only_its_record(tmp_path, keep):
    # issue 26: one member cut short and the members after it concatenated (a Common Crawl file with
    # one damaged record) lost every record after it, and ended with exit 0 even under raise
    records = [warc_record(f"http://x/{i}", _numbered(i)) for i in range(6)]
    path = tmp_path / "cut.warc.gz"
    offset = damaged_warc(path, records, 2, keep)
    manifest = run_stage("extract_warc", {}, [path], tmp_path / "out", on_error="skip")
    assert read_output(tmp_path / "out")["url"].tolist() == [f"http://x/{i}" for i in (0, 1, 3, 4, 5)]
    assert manifest["counts"] == {"in": 6, "out": 5, "dropped": {"corrupt_record": 1}}
    rejects = pd.read_parquet(side(tmp_path / "out", "_rejects") / "part-00000.parquet")
    assert rejects["_reason"].tolist() == ["corrupt_record"]
    assert f"cut.warc.gz: gzip member at compressed byte {offset} is damaged" in rejects["_detail"][0]
    with pytest.raises(DataError, match=rf"cut\.warc\.gz: gzip member at compressed byte {offset} is damaged"):
        run_stage("extract_warc", {}, [path], tmp_path / "out2")
    assert not (tmp_path / "out2" / "_SUCCESS").exists()


@pytest.mark.slow
def test_cli_fails_on_a_damaged_member_naming_file_and_offset(tmp_path):
    records = [warc_record(f"http://x/{i}", _numbered(i)) for i in range(4)]
    offset = damaged_warc(tmp_path / "cut.warc.gz", records, 1, 0.5)
    proc = curate("extract", "warc", "--input", tmp_path / "cut.warc.gz", "--output", tmp_path / "out",
                  "--workers", "1", check=False)
    assert proc.returncode == 1, proc.stderr
    assert f"cut.warc.gz: gzip member at compressed byte {offset} is damaged" in proc.stderr.splitlines()[-1]
    assert not (tmp_path / "out" / "_SUCCESS").exists()


def test_garbage_between_members_and_damaged_members_next_to_each_other(tmp_path):
    records = [warc_record(f"http://x/{i}", _numbered(i)) for i in range(5)]
    members = [gzip.compress(r, mtime=0) for r in records]
    junk = b"not a gzip member"
    (tmp_path / "bad.warc.gz").write_bytes(members[0] + junk + members[1][:40] + members[2][:-3] + members[3]
                                           + members[4])
    df = _frame(tmp_path / "bad.warc.gz")
    assert df.loc[df["_reason"].isna(), "url"].tolist() == ["http://x/0", "http://x/3", "http://x/4"]
    bad = df[df["_reason"].notna()]
    assert bad["_reason"].tolist() == ["corrupt_record"] * 3  # the junk, then members 1 and 2, in file order
    starts = [len(members[0]), len(members[0]) + len(junk), len(members[0]) + len(junk) + 40]
    for detail, start in zip(bad["_detail"], starts):
        assert f"compressed byte {start} is damaged" in detail


def test_trailing_garbage_after_the_last_member_keeps_the_record(tmp_path):
    data = write_warc(tmp_path / "one.warc.gz", [warc_record("http://x/0", GOOD)]).read_bytes()
    (tmp_path / "padded.warc.gz").write_bytes(data + b"\0" * 512)
    df = _frame(tmp_path / "padded.warc.gz")
    assert df["_reason"].tolist()[0] is pd.NA and df["url"].tolist()[0] == "http://x/0"
    assert df["_reason"].dropna().tolist() == ["truncated_file"]
    assert len(df) == 2


# --------------------------------------------------------------------------- NeMo Curator parity

PROSE = ("The garden was quiet in the morning, and we walked along the path to see the tomatoes that "
         "had grown in the sun for most of the summer. ")


def test_justext_keeps_a_short_heading_before_a_good_paragraph():
    """NeMo's sequence: the context-free classes are copied before the revision, so a short heading
    whose next paragraph is good becomes near-good and stays (jusText's revision alone loses it)."""
    from curate.stages.extract.html import extract_justext, stoplists

    html = (f"<html><body><h2>Growing tomatoes at home</h2><p>{PROSE * 3}</p>"
            "<div><a href='/'>Home</a> <a href='/a'>About</a></div></body></html>")
    text = extract_justext(html, stoplists()["ENGLISH"])
    assert text.split("\n\n") == ["Growing tomatoes at home", (PROSE * 3).strip()]


def test_stop_lists_as_nemo_latin_dropped_non_spaced_kept_whole(tmp_path):
    latin = ("Gallia est omnis divisa in partes tres, quarum unam incolunt Belgae, aliam Aquitani, tertiam qui "
             "ipsorum lingua Celtae, nostra Galli appellantur. Hi omnes lingua, institutis, legibus inter se "
             "differunt. Gallos ab Aquitanis Garumna flumen, a Belgis Matrona et Sequana dividit. ") * 2
    chinese = "这是一个关于在家里种植西红柿的中文段落，我们每天早上都会去花园看看它们长得怎么样。" * 4
    records = [warc_record("http://x/la", f"<html><body><p>{latin}</p></body></html>".encode()),
               warc_record("http://x/zh", f"<html><body><p>{chinese}</p><p>短</p></body></html>".encode()),
               warc_record("http://x/en", f"<html><body><p>{PROSE * 3}</p></body></html>".encode())]
    path = write_warc(tmp_path / "lang.warc.gz", records)
    for algorithm in ("justext", "resiliparse"):
        df = _frame(path, algorithm=algorithm)
        assert dict(zip(df["url"], df["_reason"].fillna("kept"))) == {
            "http://x/la": "no_stoplist", "http://x/zh": "kept", "http://x/en": "kept"}, algorithm
        assert df.loc[df["url"] == "http://x/la", "language"].tolist() == ["la"]
        assert "no stop list" in df.loc[df["url"] == "http://x/la", "_detail"].iloc[0]
        kept = _frame(path, algorithm=algorithm, unlisted_languages="keep")
        assert kept["_reason"].isna().all() and "Gallia est omnis" in kept["text"].iloc[0]
    # jusText keeps every paragraph of a non-spaced language, the short one too (NeMo's rule)
    zh = _frame(path, algorithm="justext").set_index("url").loc["http://x/zh"]
    assert zh["text"].endswith("短") and zh["language"] == "zh"


def test_resiliparse_stopword_density_filter_by_hand(tmp_path):
    from curate.stages.extract.html import stoplists, stopword_lines

    english = stoplists()["ENGLISH"]
    # densities by hand: 'the'/'and'/'of' are stop words, 'Home'/'Products' are not, the test is case-sensitive
    assert stopword_lines("Home Products Contact\nthe cat and the hat\nThe End Of", english, 0.32) == \
        "the cat and the hat"
    assert stopword_lines("the cat and the hat\n\nHome\n\nof the day", english, 0.32) == \
        "the cat and the hat\n\nof the day"  # paragraph breaks stay
    assert stopword_lines("a b c d e f g h i j k l m n o p q r s t u v w x y z", english, 0.32) == ""
    nav = "".join(f"<p>{w} Products</p>" for w in ("Garden", "Kitchen", "Pricing"))
    page = f"<html><body><main>{nav}<p>{PROSE * 2}</p><p>Redirecting to Homepage Now</p></main></body></html>"
    path = write_warc(tmp_path / "d.warc.gz", [warc_record("http://x/d", page.encode())])
    filtered, unfiltered = _frame(path)["text"].iloc[0], _frame(path, min_stopword_density=0)["text"].iloc[0]
    assert filtered == (PROSE * 2).strip()
    assert "Kitchen Products" in unfiltered and "Redirecting" in unfiltered and PROSE.strip() in unfiltered
    with pytest.raises(SettingsError, match="min_stopword_density"):
        ExtractWarcSettings(min_stopword_density=1.5)


@pytest.mark.parametrize("language_id", ["cld2", "langid", "none"])
def test_language_id_options(tmp_path, language_id):
    bg = "Това е текст на български език за проверка на езика на страницата и нищо повече от това. " * 3
    records = [warc_record("http://x/en", f"<html><body><p>{PROSE * 3}</p></body></html>".encode()),
               warc_record("http://x/bg", f"<html><body><p>{bg}</p></body></html>".encode())]
    df = _frame(write_warc(tmp_path / "l.warc.gz", records), language_id=language_id)
    assert df["_reason"].isna().all()
    if language_id == "none":
        assert df["language"].isna().all() and df["language_score"].isna().all()
    else:
        assert df["language"].tolist() == ["en", "bg"] and (df["language_score"] > 0.5).all()
