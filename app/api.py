"""curate from Python: pipelines of stage objects, and any per-document stage on a DataFrame.

    import curate

    pipeline = curate.Pipeline([
        curate.Step("clean"),
        curate.Step("filter", config="jobs/filters/heuristic_en.yaml"),
        curate.Step("exact_dedup"),
        curate.Step("tokenize", tokenizer="tiktoken:cl100k_base"),
    ], name="my-corpus")
    result = pipeline.run("data/*.jsonl", "out/my-corpus", workers=2)   # or client=your_client

    kept = curate.Step("clean").apply(pandas_frame)                    # a notebook, no cluster

A pipeline run is ``curate run``: the same refusals before any work, lock, resume, manifests,
ownership, performance report and HTML report (:func:`curate.app.runner.execute_job`). A step's
settings are the stage's own Settings dataclass, built from the keyword arguments with the same
checks as job YAML and CLI flags, so a wrong name or value fails when the step is made.

A stage of your own is a subclass of :class:`curate.MapStage` (a pure ``transform(df, settings)``)
and a filter of your own a subclass of :class:`curate.DocumentFilter`; pass the class to ``Step`` or
name it ``module:Class`` in a job YAML or a filter chain.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from curate.stages.errors import SettingsError

if TYPE_CHECKING:
    import dask.dataframe as dd
    import pandas as pd
    from distributed import Client

    from curate.app.runner import StageOutcome


def _target(stage) -> str:
    """The registry name of ``stage``: a registered name, ``module:Class``, or a Stage subclass."""
    from curate.stages.stage import Stage

    if isinstance(stage, type):
        if not issubclass(stage, Stage):
            raise SettingsError(f"{stage.__qualname__}: not a subclass of curate.Stage")
        return f"{stage.__module__}:{stage.__qualname__}"
    if not isinstance(stage, str):
        raise SettingsError(f"a stage is a name, module:Class or a Stage subclass; got {stage!r}")
    return stage


class Step:
    """One stage of a pipeline with its settings.

    ``Step("filter", config="chain.yaml")``: a registered stage (``curate stages`` lists them) with its
    Settings fields as keyword arguments; ``Step(MyStage, ...)`` or ``Step("my.module:MyStage")`` for
    a stage of your own; ``Step("filter", settings_instance)`` with a ready Settings object. ``input``
    reads something other than the previous step's output (as ``input:`` in a job YAML).

    Raises :class:`curate.SettingsError` naming an unknown stage or keyword and the known ones.
    """

    def __init__(self, stage, settings: Any = None, /, *, input: str | Sequence[str] | None = None,
                 **kwargs: Any):
        from curate.stages import registry
        from curate.stages.stage import settings_from_mapping

        self.name = _target(stage)
        self.stage_class = registry.get(self.name)
        if settings is not None and kwargs:
            raise SettingsError(f"stage {self.name}: give a Settings object or keyword arguments, not both")
        if settings is None:
            settings = settings_from_mapping(self.stage_class.Settings, kwargs, f"stage {self.name}")
        elif not isinstance(settings, self.stage_class.Settings):
            raise SettingsError(f"stage {self.name}: settings must be a {self.stage_class.Settings.__name__}; "
                                f"got {type(settings).__name__}")
        self.settings = settings
        if input is not None:
            input = tuple(map(str, (input,) if isinstance(input, (str, os.PathLike)) else input))
        self.input = input

    def __repr__(self) -> str:
        return f"Step({self.name!r}, {self.settings!r})"

    def apply(self, df: pd.DataFrame | dd.DataFrame, rejects: bool = False):
        """This step's ``transform`` on a DataFrame in memory: pandas in, pandas out (no Dask at all);
        a Dask DataFrame in, a lazy Dask DataFrame out (one ``map_partitions``).

        Returns the kept documents without curate's internal columns; with ``rejects=True`` a pair
        ``(kept, rejected)`` whose second frame has the ``_reason``/``_detail`` of each dropped row.
        Only per-document stages (subclasses of MapStage) apply to a frame; others need files
        (:class:`Pipeline`)."""
        from curate.stages.dataset import INTERNAL, REASON
        from curate.stages.stage import MapStage, apply_to_kept

        if not issubclass(self.stage_class, MapStage):
            raise SettingsError(f"stage {self.name} is not per-document: run it in a Pipeline on files")
        stage = self.stage_class()
        if hasattr(df, "map_partitions"):  # a Dask DataFrame
            out = stage.apply(df, self.settings)
            meta = out._meta
            kept = out.map_partitions(_kept, meta=meta[meta.columns.difference(INTERNAL, sort=False)])
            if not rejects:
                return kept
            return kept, out.map_partitions(_rejected, meta=meta)
        out = apply_to_kept(df, stage.transform, self.settings)
        if REASON not in out.columns:
            return (out, out.iloc[:0]) if rejects else out
        return (_kept(out), _rejected(out)) if rejects else _kept(out)


def _kept(df):
    from curate.stages.dataset import INTERNAL, REASON

    if REASON not in df.columns:
        return df
    return df[df[REASON].isna()].drop(columns=[c for c in INTERNAL if c in df.columns])


def _rejected(df):
    from curate.stages.dataset import REASON

    if REASON not in df.columns:
        return df.iloc[:0]
    return df[df[REASON].notna()]


@dataclass(frozen=True)
class Result:
    """What a pipeline run did: one outcome per stage (its output folder, manifest, skipped or not)."""

    output: str
    stages: tuple[StageOutcome, ...]

    @property
    def final(self) -> str:
        """The last stage's output folder."""
        return self.stages[-1].output

    def summary(self) -> str:
        """The table ``curate run`` prints."""
        from curate.app.runner import summary_table

        return summary_table(list(self.stages))


