"""Regenerate sample.jsonl.gz from rust-book.warc.gz (run from the repo root).

The sample is the 124 pages of the Rust book as plain text (resiliparse main-content extraction),
plus a few exact and near duplicates (as any crawl has) so that the dedup stages have work to do.
"""

import gzip
import json

from fastwarc.warc import ArchiveIterator, WarcRecordType
from resiliparse.extract.html2text import extract_plain_text
from resiliparse.parse.html import HTMLTree

docs = []
with open("jobs/data/rust-book.warc.gz", "rb") as f:
    for rec in ArchiveIterator(f, record_types=WarcRecordType.response):
        html = rec.reader.read().decode("utf-8", "replace")
        text = extract_plain_text(HTMLTree.parse(html), main_content=True)
        url = rec.headers.get("WARC-Target-URI")
        docs.append({"id": url.rsplit("/", 1)[-1].removesuffix(".html"), "text": text, "url": url,
                     "source": "rust-book"})
extra = []
for i in (3, 10, 40):  # exact copies, as mirrors of a page would be
    extra.append({**docs[i], "id": docs[i]["id"] + "-mirror", "url": docs[i]["url"].replace("doc.rust-lang.org", "mirror.example.org")})
for i in (5, 20, 60):  # near copies: one paragraph changed
    paras = docs[i]["text"].split("\n")
    paras[len(paras) // 2] = "This paragraph was edited in the copy."
    extra.append({**docs[i], "id": docs[i]["id"] + "-edited", "text": "\n".join(paras)})
with gzip.open("jobs/data/sample.jsonl.gz", "wt", encoding="utf-8") as f:
    for d in docs + extra:
        f.write(json.dumps(d, ensure_ascii=False) + "\n")
print(len(docs) + len(extra), "documents")
