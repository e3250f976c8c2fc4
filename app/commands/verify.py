"""``curate verify DIR``: is a curate output exactly what its manifest says?

Works on every curate output and exits non-zero with one line per problem, ``FILE: CHECK: detail``:

- any stage output: every file its manifest lists is present with its size (``--checksums`` also
  re-reads each and compares its XXH3-128), data parts hold the rows the manifest says and add up
  to its counts, the run finished (``_SUCCESS``), no file lies there that no manifest lists, and
  no symbolic link (curate makes none, and a rerun refuses an output that holds one);
- a job's output root: each stage output it ran, in turn;
- a token set (tokenize or merge output, or one pair named by its prefix), in addition: the
  Megatron structure of every pair, per-pair documents/tokens/bytes and checksums against the
  manifest, the manifest's dtype, vocabulary sizes, totals, sets and counts against the pairs, no
  stray or foreign pair, token ids below the vocabulary size, every pair's document
  sidecar (one row per sequence; a merged pair's the concatenation of its inputs'). On success it
  prints the files, documents, tokens and dtype of each set and the first 64 tokens of document 0,
  decoded when the tokenizer is known (``--tokenizer``, else the one named in the manifest), and a
  note for an output written before document sidecars existed (it passes, untraceable).

``--leakage TRAIN VAL [TEST ...]`` reports instead the exact and near duplicates across splits
(datasets, token sets, decontamination task files; :mod:`curate.stages.leakage`), one line each,
``split_a:id_a ~ split_b:id_b jaccard 0.93``, and exits 1 when there are any.

``--unique-ids DIR`` checks instead that the ids of a dataset (a stage output, files or a glob) are
unique, on the cluster in bounded memory (:mod:`curate.stages.unique_ids`): it lists the first duplicates
with their files and exits 1 when there are any.
"""

from __future__ import annotations

import logging
import os
import sys

from curate.stages.errors import SettingsError

HELP = "check a curate output against its manifest (files, sizes, checksums, rows; token sets in depth)"
log = logging.getLogger("curate.verify")


def add_arguments(p) -> None:
    p.add_argument("dir", metavar="DIR", nargs="?",
                   help="a curate output directory (local or URL), or a pair's prefix")
    p.add_argument("--checksums", action="store_true",
                   help="re-read every listed file and compare its XXH3-128 checksum (token .bin/.idx always are)")
    p.add_argument("--vocab-size", type=int, default=None, metavar="N",
                   help="every token id must be below N (default: the tokenizer's, else _manifest.json's)")
    p.add_argument("--tokenizer", default=None, metavar="TOK",
                   help="tokenizer for the vocabulary size and to decode the first document")
    p.add_argument("--prefix", default=None, metavar="NAME", help="check only the pairs NAME_00000... (one set)")
    p.add_argument("--unique-ids", action="store_true",
                   help="instead: check that the ids of the dataset DIR (a stage output, files or a glob) are "
                        "unique, on the cluster; lists the first duplicates and exits 1 when there are any")
    p.add_argument("--leakage", nargs="+", default=None, metavar="SPLIT",
                   help="instead: report exact and near duplicates across splits (TRAIN VAL [TEST ...]: datasets, "
                        "token sets, task:NAME=PATH task files; NAME=PATH names one), exit 1 when there are any")
    p.add_argument("--leakage-threshold", type=float, default=0.8, metavar="J",
                   help="--leakage: Jaccard similarity of word 5-grams from which a pair is a near duplicate (default 0.8)")
    p.add_argument("--task-fields", default="text", metavar="FIELD,...",
                   help="--leakage: fields of a task file's records that hold its texts (default: text)")
    from curate.app.cli import add_cluster_arguments

    add_cluster_arguments(p)


def what_is(path: str) -> str:
    """'tokens' (a token set or a pair), 'job' (a job's output root), or 'output' (any other)."""
    import fsspec

    from curate.stages.output import Output, units_in

    fs, root = fsspec.core.url_to_fs(path)
    if not fs.isdir(root):
        return "tokens"
    out = Output.at(path)
    listing = {rel: 0 for rel in (e.rsplit("/", 1)[-1] for e in fs.ls(root, detail=False))}
    stages = set()
    for unit in units_in(listing):
        m = Output(out.url, unit).manifest() or {}
        if (m.get("owner") or {}).get("kind") == "job":
            return "job"
        stages.add(m.get("stage"))
    if stages & {"tokenize", "merge"} or any(n.endswith((".bin", ".idx")) for n in listing):
        return "tokens"
    return "output"


