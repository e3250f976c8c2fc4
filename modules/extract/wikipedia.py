"""``extract_wikipedia``: MediaWiki XML dumps (``.xml.bz2``, ``.xml.gz`` or ``.xml``) to articles.

The dump is streamed: decompressed block by block (:func:`curate.stages.extract.archive.open_stream`),
decoded incrementally and fed to an XML pull parser; each ``<page>`` is converted as soon as it
ends and then dropped from the tree, so memory stays constant whatever the dump size.

The encoding is detected, not assumed: a byte-order mark, the NUL pattern of UTF-16/32 text
without one, or the XML declaration, else UTF-8 (dumps are UTF-8, but some copies are UTF-16).

Only main-namespace articles are documents; wikitext becomes plain text with mwparserfromhell
(:mod:`curate.stages.extract.wikitext`). Rows: ``id`` (``<dbname>:<page id>``, e.g. ``enwiki:12``: stable,
unique across languages), ``title``, ``text``, ``url``, ``language`` (the dump's ``xml:lang``, else
its dbname, else the file name's ``xxwiki-`` prefix; ``--language`` overrides).

A page is bounded while it streams: once more than ``max_page_bytes`` (default 8 MiB; MediaWiki caps
an article at 2 MiB of wikitext) of the dump have gone by inside one ``<page>``, the parser is
dropped, the rest of the page is read past unparsed, and the page becomes a ``too_large`` reject;
memory stays at about that bound plus one read (1 MiB) whatever the page's size.

Tables are dropped by default; ``tables: true`` keeps their cell text. NeMo Curator 0.9 removes a
table only in a section that contains a wikilink (its table removal runs inside its link loop), so on
real articles it drops nearly all of them: the default is the one that matches it.

Rejected pages (``_reason``; text not kept): ``not_article`` (another namespace), ``redirect``,
``too_large``,
``malformed_page`` (no id, title or text), ``undecodable`` (bytes the detected encoding cannot
decode), ``wikitext_error``, ``no_text``; and one row ``malformed_xml`` or ``truncated_file`` when
the XML or the compressed stream breaks (pages before the break are kept).
"""

from __future__ import annotations

import codecs
import os
import re
import urllib.parse
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

import pandas as pd

from curate.stages.dataset import STRING
from curate.stages.extract import RawFile, file_failure, frame, from_files, raw_inputs, reject
from curate.stages.extract.archive import open_stream
from curate.stages.extract.sandbox import (
    PageTimeout,
    PageTooLarge,
    check_limits,
    memory_field,
    sandbox_for,
    timeout_field,
)
from curate.stages.extract.wikitext import DEFAULT_DROP_NAMESPACES, wikitext_to_text
from curate.stages.stage import Stage, parse_bytes

WIKI_SUFFIXES = (".xml.bz2", ".xml.gz", ".xml", ".bz2")  # dump parts: *.xml-p1p41242.bz2
COLUMNS = ("id", "title", "text", "url", "language")
#: rejected pages keep their metadata, not their text (a full dump has millions of redirects)
REJECT_COLUMNS = ("id", "title", "url", "language")
XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
#: decoded characters fed to the parser per step
CHUNK = 1 << 20
_XML_DECL_ENCODING = re.compile(rb"""^<\?xml[^>]*?encoding\s*=\s*["']([A-Za-z0-9._\-]+)["']""")
_FILE_LANGUAGE = re.compile(r"^([a-z][a-z_\-]*?)wiki[-_.]")

#: what an undecodable byte becomes: a private-use character no dump contains, so a page holding it
#: is known to be damaged (U+FFFD itself may legitimately appear in an article)
UNDECODABLE_MARK = "\U0010fffd"
_ERROR_HANDLER = "curate-wiki-undecodable"

_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


@dataclass(frozen=True)
class ExtractWikipediaSettings:
    language: str = field(default="", metadata={
        "help": "language code for the rows (default: from the dump)", "metavar": "CODE"})
    tables: bool = field(default=False, metadata={
        "help": "keep the text of tables (cells one per line). Default: drop them, which matches NeMo "
                "Curator 0.9 on real articles (it drops tables in every section that has a link)"})
    max_page_bytes: str = field(default="8MiB", metadata={
        "help": "a page with more bytes of XML is skipped while streaming, never held, and rejected as "
                "too_large (MediaWiki caps an article at 2 MiB of wikitext)", "metavar": "SIZE"})
    extract_timeout: float = timeout_field("page")
    extract_memory: str = memory_field("page")

    def __post_init__(self):
        from curate.stages.errors import SettingsError

        if self.language and not re.fullmatch(r"[a-z][a-z\-]{0,15}", self.language):
            raise SettingsError(f"language must be a wiki language code such as en or zh-yue; got {self.language!r}")
        parse_bytes(self.max_page_bytes, "max_page_bytes")
        check_limits(self)


