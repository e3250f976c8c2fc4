"""The clean stage: ftfy (only where it can change something), NFC, controls, whitespace, boilerplate."""

import json

import dask.dataframe as dd
import ftfy
import pandas as pd
import pytest

from curate.stages.clean import CleanSettings, CleanStage, clean, clean_text
from curate.stages.dataset import STRING
from curate.stages.errors import SettingsError
from tests.conftest import read_output, run_stage, write_jsonl

RAW = pd.DataFrame({
    "id": ["moji", "html", "ws", "ctrl", "cjk", "empty", "spaces", "nfc", "ok"],
    "text": [
        "The cafÃ© doesnâ€™t open â€” yet.",
        "Fish &amp; chips",
        "\n\n  indented line   \nnext\t\n\n\n\n\nlast  \n\n",
        "a\x00b\x07c\ufeff\r\nd\re\x85f",
        "全角，標點。ｗｉｄｔｈ",
        "",
        " \n\t \n",
        "e\u0301",  # e + combining acute -> é under NFC
        "Plain ASCII stays as it is.",
    ],
}).astype(STRING)


def test_pure_function_by_hand():
    out = clean(RAW, CleanSettings())
    text = dict(zip(out["id"], out["text"]))
    assert text["moji"] == "The café doesn't open — yet."
    assert text["html"] == "Fish & chips"
    assert text["ws"] == "  indented line\nnext\n\nlast"  # indentation kept, one blank line at most
    assert text["ctrl"] == "abc\nd\ne…f"  # ftfy reads the C1 control \x85 as windows-1252
    assert text["cjk"] == "全角，標點。ｗｉｄｔｈ"  # fix_character_width is off by default
    assert text["nfc"] == "\u00e9"
    assert text["ok"] == "Plain ASCII stays as it is."
    reasons = dict(zip(out["id"], out["_reason"]))
    assert reasons["empty"] == "empty_after_clean" and reasons["spaces"] == "empty_after_clean"
    assert out["_reason"].notna().sum() == 2
    assert RAW["text"][0].startswith("The cafÃ©")  # input not mutated
    assert out["text"].dtype == STRING


def test_ftfy_options_are_exposed():
    assert clean_text(pd.Series(["ｗｉｄｔｈ"], dtype=STRING), CleanSettings(fix_character_width=True))[0] == "width"
    assert clean_text(pd.Series(["“q”"], dtype=STRING), CleanSettings(uncurl_quotes=False))[0] == "“q”"
    assert clean_text(pd.Series(["a &amp; b"], dtype=STRING), CleanSettings(unescape_html="no"))[0] == "a &amp; b"
    raw = "cafÃ© &amp; ’"
    assert clean_text(pd.Series([raw], dtype=STRING), CleanSettings(fix_text=False))[0] == raw


def test_same_as_ftfy_on_whole_documents():
    """Skipping lines that cannot change must give exactly ftfy's result."""
    docs = [
        "donâ€™t â€œquoteâ€\x9d\nplain line\nanother ’ line — with “quotes” …",
        "Ã©tÃ© â€” cafÃ©’s “x”\n\nâ€¦ ellipsis …\nʼapostrophe • bullet",
        "a &amp; b <b>\nx &lt; y\nnaïve café\n\x1b[1mbold\x1b[0m",
        "x &lt; y\nfirst <b> here &amp;\nafter &amp; it\n",  # auto: entities decoded up to the first '<'
        "\n".join(["&amp;"] * 3),
        "",
    ]
    settings = CleanSettings(normalization="none", remove_control_chars=False, normalize_whitespace=False)
    got = clean_text(pd.Series(docs, dtype=STRING), settings).tolist()
    assert got == [ftfy.fix_text(d, settings.ftfy_config()) for d in docs]


def test_boilerplate_lines():
    text = "Please enable JavaScript to view.\nReal text here.\nThis site uses cookies.\nMore text."
    s = CleanSettings(remove_boilerplate_lines=True)
    assert clean_text(pd.Series([text], dtype=STRING), s)[0] == "Real text here.\nMore text."
    custom = CleanSettings(remove_boilerplate_lines=True, boilerplate_patterns=(r"^Press \S+ to",))
    assert clean_text(pd.Series(["Press ? to show help\nBody."], dtype=STRING), custom)[0] == "Body."
    assert clean_text(pd.Series([text], dtype=STRING), CleanSettings())[0] == text  # off by default


def test_settings_validation():
    with pytest.raises(SettingsError, match="boilerplate_patterns: '\\(' is not a valid RE2 pattern"):
        CleanSettings(remove_boilerplate_lines=True, boilerplate_patterns=("(",))
    with pytest.raises(SettingsError, match="normalization must be one of"):
        CleanSettings(normalization="NFX")
    with pytest.raises(SettingsError, match="max_blank_lines"):
        CleanSettings(max_blank_lines=-1)


