"""URL and word blocklists (``url_blocklist``, ``bad_words``), on lists the tests write themselves.

Edge cases: each of the six URL rules and their order (a URL breaking two gets the first), a
subdomain of a listed domain against a listed host name, a UT1 URL without its scheme, upper-case URL
words, soft words below and at the threshold, a subword hidden by punctuation, categories chosen, a
document without a URL; bad words as whole words (``assess`` does not contain the word ``ass``), a
phrase, a language written without spaces (substring), the language column against the fixed
language, a language without a list; a list that is not UTF-8 and a missing folder (refused before
any work), and the filter stage on two partitions.
"""

from __future__ import annotations

import pandas as pd
import pytest

from curate.stages.errors import SettingsError
from curate.stages.filters.base import Texts
from curate.stages.filters.blocklist import BadWords, UrlBlocklist
from tests.conftest import read_output, run_stage, write_jsonl


@pytest.fixture
def ut1(tmp_path):
    for category, domains, urls in [("adult", ["# a comment", "adult-site.com", "cams.example.net", ""],
                                     ["bad.example.org/page.html"]),
                                    ("gambling", ["casino.test"], [])]:
        (tmp_path / "ut1" / category).mkdir(parents=True)
        (tmp_path / "ut1" / category / "domains").write_text("\n".join(domains) + "\n")
        (tmp_path / "ut1" / category / "urls").write_text("\n".join(urls) + "\n")
    (tmp_path / "words").write_text("xxx\nnsfw\n")
    (tmp_path / "soft").write_text("hot\nlive\ngirls\n")
    (tmp_path / "subwords").write_text("pornhub\n")
    return tmp_path


URLS = {  # url -> the rule it breaks first (0: none), worked out by hand
    "https://adult-site.com/": 1,
    "https://www.adult-site.com/x": 1,                 # registered domain: any subdomain
    "https://cams.example.net/": 2,                    # that host only ...
    "https://other.example.net/": 0,                   # ... not its registered domain
    "http://bad.example.org/page.html": 3,             # UT1 lists URLs without a scheme
    "http://www.bad.example.org/page.html": 3,
    "http://bad.example.org/other.html": 0,
    "https://blog.test/tags/XXX/1": 4,                 # words compared lower-cased
    "https://blog.test/xxxl-shirts": 0,                # a word, not a substring
    "https://blog.test/hot-live-show": 5,              # two soft words: the threshold
    "https://blog.test/hot-show": 0,
    "https://blog.test/p/porn-hub.html": 6,            # the subword after removing punctuation
    "https://casino.test/xxx": 1,                      # domain before word
    "": 0,
}


def test_each_url_rule_in_datatroves_order(ut1):
    flt = UrlBlocklist(lists=str(ut1 / "ut1"), banned_words=str(ut1 / "words"),
                       soft_banned_words=str(ut1 / "soft"), banned_subwords=str(ut1 / "subwords"))
    df = pd.DataFrame({"text": ["t"] * len(URLS), "url": pd.Series(list(URLS), dtype="string")})
    scores = flt.score_frame(df, Texts(df["text"]))
    assert dict(zip(URLS, scores.astype(int).tolist())) == URLS
    assert flt.keep(scores).tolist() == [v == 0 for v in URLS.values()]


def test_categories_and_refusals(ut1):
    only_gambling = UrlBlocklist(lists=str(ut1 / "ut1"), categories=("gambling",))
    assert only_gambling.rule("https://adult-site.com/", only_gambling._tables()) == 0
    assert only_gambling.rule("https://casino.test/", only_gambling._tables()) == 1
    with pytest.raises(SettingsError, match="no category 'drugs'"):
        UrlBlocklist(lists=str(ut1 / "ut1"), categories=("drugs",))
    with pytest.raises(SettingsError, match="needs at least one list"):
        UrlBlocklist()
    (ut1 / "latin1").write_bytes(b"ok\ncaf\xe9\n")
    with pytest.raises(SettingsError, match=r"latin1 line 2: not UTF-8 text \(byte 3\)"):
        UrlBlocklist(banned_words=str(ut1 / "latin1"))


@pytest.fixture
def ldnoobw(tmp_path):
    (tmp_path / "ldnoobw").mkdir()
    (tmp_path / "ldnoobw" / "en").write_text("ass\nblow job\nDamn\n")
    (tmp_path / "ldnoobw" / "ja").write_text("エロ\n")
    (tmp_path / "ldnoobw" / "README.md").write_text("not a list\n")
    return tmp_path / "ldnoobw"


def test_bad_words_whole_words_phrases_and_substrings(ldnoobw):
    flt = BadWords(lists=str(ldnoobw), language="en")
    df = pd.DataFrame({
        "text": pd.Series(["We assess the class.", "What an ass!", "A blow job, damn.", "エロ動画", "ass", "ass"],
                          dtype="string"),
        "language": pd.Series(["en", "en", "en", "ja", "de", None], dtype="string"),
    })
    scores = flt.score_frame(df, Texts(df["text"]))
    # de has no list: 0; a missing language falls back to the fixed one (en)
    assert scores.tolist() == [0, 1, 2, 1, 0, 1]
    assert flt.keep(scores).tolist() == [True, False, False, False, True, False]
    assert flt.languages() == ["en", "ja"]
    with pytest.raises(SettingsError, match="no list for language 'fr'"):
        BadWords(lists=str(ldnoobw), language="fr")
    with pytest.raises(SettingsError, match="must be a folder"):
        BadWords(lists=str(ldnoobw / "nope"))


def test_blocklists_in_a_filter_stage_on_two_partitions(ut1, ldnoobw, tmp_path):
    docs = [{"id": f"d{i}", "text": text, "url": url} for i, (url, text) in enumerate([
        ("https://adult-site.com/a", "fine text"), ("https://ok.test/a", "fine text"),
        ("https://ok.test/b", "what an ass"), ("https://blog.test/hot-live", "fine text"),
        ("https://ok.test/c", "fine words here"), ("https://casino.test/", "fine")])]
    write_jsonl(tmp_path / "in" / "a.jsonl", docs[:3])
    write_jsonl(tmp_path / "in" / "b.jsonl", docs[3:])
    chain = tmp_path / "chain.yaml"
    chain.write_text(f"filters:\n  - {{filter: url_blocklist, lists: {ut1 / 'ut1'}, soft_banned_words: {ut1 / 'soft'}}}\n"
                     f"  - {{filter: bad_words, lists: {ldnoobw}, language: en}}\n")
    manifest = run_stage("filter", {"config": str(chain)}, str(tmp_path / "in" / "*.jsonl"), tmp_path / "out")
    assert manifest["counts"]["dropped"] == {"url_blocklist": 3, "bad_words": 1}
    assert sorted(read_output(tmp_path / "out")["id"]) == ["d1", "d4"]
