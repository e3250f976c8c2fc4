"""``normalize``: the smallest useful stage, whitespace normalisation.

Collapses runs of spaces and tabs, strips trailing spaces on every line, squeezes three or more
newlines into two and trims the document. Documents that end up empty are dropped with the reason
``empty``. The full cleaner (ftfy, Unicode, control characters) is the ``clean`` stage.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from curate.stages.dataset import STRING, mark_dropped
from curate.stages.stage import MapStage


@dataclass(frozen=True)
class NormalizeSettings:
    drop_empty: bool = field(default=True, metadata={"help": "drop documents that are empty after normalising"})


def normalize(df: pd.DataFrame, settings: NormalizeSettings) -> pd.DataFrame:
    text = (
        df["text"]
        .str.replace(r"[ \t\f\v]+", " ", regex=True)
        .str.replace(r" +\n", "\n", regex=True)
        .str.replace(r"\n{3,}", "\n\n", regex=True)
        .str.strip()
    )
    out = df.assign(text=text.astype(STRING))
    if settings.drop_empty:
        out = mark_dropped(out, out["text"].str.len() == 0, "empty")
    return out


class NormalizeStage(MapStage):
    name = "normalize"
    Settings = NormalizeSettings
    help = "whitespace normalisation (a minimal per-document stage)"

    def transform(self, df, settings):
        return normalize(df, settings)
