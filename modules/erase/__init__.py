"""``curate erase``: remove documents from every curate output under a root, in place.

    curate erase ROOT [ROOT ...] (--ids FILE | --urls FILE | --domains FILE) [--dry-run]

A ROOT is a job's output root (its manifest lists its stage folders) or one output directory
(every unit in it: tokenize ``--prefix`` sets share a folder). The request file holds one id, URL or
domain per line (UTF-8; blank lines ignored; ids and URLs exactly as written, spaces included; domains
in any case, Unicode or IDNA ``xn--`` form). A document is erased when

- ``--ids``: its ``id`` is listed, or it is a piece of a listed document: ``ID#k`` (the segments of
  ``split_documents`` and the fragments of ``decontaminate``), a ``document_id`` column, or the
  column ``add_id --keep-original-as`` kept the old id in;
- ``--urls``: its ``url`` is listed (exactly);
- ``--domains``: the host of its ``url`` is a listed domain or below it (``example.com`` erases
  ``a.example.com``), both sides compared in IDNA ASCII form (``bücher.de`` is ``xn--bcher-kva.de``);
  an IP address host matches only itself, whole.

Files without the matched column (dedup ``_rejects/`` hold only ids, token sidecars may have no
``url``) are matched by the ids those rules resolve to anywhere under the roots (repeated until no
new id turns up), and dedup intermediates (``_work/``) by the document numbers (``doc``, ``u``,
``v``) that files of the same output give those ids.

What is rewritten, each file through :class:`curate.stages.output.Output` (temporary, rename,
checksum) and only when it holds an erased document:

- fuzzy dedup's shingle sets (``_work/shingles/*.u64``, raw): the erased documents' values zeroed in
  place (the file keeps its size, so the other documents' places stay true);
- dataset parts, ``_rejects/``, ``_duplicates/`` and ``_work/`` Parquet: the rows dropped with Arrow
  (and dedup's references to an erased document replaced, below), the file written again with the
  compression it had (JSONL: the other lines kept byte for byte). A part is what the stage writes
  without those documents in its input partition: per-document stages never look at another document. A ``_rejects/`` file left empty is removed (stages write
  none then); every other file stays, possibly empty, as the stages leave theirs.
- token pairs: the other sequences' bytes copied in order, the ``.idx`` recomputed
  (:func:`curate.stages.tokenize.megatron.index_bytes`), the sidecar's rows dropped: the pair tokenize
  writes without those documents (a pair left without documents is removed, as tokenize writes none).
- packed rows: every pair whose input pair changed, or moved (a pair before it was removed: the
  pair's number seeds its row order and ``pack_id``), is packed again by ``pack``'s own writer.
- token shards: from the first shard that held an erased token on, every shard is written again
  by ``shards``' own writer (the tokens after it shift; shards after the new last one are removed).
  So packed rows and shards are what ``pack`` and ``shards`` write from the erased token set.

Each changed unit's manifest gets the new sizes, checksums, rows and counts (``counts``, tokenize's
``files``/``sets``/``totals``, pack's and shards' whole summaries) and an ``erasures`` record
``{"at", "request_sha256", "documents", "by"}``: when, the SHA-256 of the request file, how many
documents were erased from the unit, and the kind; never what was erased. A job root's manifest gets
the stages' new counts and its own record. Fingerprints stay: a rerun of the job skips the erased
stages rather than recomputing them from inputs that still hold the documents.

Order of work, so that a killed erase resumes (run the same command again) and a second run
changes nothing:

1. Refusals, before anything is written (exit 2, one line): an unreadable or empty request, a line
   that is not UTF-8 or not a domain; a ROOT that is not curate's (no manifest, files no manifest
   lists, a symbolic link: :func:`curate.stages.output.check_claim`); an unfinished output; files
   erase cannot rewrite (raw downloads, merged pairs, token outputs without document sidecars); a
   token set whose manifest its pairs contradict (``curate verify``'s checks that read no ``.bin``);
   packed rows or shards whose token set is not part of this erase or changed since; shards left
   without tokens; another run holding a lock (named). Every unit's lock is taken for the whole erase.
2. The request is resolved to ids. Entries that match nothing anywhere are reported and nothing is
   changed (exit 1), unless a manifest under the roots records this request (an erase done
   before, resumed or repeated: then what is left is erased, and nothing when nothing is).
3. Every affected unit gets a journal record ``erase-<sha256[:16]>`` (the files it will rewrite, its
   ids and document numbers: what a resumed run needs once the files no longer show them; removed
   when the unit is done), is marked ``"status": "erasing"``, then loses its ``_SUCCESS``. A unit
   holding this request's journal record is this erase's whatever its sentinel says.
4. Unit by unit (datasets, token sets, packed rows and shards, job roots): rewrite, then the manifest,
   then ``_SUCCESS``, then the journal record goes. A file whose checksum is no longer the manifest's
   was written already and is skipped (rewriting it again would lower ``dup_cluster_size`` twice);
   a pair's files are written ``.bin``, ``.idx``, sidecar; packed rows and shards are rebuilt from the
   erased token set; temporaries a kill left are removed. So an erase killed after any file operation
   and run again gives the files of an erase never killed (a test kills it after each one).

Where the result differs from a fresh run without the documents: a dedup stage keeps one document
of a duplicate group; erase never brings back a document an erased one displaced (a fresh run would
keep its duplicate instead). The other members stay rejected, but no row names the erased document
any more: their ``_detail`` becomes "duplicate of an erased document" and their ``kept_id`` null (in
``_duplicates/`` and ``_work/``). Dedup intermediates (``_work/``) keep the document numbers of the
original run. ``counts.in`` drops by the erased rows (for ``split_documents`` and
``join_documents``, which count segments on one side, a fresh run's would differ). Stage statistics
besides counts (filter score samples, dedup step sizes) describe the original run. Inputs curate did
not write (the job's WARC files, a user's JSONL) are never touched: rerunning a job with ``--force``
brings the documents back.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, field

# the package's parts, one concern each; their public names are importable from here
from curate.stages.erase.files import disk_record, read_table, rewrite_table
from curate.stages.erase.manifests import _finished, finish, mark
from curate.stages.erase.match import (
    DETAIL,
    DOCUMENT_ID,
    DUPLICATE_OF,
    ERASED_DETAIL,
    ID,
    KEPT_ID,
    NUMBERS,
    REASON,
    URL,
    Matcher,
    numbers_mask,
)
from curate.stages.erase.plan import (
    CLUSTER_SIZE,
    check_consumers,
    cluster_shrinks,
    plan_unit,
    resolve,
    shrink_sizes,
)
from curate.stages.erase.request import BY, Request, ascii_host, domain_of, host_of, is_ip, read_request
from curate.stages.erase.rewrite import (
    apply_dataset,
    apply_pack,
    apply_shards,
    apply_tokens,
    copy_sequences,
    rewrite_pair,
)
from curate.stages.erase.units import RANK, Unit, check_units, discover, lock_all, scan_files

__all__ = [
    "BY", "CLUSTER_SIZE", "DETAIL", "DOCUMENT_ID", "DUPLICATE_OF", "ERASED_DETAIL", "ID", "KEPT_ID", "NUMBERS",
    "RANK", "REASON", "URL", "Matcher", "Outcome", "Request", "Unit", "apply_dataset", "apply_pack",
    "apply_shards", "apply_tokens", "ascii_host", "check_consumers", "check_units", "cluster_shrinks",
    "copy_sequences", "discover", "disk_record", "domain_of", "erase", "finish", "host_of", "is_ip", "lock_all",
    "mark", "numbers_mask", "plan_unit", "read_request", "read_table", "resolve", "rewrite_pair", "rewrite_table",
    "scan_files", "shrink_sizes",
]

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- the whole erase


@dataclass
class Outcome:
    request: Request
    units: list  # (where, kind, documents) of each changed unit
    unknown: list[str]  # entries that matched nothing
    refused: bool = False  # nothing changed because of ``unknown``
    already: list[str] = field(default_factory=list)  # manifests recording this request before
    dry_run: bool = False


def erase(roots, request: Request, dry_run: bool = False, before_job_finish=None) -> Outcome:
    """Erase the request's documents under ``roots`` (see the module doc); what was done.
    ``before_job_finish(job_root)`` runs while a changed job root is still locked (the app
    rebuilds the job's HTML report there)."""
    units = discover(roots)
    with contextlib.ExitStack() as stack:
        lock_all(units, request, stack)
        units = discover(roots)  # again under the locks: a run may have finished meanwhile
        check_units(units, request)
        for u in units:  # a writer under the lock: an earlier curate's side folders go beside the folder
            u.out.move_side()
        stored = {}
        for u in units:
            rec = u.out.journal_record(request.key)
            if rec and rec.get("run") == request.sha256 and rec.get("plan") is not None:
                stored[id(u)] = rec["plan"]
        known = {i for p in stored.values() for i in p.get("ids", [])}
        matcher, unknown = resolve(units, request, known)
        already = [u.where for u in units if any(e.get("request_sha256") == request.sha256
                                                 for e in u.manifest.get("erasures") or [])]
        if unknown and not already and not stored:
            return Outcome(request, [], unknown, refused=True)
        shrinks = cluster_shrinks(units, matcher)
        for u in units:
            if u.kind == "job":
                continue
            u.plan = stored.get(id(u)) or plan_unit(u, matcher, shrinks.get(id(u)) or {})
            u.resumed = id(u) in stored
        for u in units:
            if u.kind == "job":
                ids = {i for s in u.stages if s.plan for i in s.plan["ids"]}
                if any(s.plan for s in u.stages) or id(u) in stored:
                    u.plan = stored.get(id(u)) or {"paths": [], "files": [], "pairs": [], "ids": [],
                                                   "documents": len(ids), "by": request.by}
                    u.resumed = id(u) in stored
        changed = [u for u in units if u.plan is not None]
        check_consumers(units)
        outcome = Outcome(request, [(u.where, u.kind, u.plan["documents"]) for u in changed], unknown,
                          already=already, dry_run=dry_run)
        if dry_run:
            return outcome
        # a unit whose manifest a killed erase already finished only lacks its _SUCCESS
        done = {id(u) for u in changed if u.resumed and _finished(u.out.manifest(), request)}
        for u in changed:  # every plan is on disk before any document file changes
            if id(u) not in done:
                mark(u, request)
        for u in changed:
            if id(u) in done:
                finish(u, request, None, {})
                continue
            written: dict = {}
            summary = None
            if u.kind == "dataset":
                apply_dataset(u, matcher, written)
            elif u.kind == "tokens":
                apply_tokens(u, matcher, written)
            elif u.kind == "pack":
                summary = apply_pack(u, written)
            elif u.kind == "shards":
                summary = apply_shards(u, written)
            elif u.kind == "job" and before_job_finish is not None:
                before_job_finish(u.out.url)
            finish(u, request, summary, written)
            log.debug("erase: %s: %d documents erased", u.where, u.plan["documents"])
        return outcome
