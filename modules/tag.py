"""``tag``: score every document with a filter chain's filters into columns; drop nothing.

    curate tag --config jobs/filters/heuristic_en.yaml --input IN --output OUT
    curate select --where "score_word_count >= 50 and score_numbers <= 0.15" --input OUT --output KEPT

Tag first, decide later: the chain is any chain ``filter`` accepts (the YAML files in
``jobs/filters/`` unchanged), each filter becomes a *tagger*, and ``select`` (``modules/select.py``)
decides on the stored columns, as often as you like, without scoring again. ``filter`` stays the
one-step shortcut.

Columns (the naming rule)
-------------------------

- ``score_<reason>``, float64, per filter: its score, the very column ``filter --keep-scores``
  writes. ``<reason>`` is the filter's drop reason: its ``name`` in the chain, else its kind
  (``word_count``); a chain's reasons are unique, so its columns are. A score is NaN only where the
  filter itself gives none (a user's filter may) and for rows an earlier stage dropped (they pass
  through untouched).
- ``keep_<reason>``, bool, only for a filter whose decision is more than its threshold (the
  classifier in ``mode: pareto`` draws per document; a ``DocumentFilter`` with its own
  ``keep_document``): its own decision, so ``select`` can reproduce ``filter`` for every chain.
- the columns filters tag documents with, written as ``filter`` writes them: ``language`` (string)
  and ``language_score`` (float64) by the language filter, which reads them when the input already
  has them; ``license`` (string) by ``code_license``, replaced when there.

Tagging an output of ``tag`` again with another chain adds that chain's columns. A ``score_`` or
``keep_`` column that is already in the input is refused before any work (one line naming the
column, the filter and the chain file): give the filter another ``name:`` in the chain.

The contract with ``filter``
----------------------------

``tag`` with a chain, then ``select`` with its thresholds (:func:`chain_where`, also written to the
manifest as ``tag.where``), keeps exactly the documents ``filter`` keeps with that chain, in the same
order with the same text, and a dropped document's first failed clause is the filter that drops it
in ``filter``. Thresholds: ``min`` is ``>=`` (``>`` for filters with ``strict_min``), ``max`` is ``<=``
(``<`` with ``strict_max``); a NaN score fails both, in ``filter`` and in ``select``.

Expensive filters (a model call per document: language, classifier, token counts, HTML
boilerplate) score in ``filter`` only the documents every earlier filter kept; in ``tag`` every
filter scores every document, since the point is to decide later with any thresholds. The decisions
stay the same: scores are per document, independent of the other documents scored with them, so a
document ``filter`` keeps has every score equal in both, and a document ``filter`` drops at filter
k has equal scores up to k (``tag`` adds scores ``filter`` never computed, after k), so the first
failing clause is k in both. The price is the model calls on documents ``filter`` would have dropped
earlier: put a cheap ``filter`` stage first when that matters.

The manifest has ``filters`` and ``score_sample`` as ``filter``'s does (so ``curate report`` draws
the tagged columns' histograms), and ``tag``: the columns added and ``where``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from curate.stages.errors import SettingsError
from curate.stages.filters.base import ScoreFilter, build_chain, load_chain
from curate.stages.stage import MapStage


def tag_frame(df: pd.DataFrame, chain) -> pd.DataFrame:
    """``df`` with the chain's tag columns (see the module doc); no row dropped, ``df`` unchanged."""
    return ScoreFilter(build_chain(chain)).tag(df)


def tag_columns(chain) -> dict[str, tuple[int, str, str]]:
    """Column -> (filter position from 1, filter kind, dtype) of the score and decision columns."""
    out = {}
    for i, (spec, f) in enumerate(zip(chain, build_chain(chain)), start=1):
        out[f.score_column] = (i, spec["filter"], "float64")
        if not f.threshold_decides:
            out[f.decision_column] = (i, spec["filter"], "bool")
    return out


def _number(x: float) -> str:
    # repr round-trips: the literal select parses is the float the filter compares with
    return repr(float(x))


