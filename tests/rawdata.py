"""Builders of raw inputs for the download and extraction tests: WARC files from real HTML,
MediaWiki dumps, arXiv-like source tarballs, and a Common Crawl / Wikipedia mirror layout.

Everything is built from the bundled Rust book WARC (jobs/data/), the two real dumps in
tests/data/extract, or literals, so each test can see exactly what went in.
"""

from __future__ import annotations

import bz2
import gzip
import io
import json
import tarfile
import uuid
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "extract"
RUST_BOOK = Path(__file__).resolve().parent.parent / "jobs" / "data" / "rust-book.warc.gz"
ENWIKI = DATA / "enwiki-table-markup.xml.bz2"
BGWIKI = DATA / "bgwiki-latest-pages-articles-shortened.xml.bz2"


# --------------------------------------------------------------------------- WARC


def warc_record(url: str, body: bytes, *, status: int = 200, content_type: str = "text/html; charset=utf-8",
                record_id: str | None = None, record_type: str = "response",
                date: str = "2024-01-01T00:00:00Z", extra_length: int = 0) -> bytes:
    """One WARC record. ``extra_length`` makes Content-Length lie (a malformed record)."""
    if record_type == "response":
        reason = {200: "OK", 404: "Not Found", 301: "Moved Permanently"}.get(status, "Status")
        block = (f"HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\n"
                 f"Content-Length: {len(body)}\r\n\r\n").encode() + body
        warc_type = "application/http; msgtype=response"
    else:
        block, warc_type = body, "application/warc-fields"
    record_id = record_id or f"<urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, url + record_type)}>"
    header = (f"WARC/1.0\r\nWARC-Type: {record_type}\r\nWARC-Record-ID: {record_id}\r\n"
              f"WARC-Date: {date}\r\nWARC-Target-URI: {url}\r\nContent-Type: {warc_type}\r\n"
              f"Content-Length: {len(block) + extra_length}\r\n\r\n").encode()
    return header + block + b"\r\n\r\n"


#: a record whose WARC header cannot be parsed
MALFORMED_RECORD = b"WARC/1.0\r\nthis line is not a header\r\nContent-Length: x\r\n\r\njunk\r\n\r\n"


def write_warc(path, records: list[bytes], compress: bool = True) -> Path:
    """A WARC file; gzip'd as Common Crawl does it (one gzip member per record)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        for rec in records:
            f.write(gzip.compress(rec, mtime=0) if compress else rec)
    return path


def damaged_warc(path, records: list[bytes], k: int, keep) -> int:
    """A .warc.gz of one gzip member per record whose member ``k`` lost its end: it keeps its first
    ``keep`` bytes (a float: that share of them; negative: all but the last ``-keep``) and the
    members after it follow at once. Returns the compressed offset of the damaged member."""
    members = [gzip.compress(rec, mtime=0) for rec in records]
    m = members[k]
    n = int(len(m) * keep) if isinstance(keep, float) else keep
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(members[:k]) + m[:n] + b"".join(members[k + 1:]))
    return sum(len(x) for x in members[:k])


def rust_pages(n: int | None = None) -> list[tuple[str, bytes]]:
    """(url, html) of the first ``n`` pages of the real Rust book WARC."""
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    pages = []
    with open(RUST_BOOK, "rb") as f:
        for rec in ArchiveIterator(f, record_types=WarcRecordType.response):
            pages.append((rec.headers.get("WARC-Target-URI"), rec.reader.read()))
            if n is not None and len(pages) >= n:
                break
    return pages


def page_warc(path, pages: list[tuple[str, bytes]], compress: bool = True) -> Path:
    return write_warc(path, [warc_record(u, h) for u, h in pages], compress)


# --------------------------------------------------------------------------- MediaWiki


def mediawiki_xml(pages: list[dict], lang: str = "en", dbname: str | None = None, siteinfo: bool = True) -> str:
    """A dump: pages are dicts with id, title, text, and optional ns (0), redirect (title)."""
    dbname = dbname or f"{lang}wiki"
    out = ['<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/" version="0.10" '
           f'xml:lang="{lang}">']
    if siteinfo:
        out.append(f"  <siteinfo><sitename>Wikipedia</sitename><dbname>{dbname}</dbname>"
                   f"<base>https://{lang}.wikipedia.org/wiki/Main_Page</base><namespaces>"
                   '<namespace key="0" /><namespace key="6">File</namespace>'
                   '<namespace key="14">Category</namespace></namespaces></siteinfo>')
    for p in pages:
        redirect = f'<redirect title="{p["redirect"]}" />' if p.get("redirect") else ""
        text = (p["text"].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
                if p.get("text") is not None else None)
        text_el = f'<text xml:space="preserve">{text}</text>' if text is not None else "<text />"
        out.append(f"  <page><title>{p['title']}</title><ns>{p.get('ns', 0)}</ns><id>{p['id']}</id>"
                   f"{redirect}<revision><id>{p['id']}00</id>{text_el}</revision></page>")
    out.append("</mediawiki>\n")
    return "\n".join(out)


def write_dump(path, xml: str | bytes, encoding: str = "utf-8", bom: bool = False) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = xml if isinstance(xml, bytes) else xml.encode(encoding)
    if bom and encoding.lower().replace("_", "-") == "utf-16-le":
        data = b"\xff\xfe" + data
    path.write_bytes(bz2.compress(data) if path.suffix == ".bz2" else data)
    return path


# --------------------------------------------------------------------------- arXiv


MAIN_TEX = r"""\documentclass{article}
\usepackage{amsmath} % the preamble goes
\newcommand{\R}{\mathbb{R}}
\begin{document}
\title{A Test Paper}
\maketitle
\begin{abstract}
We study things. % a comment that goes
\end{abstract}
\section{Introduction}
\input{sections/intro}
Costs are 5\% lower.
\section{Results}
\include{results}
\bibliographystyle{plain}
\bibliography{refs}
\end{document}
this after end{document} goes too
"""
INTRO_TEX = "Intro text with math $x \\in \\R$.\n% hidden remark\n"
RESULTS_TEX = "The results are good.\n\\begin{thebibliography}{9}\\bibitem{a} A. Author.\\end{thebibliography}\n"
SINGLE_TEX = "\\documentclass{article}\n\\begin{document}\n\\section{Only}\nA single-file paper.\n\\end{document}\n"


def tar_bytes(members: list[tuple], compress: bool = False) -> bytes:
    """A tarball from (name, bytes) members; ("name", None, "symlink-target") makes a symlink."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz" if compress else "w") as tar:
        for m in members:
            name, data = m[0], m[1]
            info = tarfile.TarInfo(name)
            info.mtime = 0
            if data is None:
                info.type = tarfile.SYMTYPE
                info.linkname = m[2]
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def paper_tarball() -> bytes:
    """A gzip'd tarball of one multi-file paper, as arXiv stores it."""
    return gzip.compress(tar_bytes([
        ("main.tex", MAIN_TEX.encode()),
        ("sections/intro.tex", INTRO_TEX.encode()),
        ("results.tex", RESULTS_TEX.encode()),
        ("fig.png", b"\x89PNG" + b"\0" * 100),
    ]), mtime=0)


