"""``url_dedup``: keep one document per URL, as datatrove's ``UrlDedup*`` stages do.

``curate dedup urls --input D --output OUT [--column url] [--keep POLICY] [--keep-scheme] [--keep-www]
[--drop-params PATTERNS] [--keep-fragment]``

Two URLs are the same page when their keys (:func:`normalize`) are equal: RFC 3986 section 6
normalisation, written out exactly in :mod:`curate.stages.dedup.url_normalize`. In short: ``http`` and
``https`` (``--keep-scheme``), a leading ``www.`` (``--keep-www``), the fragment (``--keep-fragment``),
tracking parameters (``--drop-params``, shell patterns, default ``utm_*`` and the click ids below), a
default port, one trailing ``/`` and dot-segments are ignored; scheme and host case, the host's IDNA
form (``bücher.de`` is ``xn--bcher-kva.de``) and escapes of unreserved characters (``%7E`` is ``~``)
are normalised. Everything else is compared byte for byte: the path, the other parameters in their
order as written (no re-encoding), every other percent-escape. A URL that is not ``scheme://...``
(relative, ``mailto:``, ``urn:``...) or whose host or port cannot be read only equals itself. A document
without a URL (null or empty) is never a duplicate.

It is exact dedup keyed by the normalised URL instead of the text (the same steps, the same bounded
memory, :mod:`curate.stages.dedup.exact`): ``_work/hashes`` holds 128-bit hashes of the normalised URLs,
the groups shuffle on them, ``_duplicates/`` lists every member with its kept id, and a removed
document is dropped as ``url_duplicate`` naming the kept id. ``--keep``: ``longest`` (datatrove's: the
longest text), ``first`` (the document read first), or any exact-dedup policy (``smallest-id``,
``newest[:COLUMN]``, ``oldest[:COLUMN]``, ``priority:COLUMN``); ties: the smallest id, then the first
read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from curate.stages import dedup
from curate.stages.dedup import keep as keeping
from curate.stages.dedup.exact import ExactDedupStage, hash_texts
from curate.stages.dedup.url_normalize import canonical
from curate.stages.errors import SettingsError
from curate.stages.stage import check_choice

REASON = "url_duplicate"
#: parameters that say where a click came from, not what the page is
TRACKING = ("utm_*", "fbclid", "gclid", "dclid", "gbraid", "wbraid", "msclkid", "yclid", "mc_cid", "mc_eid",
            "_ga", "_gl", "igshid")


@dataclass(frozen=True)
class UrlDedupSettings:
    column: str = field(default="url", metadata={"help": "the column holding each document's URL"})
    keep: str = field(default="longest", metadata={
        "help": "the survivor of each URL: longest (text; datatrove's), first (read first), smallest-id, "
                "newest[:COLUMN] / oldest[:COLUMN], priority:COLUMN; ties: smallest id", "metavar": "POLICY"})
    keep_scheme: bool = field(default=False, metadata={"help": "http:// and https:// are different URLs"})
    keep_www: bool = field(default=False, metadata={"help": "www.example.com and example.com are different hosts"})
    keep_fragment: bool = field(default=False, metadata={"help": "#fragments make different URLs"})
    drop_params: tuple[str, ...] = field(default=TRACKING, metadata={
        "help": "query parameters left out of the comparison (shell patterns; default utm_* and click ids)",
        "nargs": "*", "metavar": "PATTERN"})
    hash: str = field(default="xxh3", metadata={"help": "128-bit hash of the normalised URL: xxh3 or md5",
                                                "choices": ("xxh3", "md5")})

    def __post_init__(self):
        check_choice(self, "hash")
        if not isinstance(self.column, str) or not self.column or self.column in ("id", "text") \
                or self.column.startswith("_"):
            raise SettingsError(f"column must name a metadata column holding URLs; got {self.column!r}")
        if self.keep != "first":
            keeping.parse(self.keep)
        if isinstance(self.drop_params, str):
            object.__setattr__(self, "drop_params", (self.drop_params,))
        if not all(isinstance(p, str) and p for p in self.drop_params):
            raise SettingsError(f"drop_params must be parameter names or patterns; got {self.drop_params!r}")


def normalize(url, settings: UrlDedupSettings) -> str | None:
    """The URL as compared (None for no URL): see :mod:`curate.stages.dedup.url_normalize`."""
    if url is None or url is pd.NA or (isinstance(url, float) and np.isnan(url)):  # str(NA) is "<NA>"
        return None
    url = str(url).strip()
    if not url:
        return None
    return canonical(url, keep_scheme=settings.keep_scheme, keep_www=settings.keep_www,
                     keep_fragment=settings.keep_fragment, drop_params=settings.drop_params)


def url_hashes(df: pd.DataFrame, partition: int, settings: UrlDedupSettings, where: str) -> pd.DataFrame:
    """(doc, id, h1, h2, key, weight) of the documents of input partition ``partition`` that have a URL."""
    from curate.stages.dataset import STRING
    from curate.stages.errors import DataError

    if settings.column not in df.columns:
        raise DataError(f"{where}: no column {settings.column!r} (url_dedup --column)")
    pos = dedup.good_rows(df)
    urls = [normalize(u, settings) for u in df[settings.column].iloc[pos].tolist()]
    has = np.array([u is not None for u in urls], dtype=bool)
    pos = pos[has]
    h = hash_texts([u for u in urls if u is not None], settings.hash)
    docs = dedup.doc_numbers(partition, pos)
    if settings.keep == "first":
        key = np.asarray(docs, dtype=np.float64)
    else:
        key = keeping.keys(df, pos, keeping.parse(settings.keep), where)
    return pd.DataFrame({"doc": docs, "id": df["id"].iloc[pos].astype(STRING).to_numpy(), "h1": h[:, 0],
                         "h2": h[:, 1], "key": key, "weight": keeping.weights(df, pos)}).astype({"id": STRING})


def _url_hashes_of_input(inputs, i, folder, settings, where) -> dict:
    # the task reads its input partition itself (several small ones a task: dedup.input_tasks)
    return _url_hashes_task(inputs.read(i), i, folder, settings, where)


def _url_hashes_task(df, i: int, folder: str, settings: UrlDedupSettings, where: str) -> dict:
    return dedup.save_part(url_hashes(df, i, settings, where), folder, i)


class UrlDedupStage(ExactDedupStage):
    """Keep one document per normalised URL (--keep; default the longest text, as datatrove)."""

    name = "url_dedup"
    Settings = UrlDedupSettings
    cli = ("dedup", "urls")
    help = "keep one document per URL (normalised: scheme, www., default port, fragment, tracking parameters)"
    reason = REASON

    def columns(self, settings):
        from curate.stages.stage import Columns

        policy = None if settings.keep == "first" else keeping.parse(settings.keep)
        extra = (policy.column,) if policy and policy.column else ()
        return Columns(needs=(settings.column, "text", *extra), adds=self.adds)

    def check(self, settings, inputs) -> None:
        if settings.keep != "first":
            keeping.check_inputs(keeping.parse(settings.keep), inputs)

    def check_output(self, settings, inputs, output) -> None:
        pass  # no index to save or read

    def hash_tasks(self, settings, inputs, folder) -> list:
        return dedup.input_tasks(inputs, _url_hashes_of_input, [(inputs.only(i), i, folder, settings, inputs.pieces[i].path)
                                                                for i in range(len(inputs))])