def test_huge_document():
    big = "word’s  \n\n\n" * 200_000
    out = clean_text(pd.Series([big], dtype=STRING), CleanSettings())[0]
    assert out.count("\n\n") == 199_999 and "’" not in out


def test_dask_equals_pandas_with_two_partitions():
    frame = RAW.assign(_reason=pd.Series([pd.NA] * len(RAW), dtype=STRING))
    got = CleanStage().apply(dd.from_pandas(frame, npartitions=2), CleanSettings()).compute()
    pd.testing.assert_frame_equal(got, clean(frame, CleanSettings()))


def test_stage_with_invalid_utf8_and_manifest(tmp_path):
    write_jsonl(tmp_path / "a.jsonl", [{"id": "x", "text": "cafÃ©  "}, {"id": "e", "text": "   "}])
    write_jsonl(tmp_path / "b.jsonl", [{"id": "y", "text": "fine"}], raw_lines=[b'{"id": "bad", "text": "\xff"}'])
    m = run_stage("clean", {}, str(tmp_path / "*.jsonl"), tmp_path / "out", on_error="skip")
    assert m["counts"] == {"in": 4, "out": 2, "dropped": {"empty_after_clean": 1, "invalid_utf8": 1}}
    assert read_output(tmp_path / "out")["text"].tolist() == ["café", "fine"]
    assert json.load(open(tmp_path / "out" / "_manifest.json"))["settings"]["fix_character_width"] is False


# --------------------------------------------------------------------------- modifiers (NeMo Curator's)

# inputs and what NeMo 0.9's UrlRemover, QuotationRemover, NewlineNormalizer, Slicer returned (side by side)
MOD_DOCS = ['"A quoted document."', '"First line"\n"second"', '"one"\nline two"',
            "See https://example.com/x?y=1 and www.test.org/a now", "a\n\n\n\nb",
            "pre BEGIN middle END post END tail", "no markers", '"  "']
NEMO = {
    "remove_urls": ['"A quoted document."', '"First line"\n"second"', '"one"\nline two"', "See  and  now",
                    "a\n\n\n\nb", "pre BEGIN middle END post END tail", "no markers", '"  "'],
    "remove_quotation": ["A quoted document.", '"First line"\n"second"', '"one"\nline two"',
                         "See https://example.com/x?y=1 and www.test.org/a now", "a\n\n\n\nb",
                         "pre BEGIN middle END post END tail", "no markers", "  "],
    "normalize_newlines": [*MOD_DOCS[:4], "a\n\nb", *MOD_DOCS[5:]],
}


def modified(texts, **kw):
    import pyarrow as pa

    from curate.stages.clean import apply_modifiers

    return apply_modifiers(pa.array(texts, pa.large_string()), CleanSettings(**kw)).to_pylist()


@pytest.mark.parametrize("option", sorted(NEMO))
def test_modifiers_match_nemo(option):
    assert modified(MOD_DOCS, **{option: True}) == NEMO[option]


def test_slicing_matches_nemos_slicer():
    got = modified(MOD_DOCS, slice_from="BEGIN", slice_to="END")
    assert got == [""] * 5 + ["BEGIN middle END post END", "", ""]  # no marker: empty, as NeMo
    assert modified(MOD_DOCS[5:6], slice_from="BEGIN", slice_to="END", slice_exclude_markers=True) == ["middle END post"]
    assert modified(["abcdef"], max_chars=3) == ["abc"]


def test_markdown_keeps_link_text_and_snake_case():
    text = "# Title\n**bold** and *it* and _under_ [link](http://u.rl) snake_case_name 2*3*4 `code`\n![alt](x.png)"
    assert modified([text], remove_markdown=True) == [
        "Title\nbold and it and under link snake_case_name 2*3*4 code\nalt"]


def test_modifiers_in_the_stage_drop_what_becomes_empty(tmp_path):
    write_jsonl(tmp_path / "a.jsonl", [{"id": "1", "text": "x BEGIN keep this END y"}, {"id": "2", "text": "nothing"}])
    write_jsonl(tmp_path / "b.jsonl", [{"id": "3", "text": "see https://a.b/c"}])
    m = run_stage("clean", {"slice_from": "BEGIN", "slice_to": "END", "slice_exclude_markers": True,
                            "remove_urls": True}, str(tmp_path / "*.jsonl"), tmp_path / "o")
    assert read_output(tmp_path / "o")["text"].tolist() == ["keep this"]
    assert m["counts"]["dropped"] == {"empty_after_clean": 2}
    with pytest.raises(SettingsError):
        CleanSettings(slice_from="")
