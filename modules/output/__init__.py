"""Outputs curate owns: the one place that creates, writes, records, locks and deletes output files.

Every stage, the dedup steps, tokenize, merge, shuffle and the job runner write through an
:class:`Output`: a directory (local path or fsspec URL) and, inside it, an ownership *unit*. A unit
is the whole directory (``unit=""``, every stage) or a named part of it (tokenize ``--prefix web``),
so ``web_*`` and ``code_*`` pairs live side by side in one folder, each with its own files::

    unit ""                      unit "web"
    _manifest.json               _manifest.web.json    what the unit is (owner), what it wrote (an earlier
                                                       curate wrote manifest.json: read, kept by erase,
                                                       renamed by a rerun)
    _SUCCESS                     _SUCCESS.web          written last: the unit is complete
    _state/<key>.json            _state.web/<key>.json resume journal (one record per task), in the side folder
    _LOCK                        _LOCK.web             held by the run writing the unit

The side folder. A stage folder is a dataset to other tools: pandas and pyarrow skip ``_`` and ``.``
entries, but DuckDB's ``read_parquet('OUT/03-filter')`` reads every Parquet file below the folder and
counted a fuzzy stage's intermediates as 9,273 documents where there were 281. So the side outputs,
which all may hold Parquet, live in a sibling named after the folder, ``OUT/03-filter.side/``:
``_rejects/`` (dropped documents and why), ``_duplicates/`` (dedup audits), ``_work/`` (dedup
intermediates) and ``_state/`` (the journal); the folder holds the parts, the manifest, ``_SUCCESS``
and the lock. It stays one unit with one owner: paths in manifests and journals keep their names
(``_rejects/part-00000.parquet``, relative to the output), and :meth:`Output.path` puts a path whose
first folder is one of those (:func:`is_side`) in the side folder. So the manifest still lists every
file with its checksum (``curate verify``), erase rewrites rejects and audits by the same names, the
journal resumes, the output's lock covers its side folder, and nothing but paths changed for the
stages. The side folder is the output's: a claim refuses one that holds anything else or is a link,
an output that is another output's side folder, and an input inside it.

Why a sibling and not a folder inside: every reader recurses into hidden and ``_`` folders alike
(DuckDB), or fails on files of another extension (polars), so nothing with Parquet can stay below the
folder a user reads. Why keep the names: an old manifest and a new one mean the same files, and the
layout of an earlier curate is one rule away. That layout (side folders inside the folder) is read
where it is: a side path that exists inside the folder is read, rewritten and deleted there, so
verify, reading it as an input, erase and resume work unchanged; a writer under the lock (a run's
:meth:`Output.begin`, ``curate erase``) then moves its unit's side files out (:meth:`Output.move_side`),
file by file, so a killed move leaves each file in one place or the other and both are found.

Writing. :meth:`Output.open` hands out a file object that computes the XXH3-128 checksum of what
passes through it (no second read). Locally it writes ``.<name>.curate-tmp-<pid>-<random>`` and
renames it to the final name when closed without error; on an object store it writes the final
key directly (a PUT of the whole object, multipart for large ones, visible only when complete).
Each closed file yields a record ``{"path", "bytes", "xxh3_128"}`` (plus ``"rows"`` for a
dataset part).

The journal. A task that writes files first records its *intent* (the names it is about to write)
under ``_state/``, then writes them, then records them as *done* with their records and whatever
the task returns. So every file curate ever put in a directory is named by the manifest or by a
journal record written before the file itself: that is what ownership means here. Resume logic
(finished partitions, finished dedup steps) reads the same journal: a done record whose run key
matches and whose files are present with their sizes is not redone. A *pending* record (a download
that failed for now) is never finished: the next run of the same key redoes it.

Deleting. :meth:`Output.remove` removes only files that a manifest or journal record of the unit
lists, and temporaries (the ``.curate-tmp-`` mark). Nothing else in curate deletes output files.
A run removes its unit's temporaries that a killed run left when it begins, and again when it
finishes.

Links. curate never writes, renames or deletes through a symbolic link inside an output: a linked
``_rejects/`` or ``_state/`` may lead to a folder of someone else's. A local output with a link
anywhere below it is refused before any work (:func:`check_claim`), and every write and delete
checks the folders between the output and its file again (:func:`refuse_link`). The output
directory itself may be a link (the user named it); what lies below it may not.

Claiming (:func:`check_claim`, before any work): an empty or missing directory is always fine. A
non-empty one must hold a curate manifest of the same owner (stage name, or job name for a job
root) for this unit, or other units of the same stage (tokenize prefixes); every file in it must be
owned by some unit. Anything else is refused with one line naming a foreign file.

Locking (:class:`Lock`): a run holds ``_LOCK`` for its whole life, created with ``O_EXCL`` and
naming host, pid, start time and a heartbeat refreshed every ``HEARTBEAT`` seconds (``flock`` alone
is unreliable on NFS/Lustre). Another run on the same unit, on a directory above it or on one
below it fails at once, naming the holder. A lock whose holder is gone (same host: the pid is dead;
any host: no heartbeat for ``lock_timeout()`` seconds, default 120, ``CURATE_LOCK_TIMEOUT``
overrides) is taken over with a warning.
"""

from __future__ import annotations

# the package's parts, one concern each; their public names are importable from here
from curate.stages.output.claims import (
    _inside,
    _real,
    check_claim,
    check_not_input,
    describe_owner,
    manifest_owner,
    same_owner,
)
from curate.stages.output.files import RAW_SIDECAR, atomic_write, file_checksum, remove_raw
from curate.stages.output.lock import DEFAULT_LOCK_TIMEOUT, HEARTBEAT, Lock, lock_timeout
from curate.stages.output.names import (
    CHECKSUM,
    JOB_FOLDERS,
    SIDE_FOLDERS,
    SIDE_SUFFIX,
    TMP_MARK,
    LockedError,
    OwnershipError,
    check_paths,
    check_rel,
    is_control,
    is_remote,
    is_side,
    is_temporary,
    link_refusal,
    link_target,
    refuse_link,
    side_glob,
    side_of,
    side_strays,
    unit_files,
    units_in,
)
from curate.stages.output.unit import Output
from curate.stages.output.verify import unlisted, verify_unit

__all__ = [
    "CHECKSUM", "DEFAULT_LOCK_TIMEOUT", "HEARTBEAT", "JOB_FOLDERS", "RAW_SIDECAR", "SIDE_FOLDERS", "SIDE_SUFFIX", "TMP_MARK", "Lock", "LockedError",
    "Output", "OwnershipError", "_inside", "_real", "atomic_write", "check_claim", "check_not_input", "check_paths",
    "check_rel", "describe_owner", "file_checksum", "is_control", "is_remote", "is_side", "is_temporary", "link_refusal",
    "link_target", "lock_timeout", "manifest_owner", "refuse_link", "remove_raw", "same_owner", "side_glob", "side_of", "side_strays", "unit_files",
    "units_in", "unlisted", "verify_unit",
]