def link_problems(path: str) -> list[str]:
    """A line per symbolic link below a local output: verify reads nothing through one."""
    from curate.stages.output import Output, link_target

    if "://" in path or not os.path.isdir(path):
        return []
    out = Output.at(path)
    return [f"{out.path(rel)}: link: a symbolic link (to {link_target(out.path(rel))}); curate makes none, "
            "and reads, writes, renames and deletes nothing through one" for rel in out.links()]


def output_problems(path: str, checksums: bool, skip_pairs: bool = False) -> list[str]:
    """Every unit of the directory against its manifest, files no manifest lists, and links."""
    from curate.stages.output import Output, side_strays, units_in, unlisted, verify_unit
    from curate.stages.tokenize.docs import DOCS_SUFFIX

    out = Output.at(path)
    listing = out.listing()
    units = units_in(listing) or [""]
    problems = link_problems(path)
    if problems:  # a manifest, journal or part behind a link is not read at all
        return problems
    for unit in units:
        for line in verify_unit(Output(out.url, unit), checksums, listing):
            # pairs and their document sidecars have their own, deeper checks (structure, counts, checksums)
            if not (skip_pairs and any(f"{ext}:" in line for ext in (".bin", ".idx", DOCS_SUFFIX))):
                problems.append(line)
    for rel in unlisted(out, listing):
        if skip_pairs and rel.endswith((".bin", ".idx")) and "/" not in rel:
            continue  # reported by the token checks as a stray pair
        problems.append(f"{out.path(rel)}: unlisted: no manifest here names this file (a stray or foreign file)")
    for stray in side_strays(out.url):
        problems.append(f"{stray}: unlisted: the side folder holds only curate's side folders (a stray or foreign file)")
    return problems


def fail(path: str, problems: list[str]) -> int:
    for line in problems:
        print(line, file=sys.stderr)
    print(f"curate verify: {path}: {len(problems)} problem(s)", file=sys.stderr, flush=True)
    return 1


def main(args) -> int:
    if args.leakage is not None:
        return leakage_main(args)
    if args.dir is None:
        raise SettingsError("verify: give DIR (or --leakage TRAIN VAL ...)")
    if args.unique_ids:
        return unique_ids_main(args)
    from curate.stages.tokenize.load import load_tokenizer
    from curate.stages.tokenize.verify import verify

    if args.vocab_size is not None and args.vocab_size <= 0:
        raise SettingsError(f"--vocab-size must be positive; got {args.vocab_size}")
    links = link_problems(args.dir)
    if links:
        return fail(args.dir, links)
    kind = what_is(args.dir)
    if kind == "job":
        return verify_job(args)
    stage = _stage_of(args.dir) if kind == "output" else None
    if stage in ("pack", "shards"):  # packed rows and token shards: their checks live beside their writers
        import importlib

        tok = load_tokenizer(args.tokenizer) if args.tokenizer else None
        report = importlib.import_module(f"curate.stages.{stage}").verify(args.dir, vocab_size=args.vocab_size, tokenizer=tok)
        return _print_check(args.dir, report, tok, output_problems(args.dir, args.checksums))
    if kind == "output":
        problems = output_problems(args.dir, args.checksums)
        if problems:
            return fail(args.dir, problems)
        print(f"curate verify: {args.dir}: OK ({describe(args.dir)})")
        return 0
    tok = load_tokenizer(args.tokenizer) if args.tokenizer else None
    report = verify(args.dir, vocab_size=args.vocab_size, tokenizer=tok, prefix=args.prefix)
    problems = list(report.problems)
    if report.target.is_dir and args.prefix is None:
        problems += output_problems(args.dir, args.checksums, skip_pairs=True)
    if problems:
        return fail(args.dir, problems)
    print(f"curate verify: {args.dir}: OK (vocabulary size {report.vocab_size or '?'} from {report.vocab_source})")
    for note in report.notes:
        print(f"note: {note}")
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
    from curate.app import runner
    from curate.app.cli import cluster_settings
    from curate.app.cluster import connect, resolve_auto
    from curate.stages import dataset, unique_ids
    from curate.stages.settings import IOSettings

    io = IOSettings(on_error="skip")  # bad lines and non-string ids are counted, not fatal, here
    files = dataset.expand_inputs([args.dir])  # a missing or unfinished input: one line before any cluster
    cs = resolve_auto(cluster_settings(args), None if "://" in args.dir else sum(os.path.getsize(f) for f in files))
    with connect(cs) as client:
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