#: what the sandbox's child runs per page
WIKITEXT_TO_TEXT = "curate.stages.extract.wikitext:wikitext_to_text"


def wikipedia_meta() -> pd.DataFrame:
    cols = {c: pd.Series([], dtype=STRING) for c in (*COLUMNS, "_reason", "_detail")}
    return pd.DataFrame(cols)


def detect_encoding(head: bytes) -> tuple[str, int]:
    """(codec name, length of the byte-order mark) of an XML document from its first bytes."""
    for bom, name in _BOMS:
        if head.startswith(bom):
            return name, len(bom)
    if head[:4] == b"<\x00\x00\x00":
        return "utf-32-le", 0
    if head[:4] == b"\x00\x00\x00<":
        return "utf-32-be", 0
    if head[:2] == b"<\x00":
        return "utf-16-le", 0
    if head[:2] == b"\x00<":
        return "utf-16-be", 0
    m = _XML_DECL_ENCODING.match(head)
    if m:
        name = m.group(1).decode("ascii")
        try:
            return codecs.lookup(name).name, 0
        except LookupError:
            pass
    return "utf-8", 0


class _Site:
    """What the dump says about its wiki (root attributes and <siteinfo>)."""

    def __init__(self, raw: RawFile, language: str):
        self.language = language
        self.dbname = ""
        self.base = ""
        self.drop_namespaces = set(DEFAULT_DROP_NAMESPACES)
        #: the final file/category prefixes, set by finish() once <siteinfo> has been read
        self.drop: frozenset[str] | None = None
        m = _FILE_LANGUAGE.match(os.path.basename(raw.path))
        self.file_language = m.group(1).replace("_", "-") if m else ""

    def read_root(self, root) -> None:
        if not self.language:
            self.language = (root.get(XML_LANG) or "").strip()

    def read_siteinfo(self, elem) -> None:
        self.dbname = (_child_text(elem, "dbname") or "").strip()
        base = (_child_text(elem, "base") or "").strip()
        self.base = base.rsplit("/wiki/", 1)[0] + "/wiki/" if "/wiki/" in base else ""
        namespaces = _child(elem, "namespaces")
        for ns in (namespaces if namespaces is not None else ()):
            if ns.get("key") in ("6", "14", "-2") and ns.text:
                self.drop_namespaces.add(ns.text.strip().lower())

    def finish(self) -> None:
        if not self.language and self.dbname.endswith("wiki"):
            self.language = self.dbname[: -len("wiki")].replace("_", "-")
        self.language = self.language or self.file_language
        if not self.dbname:
            self.dbname = f"{self.language.replace('-', '_')}wiki" if self.language else "wiki"
        if not self.base and self.language:
            self.base = f"https://{self.language}.wikipedia.org/wiki/"
        self.drop = frozenset(self.drop_namespaces)


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _child(elem, name: str):
    for c in elem:
        if _local(c.tag) == name:
            return c
    return None


def _child_text(elem, name: str) -> str | None:
    c = _child(elem, name)
    return c.text if c is not None else None


def page_url(base: str, title: str) -> str:
    return base + urllib.parse.quote(title.replace(" ", "_"), safe="/:(),'!*;@$&+=-._~")


