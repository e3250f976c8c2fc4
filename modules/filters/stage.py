"""``filter``: apply a chain of document filters read from YAML.

    curate filter --config jobs/filters/heuristic_en.yaml --input in/ --output out/ [--keep-scores]

The chain file is read once, with ``yaml.safe_load``, when the settings are made (before any
cluster starts), and validated: an unknown filter, parameter or out-of-range threshold is one line
naming the file, the filter's position and the value. The normalised chain (every parameter spelled
out) is part of the settings, so editing the YAML reruns the stage, and the manifest shows the
thresholds that were used. Each dropped document goes to ``_rejects/`` with the reason of the first
filter rejecting it; the manifest counts them per reason and lists the filters.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from modules.filters.base import ScoreFilter, build_chain, load_chain
from modules.stage import MapStage


@dataclass(frozen=True)
class FilterSettings:
    config: str = field(metadata={"help": "filter chain YAML, e.g. jobs/filters/heuristic_en.yaml",
                                  "metavar": "FILTERS.yaml"})
    keep_scores: bool = field(default=False, metadata={"help": "keep a score_<filter> column per filter"})
    #: the chain as loaded from ``config`` (not a flag: filled in from the file)
    chain: tuple = field(default=(), init=False, compare=True, hash=False)

    def __post_init__(self):
        object.__setattr__(self, "chain", load_chain(self.config))


class FilterStage(MapStage):
    name = "filter"
    Settings = FilterSettings
    help = "quality filters from a YAML chain (heuristic, C4/FineWeb, code, language, classifier)"

    def transform(self, df: pd.DataFrame, settings: FilterSettings) -> pd.DataFrame:
        return ScoreFilter(build_chain(settings.chain), keep_scores=settings.keep_scores).apply(df)

    def run(self, settings: FilterSettings, ctx) -> dict:
        from modules import dataset

        ddf = dataset.read_dataset(ctx.input, ctx.io, rejects_dir=ctx.output)
        filters = [f.describe() for f in build_chain(settings.chain)]
        return dataset.write_dataset(self.apply(ddf, settings), ctx, stage=self.name, settings=settings,
                                     reject_columns=self.reject_columns, extra={"filters": filters})