class Pipeline:
    """Steps in order, run like ``curate run``: each step reads the previous one's output.

    ``name`` owns the output root (as a job file's ``name:``); ``io`` holds the input/output settings
    (``format``, ``on_error``, ``blocksize``, ...) of the job YAML's ``io:``.
    """

    def __init__(self, steps: Sequence[Step], *, name: str = "pipeline", io: dict | None = None):
        from curate.app.runner import Job, StageSpec
        from curate.stages.stage import IOSettings, settings_from_mapping

        steps = list(steps)
        if not steps:
            raise SettingsError("a pipeline needs at least one step")
        for i, s in enumerate(steps, start=1):
            if not isinstance(s, Step):
                raise SettingsError(f"step {i}: expected curate.Step(...); got {type(s).__name__}")
        self.steps = tuple(steps)
        self.name = name
        self.io = settings_from_mapping(IOSettings, io or {}, "io")
        self._specs = tuple(StageSpec(s.name, s.settings, s.input) for s in self.steps)
        self._job = Job  # the runner's job, made per run (the input is a run's argument)

    def job(self, input: str | Sequence[str] | None):
        """The runner's Job for ``input``: what ``curate run`` would have read from a YAML file."""
        from curate.stages import registry

        inputs = (input,) if isinstance(input, (str, os.PathLike)) else tuple(input or ())
        inputs = tuple(map(str, inputs))
        first = self._specs[0]
        if not inputs and first.input is None and registry.get(first.name).takes_input:
            raise SettingsError(f"pipeline {self.name}: no input for the first step ({first.name})")
        return self._job(self._specs, inputs, None, self.io, f"<pipeline {self.name}>", self.name)

    def plan(self, input, output: str, force: bool = False) -> str:
        """What ``run`` would do (``curate run --dry-run``): checks everything, starts and writes nothing."""
        from curate.app.runner import dry_run

        return dry_run(self.job(input), str(output), force=force)

    def run(self, input: str | Sequence[str] | None, output: str, *, client: Client | None = None,
            cluster: str = "auto", workers: int | None = None, threads_per_worker: int = 1,
            memory_limit: str | None = None, force: bool = False, stop_after: int | None = None) -> Result:
        """Run the pipeline on ``input`` (paths, globs or URLs) into the folder ``output``.

        On the given ``client`` (left open), else as ``cluster`` says (``curate run --cluster``): ``auto``
        (threads in this process for a small input, else a local cluster), ``local``, ``threads``, a
        scheduler file or address. Finished stages are
        skipped as up to date; ``force`` reruns them."""
        from curate.app.cluster import ClusterSettings
        from curate.app.runner import execute_job

        job = self.job(input)
        settings = None if client is not None else ClusterSettings(
            mode=cluster, workers=workers, threads_per_worker=threads_per_worker, memory_limit=memory_limit)
        outcomes = execute_job(job, str(output), settings, client, force=force, stop_after=stop_after)
        return Result(str(output), tuple(outcomes))


def list_stages() -> dict[str, str]:
    """Every registered stage name with its one-line help (``curate stages``)."""
    from curate.stages import registry

    return {name: registry.get(name).help for name in registry.available()}
