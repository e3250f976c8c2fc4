"""``curate erase ROOT ... --ids FILE | --urls FILE | --domains FILE``: remove documents in place.

From every curate output under the roots (a job's output root, or output directories): dataset
parts, ``_rejects/``, ``_duplicates/``, dedup intermediates, token pairs and their sidecars, packed rows
and shards (rebuilt from the erased token set), with manifests, counts and checksums updated and an
erasure record (when, how many, the request file's SHA-256) in each changed manifest. A job's HTML
report is written again from the erased outputs (it quotes rejected and duplicate documents). Run
the same command again to finish a killed erase; once done, it changes nothing. The work is in
:mod:`curate.stages.erase`; ``docs/erase.md`` says what is erased, how, and where it differs from a
fresh run.

Exit codes: 0 done (or nothing left to do), 1 entries of the request that exist nowhere under the
roots (listed; nothing changed), 2 refusals before any work (the request file, ownership, locks,
files erase cannot rewrite).
"""

from __future__ import annotations

import sys

HELP = "remove documents (by id, URL or domain) from every curate output under ROOT, in place"
#: unknown entries listed one per line before the summary line
SHOWN = 50


def add_arguments(p) -> None:
    p.add_argument("roots", nargs="+", metavar="ROOT",
                   help="a job's output root or a curate output directory (several allowed; packed rows and shards "
                        "need their token set among them)")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--ids", metavar="FILE", help="erase the documents with these ids (one per line)")
    g.add_argument("--urls", metavar="FILE", help="erase the documents with these URLs (one per line, exact)")
    g.add_argument("--domains", metavar="FILE",
                   help="erase the documents whose URL's host is one of these domains or below one (one per line)")
    p.add_argument("--dry-run", action="store_true", help="say what would change; change nothing")


def main(args) -> int:
    from curate.stages import erase

    by = next(b for b in erase.BY if getattr(args, b) is not None)
    request = erase.read_request(getattr(args, by), by)
    outcome = erase.erase(args.roots, request, dry_run=args.dry_run, before_job_finish=_rebuild_report)
    where = ", ".join(args.roots)
    if outcome.refused:
        for entry in outcome.unknown[:SHOWN]:
            print(f"  not found: {entry}", file=sys.stderr)
        more = f" ({len(outcome.unknown) - SHOWN} more not shown)" if len(outcome.unknown) > SHOWN else ""
        print(f"curate erase: {request.path}: {len(outcome.unknown)} of {len(request.entries)} {by} exist nowhere "
              f"under {where}{more}; nothing changed", file=sys.stderr, flush=True)
        return 1
    verb = "would erase" if outcome.dry_run else "erased"
    for unit, kind, documents in outcome.units:
        print(f"  {unit} ({kind}): {verb} {documents:,} documents")
    if outcome.unknown:
        print(f"note: {len(outcome.unknown)} of the {by} matched nothing (this request was erased before: "
              f"{outcome.already[0] if outcome.already else 'a killed run'})")
    if not outcome.units:
        print(f"curate erase: {where}: nothing to erase (request sha256 {request.sha256[:16]}...)")
    else:
        print(f"curate erase: {where}: {verb} from {len(outcome.units)} outputs (request sha256 "
              f"{request.sha256[:16]}...); check them with curate verify")
    return 0


def _rebuild_report(job_root: str) -> None:
    """The job's HTML report quotes rejected and duplicate documents: write it again from the erased
    outputs (only when the job has one)."""
    import os

    from curate.app.report_html import write_report

    if os.path.exists(os.path.join(job_root, "_reports", "report.html")):
        write_report(job_root, verify="auto")
