"""Make a WARC of real HTML pages from local documentation folders, for extraction parity runs.

    python jobs/data/make_parity_warc.py --per-dir 20 --output out/parity.warc.gz DIR [DIR ...]

Each DIR contributes up to ``--per-dir`` pages of at least 2 kB, every k-th of its sorted HTML
files (deterministic). Every page becomes an HTTP 200 ``text/html`` response record, one gzip member
each, as Common Crawl stores them; the URL is ``http://docs.local/<dir name>/<relative path>``.
Used by ``jobs/bench_extract_parity.py`` together with ``jobs/data/rust-book.warc.gz``; the README
lists the folders used for its figures (Rust, Node.js, npm, Valgrind and libxslt documentation as
installed on the development machine).
"""

import argparse
import gzip
import os
import sys
import uuid

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def record(url: str, html: bytes) -> bytes:
    http = (b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n"
            + f"Content-Length: {len(html)}\r\n\r\n".encode() + html)
    rid = uuid.uuid5(uuid.NAMESPACE_URL, url)
    head = (f"WARC/1.0\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:{rid}>\r\n"
            f"WARC-Date: 2024-01-01T00:00:00Z\r\nWARC-Target-URI: {url}\r\n"
            f"Content-Type: application/http; msgtype=response\r\nContent-Length: {len(http)}\r\n\r\n").encode()
    return gzip.compress(head + http + b"\r\n\r\n", mtime=0)


def pages(folder: str, n: int):
    files = sorted(os.path.join(root, f) for root, _, names in os.walk(folder) for f in names
                   if f.endswith(".html") and os.path.getsize(os.path.join(root, f)) >= 2048)
    step = max(1, len(files) // n)
    return files[::step][:n]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("dirs", nargs="+")
    p.add_argument("--per-dir", type=int, default=20)
    p.add_argument("--output", required=True)
    args = p.parse_args(argv)
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    count = 0
    with open(args.output, "wb") as out:
        for folder in args.dirs:
            name = os.path.basename(os.path.normpath(folder))
            for path in pages(folder, args.per_dir):
                url = f"http://docs.local/{name}/{os.path.relpath(path, folder)}"
                with open(path, "rb") as f:
                    out.write(record(url, f.read()))
                count += 1
    print(f"{args.output}: {count} pages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
