"""Make a larger input for benchmarks from the bundled sample (run from the repo root).

    python jobs/data/make_bench_input.py --docs 8000 --files 8 --output out/bench-input [--format warc|jsonl]

Pages are new text, not copies: a word-bigram model of the Rust book's prose (jobs/data/sample.jsonl.gz)
writes paragraphs of real-looking English, so dedup finds few duplicates and every stage has the same
amount of work at every scale. With --format warc each page is an HTML response record in a gzip'd
WARC file (the input of extract_warc); with jsonl, documents with id/text/url. The output depends only
on --seed.
"""

import argparse
import gzip
import json
import os
import random
import re
import uuid
from collections import defaultdict


def bigram_model(path: str):
    follow = defaultdict(list)
    starts = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            for sentence in re.split(r"(?<=[.!?])\s+", json.loads(line)["text"]):
                words = sentence.split()
                if len(words) < 6 or not words[0][:1].isupper() or not sentence.endswith((".", "?", "!")):
                    continue
                starts.append(words[0])
                for a, b in zip(words, words[1:]):
                    follow[a].append(b)
    return starts, follow


def sentence(rng: random.Random, starts, follow, max_words: int = 30) -> str:
    words = [rng.choice(starts)]
    while len(words) < max_words and not words[-1].endswith((".", "?", "!")):
        nxt = follow.get(words[-1])
        if not nxt:
            break
        words.append(rng.choice(nxt))
    text = " ".join(words)
    return text if text.endswith((".", "?", "!")) else text + "."


def page(rng, starts, follow) -> tuple[str, list[str]]:
    title = sentence(rng, starts, follow, 8).rstrip(".")
    paras = [" ".join(sentence(rng, starts, follow) for _ in range(rng.randint(2, 6)))
             for _ in range(rng.randint(4, 14))]
    return title, paras


def html_page(title: str, paras: list[str]) -> bytes:
    body = "\n".join(f"<p>{p}</p>" for p in paras)
    return (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title></head>"
            f"<body><nav><a href=\"/\">Home</a> | <a href=\"/docs\">Docs</a></nav><main><h1>{title}</h1>\n"
            f"{body}\n</main><footer>Copyright example.org</footer></body></html>").encode()


def warc_record(url: str, html: bytes) -> bytes:
    http = (b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n"
            + f"Content-Length: {len(html)}\r\n\r\n".encode() + html)
    head = (f"WARC/1.0\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, url)}>\r\n"
            f"WARC-Date: 2024-01-01T00:00:00Z\r\nWARC-Target-URI: {url}\r\n"
            f"Content-Type: application/http; msgtype=response\r\nContent-Length: {len(http)}\r\n\r\n").encode()
    return gzip.compress(head + http + b"\r\n\r\n", compresslevel=1, mtime=0)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--docs", type=int, default=8000)
    p.add_argument("--files", type=int, default=8)
    p.add_argument("--format", choices=("warc", "jsonl"), default="warc")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output", default="out/bench-input")
    args = p.parse_args()
    starts, follow = bigram_model("jobs/data/sample.jsonl.gz")
    rng = random.Random(args.seed)
    os.makedirs(args.output, exist_ok=True)
    suffix = "warc.gz" if args.format == "warc" else "jsonl.gz"
    outs = [open(os.path.join(args.output, f"docs-{i:03d}.{suffix}"), "wb") for i in range(args.files)]
    for n in range(args.docs):
        title, paras = page(rng, starts, follow)
        url = f"https://docs.example.org/page-{n:07d}.html"
        if args.format == "warc":
            outs[n % args.files].write(warc_record(url, html_page(title, paras)))
        else:
            rec = {"id": f"page-{n:07d}", "text": title + "\n\n" + "\n\n".join(paras), "url": url}
            outs[n % args.files].write(gzip.compress((json.dumps(rec) + "\n").encode(), compresslevel=1, mtime=0))
    for f in outs:
        f.close()
    print(f"{args.docs} documents in {args.files} {args.format} files under {args.output}")


if __name__ == "__main__":
    main()