def chain_where(chain) -> str:
    """The ``select`` expression deciding as ``filter`` with this chain: one clause per filter, in
    chain order, so a document's first failed clause is the filter that drops it."""
    clauses = []
    for f in build_chain(chain):
        if not f.threshold_decides:
            clauses.append(f.decision_column)
            continue
        tests = []
        if f.min is not None:
            tests.append(f"{f.score_column} {'>' if f.strict_min else '>='} {_number(f.min)}")
        if f.max is not None:
            tests.append(f"{f.score_column} {'<' if f.strict_max else '<='} {_number(f.max)}")
        clauses.append(tests[0] if len(tests) == 1 else f"({' and '.join(tests)})")
    return " and ".join(clauses)


def check_clash(settings: TagSettings, columns, origin: str) -> None:
    """Refuse when a column the chain adds is already there (SettingsError naming it)."""
    have = set(columns)
    for col, (i, kind, _dtype) in tag_columns(settings.chain).items():
        if col in have:
            raise SettingsError(f"tag: config: column {col!r} is already in {origin} (tagged before?); give filter {i} "
                                f"({kind}) of {settings.config} another 'name:' for a column of its own")


@dataclass(frozen=True)
class TagSettings:
    config: str = field(metadata={"help": "filter chain YAML, as filter takes it, e.g. jobs/filters/heuristic_en.yaml",
                                  "metavar": "CHAIN.yaml"})
    #: the chain as loaded from ``config`` (not a flag: filled in from the file)
    chain: tuple = field(default=(), init=False, compare=True, hash=False)

    def __post_init__(self):
        object.__setattr__(self, "chain", load_chain(self.config))


class TagStage(MapStage):
    """Score every document with a filter chain (any chain filter takes) into one float64 column per
    filter, score_<reason> (its name, else its kind), plus keep_<reason> (bool) for a filter whose
    decision is no threshold; drops nothing. Then select with the chain's thresholds (the manifest's
    tag.where) keeps what filter keeps. A column already in the input is refused. Details: modules/tag.py."""

    name = "tag"

    Settings = TagSettings
    help = "score every document with a filter chain into score_<filter> columns, dropping none (then: select)"

    def columns(self, settings):
        from curate.stages.filters.base import build_chain
        from curate.stages.stage import Columns

        chain = build_chain(settings.chain)  # the filter objects only: no model is loaded here
        needs = tuple(dict.fromkeys(["text", *(f.input_column for f in chain)]))
        return Columns(needs=needs, adds=tuple(f.score_column for f in chain))

    def check(self, settings: TagSettings, inputs) -> None:
        from curate.stages.select import input_schema

        for spec in inputs[:1]:  # the dataset's schema is its first input's
            found = input_schema(spec)
            if found is not None:
                schema, origin = found
                check_clash(settings, schema, f"input {origin}")

    def check_output(self, settings: TagSettings, inputs, output) -> None:
        # as filter's: a hub tokenizer a run cannot load is refused before the stages ahead of it run
        from curate.stages.filters.tokens import check_loadable_in

        check_loadable_in(build_chain(settings.chain))

    def transform(self, df: pd.DataFrame, settings: TagSettings) -> pd.DataFrame:
        return tag_frame(df, settings.chain)

    def run(self, settings: TagSettings, ctx) -> dict:
        from curate.stages import dataset
        from curate.stages.filters.stage import write_with_sample

        ddf = dataset.read_dataset(ctx.input, ctx.io, rejects_dir=ctx.output)
        check_clash(settings, ddf.columns, f"input {ctx.input[0]}")  # the schema the run reads decides
        out = self.apply(ddf, settings)
        chain = build_chain(settings.chain)
        added = [c for c in out.columns if c not in ddf.columns]
        extra = {"filters": [f.describe() for f in chain],
                 "tag": {"columns": {c: str(out._meta[c].dtype) for c in added}, "where": chain_where(settings.chain)}}
        return write_with_sample(self, out, settings, ctx, extra)
