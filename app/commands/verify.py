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


def main(args) -> int:
    from modules.tokenize.load import load_tokenizer
    from modules.tokenize.verify import verify

    if args.vocab_size is not None and args.vocab_size <= 0:
        raise SettingsError(f"--vocab-size must be positive; got {args.vocab_size}")
    tok = load_tokenizer(args.tokenizer) if args.tokenizer else None
    stage = _stage_of(args.dir)
    if stage in ("pack", "shards"):  # packed rows and token shards: their checks live beside their writers
        import importlib

        check = importlib.import_module(f"modules.{stage}").verify
        return _print_check(args.dir, check(args.dir, vocab_size=args.vocab_size, tokenizer=tok), tok)
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


def _stage_of(path: str) -> str | None:
    """The stage named by a directory's manifest.json (None when there is none)."""
    import os

    from modules.errors import DataError
    from modules.output import Output

    if "://" not in path and not os.path.isdir(path):
        return None
    try:
        manifest = Output.at(path).manifest()
    except DataError:  # an unreadable manifest: the Megatron checks report it
        return None
    return (manifest or {}).get("stage")


def _print_check(path: str, report, tok) -> int:
    from modules.tokenize.load import load_tokenizer

    if not report.ok:
        for line in report.problems:
            print(line, file=sys.stderr)
        print(f"curate verify: {path}: {len(report.problems)} problem(s)", file=sys.stderr, flush=True)
        return 1
    print(f"curate verify: {path}: OK (vocabulary size {report.vocab_size or '?'} from {report.vocab_source})")
    for line in report.summary:
        print(f"  {line}")
    if report.first is not None:
        what, tokens = report.first
        print(f"{what}, first {len(tokens)}: {tokens.tolist()}")
        if tok is None and report.tokenizer:
            try:
                tok = load_tokenizer(report.tokenizer)
            except Exception as e:  # decoding is a courtesy: the check itself passed
                print(f"(not decoded: cannot load tokenizer {report.tokenizer}: {e})")
        if tok is not None:
            print(f"decoded: {tok.decode(tokens)!r}")
    return 0
