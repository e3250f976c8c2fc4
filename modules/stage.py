"""The stage protocol.

A stage has a registered ``name``, one frozen ``Settings`` dataclass and a ``run`` method that turns
an input (files or a dataset directory) into an output directory and returns the manifest it wrote.

Most stages are per-document: subclass :class:`MapStage`, write a pure pandas function
``transform(df, settings) -> df`` and declare the output schema. The function never mutates its
input. To drop a document it sets a short reason in the ``_reason`` column instead of removing the
row; the writer moves such rows to ``_rejects/`` and counts them, so nothing is lost silently.

Settings and their helpers live in ``modules/settings.py`` (re-exported here).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import pandas as pd

from curate.stages.dataset import REASON

# re-exported: stages import their settings helpers from here
from curate.stages.settings import (  # noqa: F401
    IOSettings,
    check_choice,
    check_range,
    coerce,
    field_types,
    fingerprint,
    parse_bytes,
    settings_dict,
    settings_files,
    settings_from_mapping,
)

#: what a stage reads and writes (:attr:`Stage.reads`, :attr:`Stage.writes`), in a refusal's words
KINDS = {
    "documents": "documents",
    "tokens": "a token set (tokenize's .bin/.idx files, not documents)",
    "files": "raw files (WARC files, dumps, archives)",
    "rows": "packed rows (pack's Parquet files)",
    "shards": "token shards (.npy files)",
    "weights": "Megatron --data-path weights (blend of token sets)",
}


@dataclass(frozen=True)
class NoSettings:
    """For stages without settings."""


@dataclass(frozen=True)
class Columns:
    """What a stage reads and writes of a dataset's columns (NeMo Curator's ``inputs()``/``outputs()``).

    ``needs``: columns its input must have. ``adds``: columns it writes (new or rewritten). ``removes``:
    input columns it drops. ``makes``: the whole schema of a stage that starts a dataset (extraction,
    download: its input is not a dataset), None for the others; ``unknown`` when its columns depend on
    data the check cannot see (a user's JSONL), which ends the chain check."""

    needs: tuple[str, ...] = ()
    adds: tuple[str, ...] = ()
    removes: tuple[str, ...] = ()
    makes: tuple[str, ...] | None = None
    unknown: bool = False
    #: the setting that names the needed columns (select's ``where``), for the refusal's words
    source: str = ""


class Stage:
    """Base of every stage. Subclasses set ``name``, ``Settings`` and implement ``run``."""

    #: the dataset columns the stage needs, adds and removes (:class:`Columns`); stages whose columns
    #: depend on their settings override :meth:`columns`
    needs: ClassVar[tuple[str, ...]] = ("text",)
    adds: ClassVar[tuple[str, ...]] = ()
    removes: ClassVar[tuple[str, ...]] = ()
    makes: ClassVar[tuple[str, ...] | None] = None

    name: ClassVar[str]
    Settings: ClassVar[type] = NoSettings
    #: CLI words, e.g. ("dedup", "exact") for ``curate dedup exact``; default: (name,)
    cli: ClassVar[tuple[str, ...] | None] = None
    #: one line for ``curate --help``
    help: ClassVar[str] = ""
    #: True when the stage reads files that are not a document dataset (extract, download)
    reads_raw_files: ClassVar[bool] = False
    #: False for stages that make their own input (downloads): no --input flag
    takes_input: ClassVar[bool] = True
    #: what the stage can read, of :data:`KINDS`: a job whose stage follows one writing another kind
    #: (pack after clean, clean after tokenize, an extraction after anything) is refused before any work.
    #: A stage of your own with ``reads_raw_files`` that sets neither this nor ``writes`` is not checked
    reads: ClassVar[tuple[str, ...]] = ("documents",)
    #: what it writes, of :data:`KINDS` (:meth:`output_kind`)
    writes: ClassVar[str] = "documents"
    #: modules its tasks import lazily that a worker should import as it starts, before its first task
    #: (the stage's own module is always imported; see :mod:`curate.app.worker_warm`); ``module:function``
    #: also calls that function (no arguments), for a cost paid once per process, as numba's registries
    worker_imports: ClassVar[tuple[str, ...]] = ()

    def output_kind(self, settings, read: str | None) -> str | None:
        """What the stage writes from an input of kind ``read`` (None: unknown), None when not known
        before it runs; a stage whose output follows its input's kind (blend) overrides this."""
        return self.writes

    def planned_output(self, settings):
        """What a later stage's check reads of this stage's output, known before it runs (tokenize:
        its token set's vocabulary and ids, from the tokenizer), or None."""
        return None

    def check_planned_input(self, settings, planned) -> None:
        """The refusals of :meth:`check` against an earlier stage's :meth:`planned_output`, for a job
        whose stage reads what that stage will write: before any work, not once that stage has run."""

    def run(self, settings, ctx: StageContext) -> dict:
        raise NotImplementedError

    def prepare_head(self, settings) -> None:
        """What the head can do for this stage before its input exists (tokenize: load the tokenizer
        whose vocabulary and hash its plan needs). A job's runner calls it for the later stages in a
        thread as the job starts, while the workers run the earlier ones, so that the stage's own call
        finds it cached: at 6 quarter-core nodes tokenize's plan took 4.5 s of its 30. Idempotent, reads
        no input; an error here is the stage's own when it runs."""

    def columns(self, settings) -> Columns:
        """The columns this stage needs, adds and removes with these settings."""
        return Columns(self.needs, self.adds, self.removes, self.makes)

    def check(self, settings, inputs: tuple[str, ...]) -> None:
        """Refusals that need the inputs but no cluster, run before anything starts or is written
        (a SettingsError naming the option). Reads small files only (manifests). ``inputs`` may not
        exist yet (a later stage of a job): then there is nothing to check here."""

    def check_output(self, settings, inputs: tuple[str, ...], output: str) -> None:
        """Refusals that need the output directory too (a second directory the stage writes must not
        overlap it), run with the others before any work; also for a stage of a job whose inputs
        are not written yet (``inputs`` may not exist)."""


@dataclass(frozen=True)
class StageContext:
    """What the runner hands a stage: where to read, where to write, and how."""

    input: tuple[str, ...]
    output: str
    io: IOSettings
    fingerprint: str
    #: called with a list of delayed objects / collections; returns computed values and may show progress
    compute: Any = None
    #: recompute everything, including finished partitions and intermediates a stage keeps for resuming
    force: bool = False
    #: who owns the output (recorded in its manifest): {"kind": "stage", "stage": name, "job": job or None}
    owner: dict | None = None
    #: when the stage began (epoch seconds, set by the runner): the manifest's time covers all of the
    #: stage's work (a dedup's steps, an extraction's downloads), not only its final write
    started: float | None = None
    #: the threads that run tasks (set by the runner: the cluster's, or this process's). A step of
    #: little work per partition runs in about this many tasks, never more than one per partition;
    #: what it writes never depends on it
    slots: int | None = None

    def run_compute(self, *collections):
        import dask

        if self.compute is not None:
            return self.compute(*collections)
        return dask.compute(*collections)

    def run_beside(self, collection):
        """Start computing ``collection`` now, beside what the stage computes next, and return a function
        that waits for its value: a cluster runs a one-task summary (fuzzy dedup's audit) while the
        workers write. Without a cluster it is computed when that function is called."""
        start = getattr(self.compute, "start", None)
        if start is not None:
            return start(collection)
        return lambda: self.run_compute(collection)[0]


class MapStage(Stage):
    """A per-partition stage: ``transform`` is pure pandas; the Dask part is one ``map_partitions``."""

    #: columns kept in ``_rejects/`` for dropped rows; None keeps every column
    reject_columns: ClassVar[tuple[str, ...] | None] = None

    def transform(self, df: pd.DataFrame, settings) -> pd.DataFrame:
        raise NotImplementedError

    def output_meta(self, meta: pd.DataFrame, settings) -> pd.DataFrame:
        """Schema of ``transform``'s output; by default computed by running it on the empty frame."""
        return self.transform(meta, settings)

    def apply(self, ddf, settings):
        """The thin Dask wrapper: one task per partition, output schema declared."""
        meta = self.output_meta(ddf._meta, settings)
        return ddf.map_partitions(apply_to_kept, self.transform, settings, meta=meta)

    def apply_made(self, made, settings):
        """What :meth:`apply` does, on :class:`curate.stages.dataset.Made` partitions: each partition is
        read, transformed and written in one task, several small ones a task
        (:mod:`curate.stages.dataset.groups`)."""
        meta = self.output_meta(made.meta, settings)
        return made.then(apply_enforced, self.transform, settings, meta, meta=meta)

    def run(self, settings, ctx: StageContext) -> dict:
        from curate.stages import dataset

        if type(self).apply is MapStage.apply:
            out = self.apply_made(dataset.read_made(ctx.input, ctx.io), settings)
        else:  # a stage whose apply moves rows between partitions (a shuffle) needs the Dask DataFrame
            out = self.apply(dataset.read_dataset(ctx.input, ctx.io, rejects_dir=ctx.output), settings)
        return dataset.write_dataset(
            out, ctx, stage=self.name, settings=settings, reject_columns=self.reject_columns
        )


def apply_enforced(df: pd.DataFrame, transform, settings, meta: pd.DataFrame) -> pd.DataFrame:
    """:func:`apply_to_kept` as ``map_partitions(..., meta=meta)`` runs it (Dask's
    ``apply_and_enforce``): the columns must be the declared ones, and an empty partition is the
    declared empty frame, so that a part is the same file whichever of the two paths made it."""
    out = apply_to_kept(df, transform, settings)
    if not len(out):
        return meta
    if list(out.columns) != list(meta.columns):
        raise ValueError(f"the columns in the computed data {list(out.columns)} do not match the declared "
                         f"columns {list(meta.columns)}")
    return out


def apply_to_kept(df: pd.DataFrame, transform, settings) -> pd.DataFrame:
    """Run ``transform`` on the rows not yet dropped; rows dropped upstream pass through untouched."""
    if REASON not in df.columns or not df[REASON].notna().any():
        return transform(df, settings)
    dropped = df[REASON].notna()
    out = transform(df[~dropped], settings)
    rest = df[dropped].reindex(columns=out.columns)
    return pd.concat([out, rest.astype(out.dtypes.to_dict(), errors="ignore")])
