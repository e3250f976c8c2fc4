"""Checks of a stage's dataset inputs before any work: what a dry run can know from the files' schemas.

A Parquet input without the text column (or with a text column that is not a string) would fail, or
turn every row into a reject, only once the stage reads it, after earlier stages of a job have run;
its footer says so up front. JSONL is not checked here: a line without the field is one reject among
good ones, which ``--on-error`` decides.
"""

from __future__ import annotations

from curate.stages.errors import DataError

#: Parquet footers read per input spec (a glob of ten thousand files is judged by its first ones)
FILES_CHECKED = 16


def check_columns(inputs, io) -> None:
    """DataError (bad data: exit 1) naming the first Parquet file of ``inputs`` whose text (or id) column cannot hold
    documents, with the option that fixes it. With ``--on-error skip`` such files are the user's
    rejects, as the run makes them."""
    from curate.stages import dataset

    if io.on_error == "skip":
        return
    for spec in inputs:
        if dataset.is_url(spec) and "://" in spec and not spec.startswith("file://"):
            continue  # remote footers cost a request each: the run reports them
        try:
            files = dataset.expand_named([spec], allow_incomplete=True)
        except Exception:  # a missing input has its own refusal (runner.check_inputs)
            continue
        parquet = [path for path, _name in files if dataset._kind(path) == "parquet"][:FILES_CHECKED]
        for path in parquet:
            import pyarrow.parquet as pq

            try:
                schema = pq.ParquetFile(dataset.parquet_source(path)).schema_arrow
            except Exception:  # a damaged footer: the reader names it (or skips it with --on-error skip)
                continue
            problem = dataset._column_problem(schema, io)
            if problem is None:
                continue
            reason, message = problem
            hint = {"missing_text": " (in a job: io: {text_field: COLUMN})",
                    "bad_id": " (--id-field COLUMN names the id column)"}.get(reason, "")
            raise DataError(f"{path}: {reason}: {message}{hint}")