def arxiv_bulk_tar(path, extra: list[tuple] = ()) -> Path:
    """An arXiv-like bulk source tarball: a multi-file paper, a single-file paper, a PDF-only one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    members = [
        ("2301/2301.00001.gz", paper_tarball()),
        ("2301/2301.00002.gz", gzip.compress(SINGLE_TEX.encode(), mtime=0)),
        ("2301/2301.00003.pdf", b"%PDF-1.4 not a source"),
        *extra,
    ]
    path.write_bytes(tar_bytes(members))
    return path


# --------------------------------------------------------------------------- mirrors


def cc_mirror(root, snapshot: str, warcs: dict[str, bytes]) -> list[str]:
    """Common Crawl's layout under ``root``: crawl-data/<snapshot>/warc.paths.gz and the WARCs."""
    root = Path(root)
    rels = []
    for name, data in warcs.items():
        rel = f"crawl-data/{snapshot}/segments/1700000000000.00/warc/{name}"
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
        rels.append(rel)
    listing = root / "crawl-data" / snapshot / "warc.paths.gz"
    listing.write_bytes(gzip.compress(("\n".join(rels) + "\n").encode(), mtime=0))
    return rels


def wiki_mirror(root, lang: str, date: str, files: dict[str, bytes], status: str = "done") -> None:
    """Wikimedia's dump layout: <lang>wiki/<date>/dumpstatus.json and the pages-articles files."""
    root = Path(root)
    folder = root / f"{lang}wiki" / date
    folder.mkdir(parents=True, exist_ok=True)
    entries = {}
    for name, data in files.items():
        (folder / name).write_bytes(data)
        import hashlib

        entries[name] = {"size": len(data), "url": f"/{lang}wiki/{date}/{name}",
                         "sha1": hashlib.sha1(data).hexdigest(), "md5": hashlib.md5(data).hexdigest()}
    status_doc = {"jobs": {"articlesdump": {"status": status, "updated": "2024-01-02 00:00:00", "files": entries},
                           "metacurrentdump": {"status": "done", "files": {}}},
                  "version": "0.8"}
    (folder / "dumpstatus.json").write_text(json.dumps(status_doc))
    index = root / f"{lang}wiki"
    dates = sorted(p.name for p in index.iterdir() if p.is_dir())
    (index / "index.html").write_text("<html><body>" + "".join(f'<a href="{d}/">{d}/</a>\n' for d in dates)
                                      + '<a href="latest/">latest/</a></body></html>')
