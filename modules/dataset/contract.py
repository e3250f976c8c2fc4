"""The dataset contract's names: the internal columns a stage marks drops with, the control file names, the input suffixes and the schema sample sizes."""

from __future__ import annotations

import pandas as pd

#: column that marks a dropped row with the reason; NA for kept rows
REASON = "_reason"


#: every string column uses Dask's own string dtype (Arrow-backed, NA for missing), so a frame we
#: build and the meta Dask derives always agree
STRING = pd.StringDtype("pyarrow")


DETAIL = "_detail"


INTERNAL = (REASON, DETAIL)


#: the readers' own column: where a record starts (JSONL byte offset, Parquet row), for generated ids
OFFSET = "__offset"


#: input column names that are curate's: an input column so named would be taken for curate's own
#: (a set ``_reason`` sends the document to ``_rejects/``), so readers refuse it and name the rename
RESERVED = (*INTERNAL, OFFSET)


SUCCESS = "_SUCCESS"


MANIFEST = "_manifest.json"
#: the name an earlier curate gave it (still read: see curate.stages.output.Output.manifest_name)
LEGACY_MANIFEST = "manifest.json"


REJECTS = "_rejects"


JSONL_SUFFIXES = (".jsonl", ".jsonl.gz", ".jsonl.zst", ".json.gz", ".ndjson")


PARQUET_SUFFIXES = (".parquet",)


#: how many good records of the first input piece are read to infer the schema
SCHEMA_SAMPLE = 1000


#: records read from the start of each further JSONL file (up to ``infer_meta``'s ``max_pieces`` files)
SCHEMA_PEEK = 64