def leakage_main(args) -> int:
    """``--leakage``: every exact and near duplicate across the splits, one line each (module
    :mod:`curate.stages.leakage`); exit 1 when there is one."""
    from curate.stages.leakage import find_leakage

    specs = ([args.dir] if args.dir else []) + list(args.leakage)
    fields = tuple(f.strip() for f in args.task_fields.split(",") if f.strip())
    report = find_leakage(specs, args.leakage_threshold, fields)
    for m in report.matches:
        print(m.line())
    sizes = ", ".join(f"{name} {n:,}" for name, n in report.splits)
    if report.matches:
        exact = sum(m.exact for m in report.matches)
        print(f"curate verify: leakage: {len(report.matches)} duplicate pair(s) across the splits ({exact} exact, "
              f"{len(report.matches) - exact} near at Jaccard >= {args.leakage_threshold}; documents: {sizes})",
              file=sys.stderr, flush=True)
        return 1
    print(f"curate verify: leakage: none across the splits (documents: {sizes}; near duplicates from Jaccard "
          f"{args.leakage_threshold})")
    return 0


def describe(path: str) -> str:
    from curate.stages.output import Output

    m = Output.at(path).manifest() or {}
    counts = m.get("counts") or {}
    files = len(m.get("outputs") or [])
    if m.get("stage") == "dedup_index":  # a saved dedup index (curate dedup --save-index)
        info = m.get("index") or {}
        return f"{info.get('kind')} dedup index, {info.get('documents', '?')} documents, {files} files"
    return f"stage {m.get('stage')}, {files} files, {counts.get('out', '?')} documents out of {counts.get('in', '?')}"


def verify_job(args) -> int:
    """A job's root: each stage output it lists, in order."""
    import os

    from curate.stages.output import SIDE_SUFFIX, Output

    root = Output.at(args.dir)
    manifest = root.manifest() or {}
    stages = manifest.get("stages") or []
    # stage folders are checked one by one below: their files (and links) are theirs to report
    inside = tuple(root.path(stage["output"]) + end for stage in stages for end in ("/", f"{SIDE_SUFFIX}/"))
    problems = [p for p in output_problems(args.dir, args.checksums)
                if "unlisted" not in p and not p.startswith(inside)]
    code = 0
    for stage in stages:
        sub = os.path.join(args.dir, stage["output"]) if "://" not in args.dir else f"{args.dir}/{stage['output']}"
        sub_args = type(args)(**{**vars(args), "dir": sub})
        code = max(code, main(sub_args))
    if problems:
        return fail(args.dir, problems)
    if code == 0:
        print(f"curate verify: {args.dir}: OK (job {manifest.get('job')}, {len(manifest.get('stages') or [])} stages)")
    return code


def _stage_of(path: str) -> str | None:
    """The stage named by a directory's manifest (None when it has none or it is unreadable: the
    generic checks report that)."""
    from curate.stages.errors import DataError
    from curate.stages.output import Output

    try:
        return (Output.at(path).manifest() or {}).get("stage")
    except DataError:
        return None


def _print_check(path: str, report, tok, generic: list[str]) -> int:
    from curate.stages.tokenize.load import load_tokenizer

    problems = generic + [p for p in report.problems if p not in generic]
    if problems:
        return fail(path, problems)
    print(f"curate verify: {path}: OK (vocabulary size {report.vocab_size or '?'} from {report.vocab_source})")
    for note in report.notes:
        print(f"note: {note}")
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
