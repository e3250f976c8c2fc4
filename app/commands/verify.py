"""``curate verify DIR``: the gate between tokenizing and training.

Checks a tokenize output directory (or one pair, named by its prefix) and exits non-zero with one
line per problem, ``FILE: CHECK: detail``. On success prints the files, documents, tokens and
dtype of each set and the first 64 tokens of document 0, decoded when the tokenizer is known
(``--tokenizer``, else the one named in manifest.json).
"""

from __future__ import annotations

import logging
import sys

from modules.errors import SettingsError

HELP = "check Megatron .bin/.idx token files (structure, counts, token ids)"
log = logging.getLogger("curate.verify")


def add_arguments(p) -> None:
    p.add_argument("dir", metavar="DIR", help="tokenize output directory (local or URL), or a pair's prefix")
    p.add_argument("--vocab-size", type=int, default=None, metavar="N",
                   help="every token id must be below N (default: the tokenizer's, else manifest.json's)")
    p.add_argument("--tokenizer", default=None, metavar="TOK",
                   help="tokenizer for the vocabulary size and to decode the first document")
    p.add_argument("--prefix", default=None, metavar="NAME", help="check only the pairs NAME_00000... (one set)")
    p.add_argument("--unique-ids", action="store_true",
                   help="instead: check that the ids of the dataset DIR (a stage output, files or a glob) are "
                        "unique, on the cluster; lists the first duplicates and exits 1 when there are any")
    from app.cli import add_cluster_arguments

    add_cluster_arguments(p)


def main(args) -> int:
    if args.unique_ids:
        return unique_ids_main(args)
    from modules.tokenize.load import load_tokenizer
    from modules.tokenize.verify import verify

    if args.vocab_size is not None and args.vocab_size <= 0:
        raise SettingsError(f"--vocab-size must be positive; got {args.vocab_size}")
    tok = load_tokenizer(args.tokenizer) if args.tokenizer else None
    report = verify(args.dir, vocab_size=args.vocab_size, tokenizer=tok, prefix=args.prefix)
    if not report.ok:
        for line in report.problems:
            print(line, file=sys.stderr)
        print(f"curate verify: {args.dir}: {len(report.problems)} problem(s)", file=sys.stderr, flush=True)
        return 1
    print(f"curate verify: {args.dir}: OK (vocabulary size {report.vocab_size or '?'} from {report.vocab_source})")
    total = {"files": 0, "documents": 0, "tokens": 0}
    for name, s in report.sets.items():
        print(f"  {name}: {s['files']} files, {s['documents']:,} documents, {s['tokens']:,} tokens, {s['dtype']}")
        for k in total:
            total[k] += s[k]
    if len(report.sets) > 1:
        print(f"  total: {total['files']} files, {total['documents']:,} documents, {total['tokens']:,} tokens")
    if report.first is not None:
        pair, length, tokens = report.first
        print(f"document 0 of {pair} ({length} tokens), first {len(tokens)}: {tokens.tolist()}")
        if tok is None and report.target.manifest and report.target.manifest.get("tokenizer"):
            name = report.target.manifest["tokenizer"].get("name")
            try:
                tok = load_tokenizer(name)
            except Exception as e:  # decoding is a courtesy: the check itself passed
                print(f"(not decoded: cannot load tokenizer {name}: {e})")
        if tok is not None:
            print(f"decoded: {tok.decode(tokens)!r}")
    return 0


def unique_ids_main(args) -> int:
    from app import runner
    from app.cli import cluster_settings
    from app.cluster import connect
    from modules import dataset, unique_ids
    from modules.settings import IOSettings

    io = IOSettings(on_error="skip")  # bad lines and non-string ids are counted, not fatal, here
    dataset.expand_inputs([args.dir])  # a missing or unfinished input: one line before any cluster
    with connect(cluster_settings(args)) as client:
        report = unique_ids.check([args.dir], io, runner.make_compute(client))
    rejected = f"; {report.rejected:,} unreadable or rejected record(s) not checked" if report.rejected else ""
    if report.ok:
        print(f"curate verify: {args.dir}: {report.documents:,} ids, all unique{rejected}")
        return 0
    for ident, n, files in report.examples:
        print(f"  {ident!r}: {n} documents ({', '.join(files)})", file=sys.stderr)
    more = report.duplicate_ids - len(report.examples)
    print(f"curate verify: {args.dir}: {report.duplicate_ids:,} duplicate id(s) among {report.documents:,} documents "
          f"({report.extra_documents:,} documents beyond the first of each{'; first ' + str(len(report.examples)) + ' shown' if more > 0 else ''})"
          f"{rejected}", file=sys.stderr, flush=True)
    return 1