def extract_wikipedia_file(raw: RawFile, settings: ExtractWikipediaSettings, on_error: str = "raise",
                           fileobj=None) -> pd.DataFrame:
    """Every page of one dump file as a row (pure apart from reading the file).

    ``fileobj``: read this binary file-like object (an HTTP stream, read sequentially and closed
    here) instead of opening ``raw.path``; ``raw`` still names the file in ids and messages.
    """
    meta = wikipedia_meta()
    try:
        stream = open_stream(raw.path if fileobj is None else fileobj)
    except OSError as e:
        return file_failure(raw, on_error, "unreadable_file", e, meta)
    site = _Site(raw, settings.language)
    rows: list[dict] = []
    sandbox = sandbox_for(settings)  # the thread's child, shared with its other tasks
    with stream:
        head = stream.read(CHUNK)
        if not head:
            if stream.error is not None:
                return file_failure(raw, on_error, "unreadable_file", stream.error, meta)
            return file_failure(raw, on_error, "not_a_dump", "the file is empty", meta)
        encoding, bom = detect_encoding(head)
        decoder = codecs.getincrementaldecoder(encoding)(errors=_error_handler())
        state = {"root": None, "depth": 0, "pages": 0, "page": None, "page_at": 0,
                 "max_page": parse_bytes(settings.max_page_bytes, "max_page_bytes"),
                 "tables": settings.tables, "sandbox": sandbox}
        parser = ET.XMLPullParser(events=("start", "end"))
        chunk = head[bom:]
        fed = 0  # dump bytes fed to the parser
        try:
            while True:
                final = not chunk
                parser.feed(decoder.decode(chunk, final=final))
                fed += len(chunk)
                state["fed"] = fed
                _drain(parser, state, site, raw, rows)
                if final:
                    break
                if state["page"] is not None and fed - state["page_at"] > state["max_page"]:
                    # the page would be held whole by the parser: skip to its end tag unparsed
                    parser, chunk, skipped = _skip_page(stream, decoder, state, site, raw, rows)
                    fed = state["fed"]
                    if parser is None:
                        break
                    continue
                chunk = stream.read(CHUNK)
            if stream.error is None and parser is not None:
                parser.close()
                _drain(parser, state, site, raw, rows)
        except ET.ParseError as e:
            if state["root"] is None:
                return file_failure(raw, on_error, "not_a_dump", f"not MediaWiki XML ({encoding}): {e}", meta)
            if stream.error is None:
                reason = "truncated_file" if _at_end(e) else "malformed_xml"
                rows.append(_file_row(raw, site, reason, f"{raw.path}: {reason.replace('_', ' ')} "
                                      f"after {state['pages']} pages: {e}"))
        if stream.error is not None:
            if state["root"] is None:
                return file_failure(raw, on_error, "unreadable_file", stream.error, meta)
            rows.append(_file_row(raw, site, "truncated_file",
                                  f"{raw.path}: the compressed stream breaks off after {state['pages']} pages: "
                                  f"{stream.error}"))
    return frame(rows, meta)


_PAGE_END = "</page>"


def _skip_page(stream, decoder, state, site: _Site, raw: RawFile, rows: list[dict]):
    """Read past the open page's end tag without parsing (memory stays constant), reject the page
    as too_large, and return (a fresh parser positioned after it, the first bytes to feed it, the
    dump bytes skipped); (None, b"", skipped) when the dump ends first.

    In dump XML a ``<`` inside text is always escaped, so the first ``</page>`` ends the page."""
    page = state["page"]
    if site.drop is None:
        site.finish()
    page_id = (_child_text(page, "id") or "").strip()
    title = _child_text(page, "title")
    state["pages"] += 1
    row = {"id": f"{site.dbname}:{page_id}" if page_id else f"{raw.name}:page{state['pages']}",
           "title": title, "text": "", "url": page_url(site.base, title) if site.base and title else None,
           "language": site.language or None}
    rows.append(reject(row, "too_large", f"{raw.path}: page {page_id or '?'} ({title!r}): more than "
                                          f"{state['max_page']} bytes of XML; skipped unread"))
    state["page"] = None
    tail, skipped = "", 0
    while True:
        chunk = stream.read(CHUNK)
        skipped += len(chunk)
        text = tail + decoder.decode(chunk, final=not chunk)
        at = text.find(_PAGE_END)
        if at >= 0:
            rest = text[at + len(_PAGE_END):]
            break
        if not chunk:
            return None, b"", skipped
        tail = text[-len(_PAGE_END):]
    # a new parser inside a stand-in root element: later pages are its children, as before
    state["fed"] += skipped
    parser = ET.XMLPullParser(events=("start", "end"))
    state.update(root=None, depth=0)
    parser.feed("<mediawiki>")
    _drain(parser, state, site, raw, rows)
    parser.feed(rest)
    _drain(parser, state, site, raw, rows)
    return parser, stream.read(CHUNK), skipped


def _error_handler() -> str:
    try:
        codecs.lookup_error(_ERROR_HANDLER)
    except LookupError:
        codecs.register_error(_ERROR_HANDLER, lambda e: (UNDECODABLE_MARK, e.end))
    return _ERROR_HANDLER


def _at_end(error: ET.ParseError) -> bool:
    # expat reports "no element found" / "unclosed token" when the document stops early
    return "no element found" in str(error) or "unclosed token" in str(error)


