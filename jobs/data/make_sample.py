"""Regenerate the derived sample files from rust-book.warc.gz (run from the repo root).

- mirrors.warc.gz: three exact copies of book pages served from a mirror host, and three near copies
  with one paragraph changed, as any crawl has; they give the dedup stages something to find.
- sample.jsonl.gz: all of them as plain text (resiliparse main-content extraction), for tests and
  benchmarks that start from documents rather than WARC files.
"""

import gzip
import json
import re
import uuid

from fastwarc.warc import ArchiveIterator, WarcRecordType
from resiliparse.extract.html2text import extract_plain_text
from resiliparse.parse.html import HTMLTree

EXACT = (3, 10, 40)
NEAR = (5, 20, 60)


def read_pages(path):
    with open(path, "rb") as f:
        for rec in ArchiveIterator(f, record_types=WarcRecordType.response):
            yield rec.headers.get("WARC-Target-URI"), rec.headers.get("WARC-Date"), rec.reader.read()


def warc_record(url: str, date: str, html: bytes) -> bytes:
    http = (b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n"
            + f"Content-Length: {len(html)}\r\n\r\n".encode() + html)
    head = (
        "WARC/1.0\r\nWARC-Type: response\r\n"
        f"WARC-Record-ID: <urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, url)}>\r\n"
        f"WARC-Date: {date}\r\nWARC-Target-URI: {url}\r\n"
        "Content-Type: application/http; msgtype=response\r\n"
        f"Content-Length: {len(http)}\r\n\r\n"
    ).encode()
    return gzip.compress(head + http + b"\r\n\r\n", mtime=0)


def edit_one_paragraph(html: bytes) -> bytes:
    paras = list(re.finditer(rb"<p>.*?</p>", html, flags=re.S))
    m = paras[len(paras) // 2]
    return html[:m.start()] + b"<p>This paragraph was edited in the copy.</p>" + html[m.end():]


def main():
    pages = list(read_pages("jobs/data/rust-book.warc.gz"))
    extra, suffix = [], {}
    for i in EXACT:
        url, date, html = pages[i]
        extra.append((url.replace("doc.rust-lang.org", "mirror.example.org"), date, html))
        suffix[extra[-1][0]] = "-mirror"
    for i in NEAR:
        url, date, html = pages[i]
        extra.append((url.replace("/book/", "/book-edited/"), date, edit_one_paragraph(html)))
        suffix[extra[-1][0]] = "-edited"
    with open("jobs/data/mirrors.warc.gz", "wb") as f:
        for rec in extra:
            f.write(warc_record(*rec))
    with gzip.GzipFile("jobs/data/sample.jsonl.gz", "wb", mtime=0) as f:
        for url, _, html in pages + extra:
            text = extract_plain_text(HTMLTree.parse(html.decode("utf-8", "replace")), main_content=True)
            page = url.rsplit("/", 1)[-1].removesuffix(".html")
            doc = {"id": page + suffix.get(url, ""), "text": text, "url": url, "source": "rust-book"}
            f.write((json.dumps(doc, ensure_ascii=False) + "\n").encode())
    print(f"{len(pages)} pages + {len(extra)} copies")


if __name__ == "__main__":
    main()
