"""Does a job's chain of stages fit together? Each stage declares the columns it needs, adds and
removes (:class:`curate.stages.stage.Columns`); walking the chain from the input's schema finds a stage
that needs a column nothing before it provides, before any work (``curate run --dry-run`` and every
run's preflight), instead of after the earlier stages ran."""

from __future__ import annotations

from curate.stages.errors import SettingsError

#: what the dataset reader gives every dataset, whatever the files hold (ids are made when missing)
ALWAYS = ("id", "text")


def check_chain(steps, schema: set[str] | None) -> None:
    """``steps``: (label, stage class, settings) in job order; ``schema``: the first stage's input
    columns (None: not known before the run). SettingsError naming the stage and the column."""
    available = None if schema is None else set(schema) | set(ALWAYS)
    for label, cls, settings in steps:
        cols = cls().columns(settings)
        if cols.makes is not None:
            available = set(cols.makes)
            continue
        if available is not None:
            missing = [c for c in cols.needs if c not in available]
            if missing:
                there = ", ".join(sorted(available)) or "none"
                if cols.source:  # the words the stage's own check uses once its input exists
                    raise SettingsError(f"{label}: {cols.source}: unknown column {missing[0]!r}: neither the input "
                                        f"nor an earlier stage provides it (there: {there})")
                raise SettingsError(f"{label}: needs column {missing[0]!r}, which neither the input nor an earlier "
                                    f"stage provides (there: {there})")
        if cols.unknown:
            available = None
        elif available is not None:
            available = (available - set(cols.removes)) | set(cols.adds)


def input_columns(specs) -> set[str] | None:
    """The columns of a dataset input before any work (a curate output's manifest, a Parquet footer,
    the JSONL records the reader samples), or None when one of them cannot be known yet."""
    from curate.stages.select.schema import input_schema

    found: set[str] = set()
    for spec in specs:
        got = input_schema(str(spec))
        if got is None:
            return None
        found |= set(got[0])
    return found