def _file_row(raw: RawFile, site: _Site, reason: str, detail: str) -> dict:
    return {"id": f"{raw.name}:{reason}", "text": "", "language": site.language or None,
            "_reason": reason, "_detail": detail}


def _drain(parser, state, site: _Site, raw: RawFile, rows: list[dict]) -> None:
    for event, elem in parser.read_events():
        if event == "start":
            state["depth"] += 1
            if state["root"] is None:
                state["root"] = elem
                site.read_root(elem)
            elif state["depth"] == 2 and _local(elem.tag) == "page":
                state["page"], state["page_at"] = elem, state.get("fed", 0)
            continue
        state["depth"] -= 1
        if state["depth"] != 1:
            continue
        name = _local(elem.tag)
        if name == "siteinfo":
            site.read_siteinfo(elem)
        elif name == "page":
            if site.drop is None:
                site.finish()
            state["pages"] += 1
            state["page"] = None
            rows.append(_page_row(elem, site, raw, state["pages"], state.get("tables", False), state.get("sandbox")))
        # the page (or siteinfo) is done: drop it so the tree never grows
        try:
            state["root"].remove(elem)
        except ValueError:
            pass


def _page_row(page, site: _Site, raw: RawFile, ordinal: int, tables: bool = False, sandbox=None) -> dict:
    ns = (_child_text(page, "ns") or "").strip()
    page_id = (_child_text(page, "id") or "").strip()
    title = _child_text(page, "title")
    revision = _child(page, "revision")
    wikitext = _child_text(revision, "text") if revision is not None else None
    row = {
        "id": f"{site.dbname}:{page_id}" if page_id else f"{raw.name}:page{ordinal}",
        "title": title,
        "text": "",
        "url": page_url(site.base, title) if site.base and title else None,
        "language": site.language or None,
    }
    where = f"{raw.path}: page {page_id or '?'} ({title!r})"
    if not page_id or title is None:
        return reject(row, "malformed_page", f"{where}: no id or title")
    if ns != "0":
        return reject(row, "not_article", f"{where}: namespace {ns or '?'}")
    if _child(page, "redirect") is not None:
        return reject(row, "redirect", f"{where}: redirect")
    if wikitext is None:
        if revision is not None and _child(revision, "text") is not None:
            return reject(row, "no_text", f"{where}: empty page")
        return reject(row, "malformed_page", f"{where}: no revision text")
    if UNDECODABLE_MARK in wikitext or UNDECODABLE_MARK in title:
        return reject(row, "undecodable", f"{where}: bytes that are not valid in the dump's encoding")
    try:
        if sandbox is None:
            text = wikitext_to_text(wikitext, site.drop, tables=tables)
        else:
            text = sandbox.call(WIKITEXT_TO_TEXT, wikitext, site.drop, tables)
    except PageTimeout as e:
        return reject(row, "timeout", f"{where}: {e}")
    except PageTooLarge as e:
        return reject(row, "too_large", f"{where}: {e} (--extract-memory)")
    except Exception as e:  # mwparserfromhell failing on one page must not lose the dump
        return reject(row, "wikitext_error", f"{where}: {type(e).__name__}: {e}")
    if not text:
        return reject(row, "no_text", f"{where}: no text left after removing markup")
    return {**row, "text": text}


class ExtractWikipediaStage(Stage):
    """MediaWiki XML dumps to articles (main namespace, no redirects), wikitext to plain text."""

    name = "extract_wikipedia"
    needs = ()
    makes = COLUMNS
    Settings = ExtractWikipediaSettings
    cli = ("extract", "wikipedia")
    help = "Wikipedia XML dumps to articles (streamed, wikitext to plain text)"
    reads_raw_files = True
    reads = ("files",)  # never an earlier stage's documents: first in a job, or an input of its own

    def check_output(self, settings, inputs, output) -> None:
        # here, not in check: a job runs this for every stage, also one whose input a download makes
        from curate.stages.extract.sandbox import probe_limits

        probe_limits(settings, WIKITEXT_TO_TEXT)  # an --extract-memory the child cannot start in, refused now

    def run(self, settings, ctx):
        from curate.stages.dataset import write_dataset

        files = raw_inputs(ctx.input, WIKI_SUFFIXES, "Wikipedia dump")
        ddf = from_files(extract_wikipedia_file, files, wikipedia_meta(), "extract-wikipedia",
                         settings=settings, on_error=ctx.io.on_error)
        return write_dataset(ddf, ctx, stage=self.name, settings=settings, reject_columns=REJECT_COLUMNS)
