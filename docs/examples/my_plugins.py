"""A filter and a per-document stage of your own, importable as ``my_plugins`` (the example puts this
folder on the path; in a project, any module your workers can import)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

import curate


@dataclass(frozen=True)
class ShoutingFilter(curate.DocumentFilter):
    """Drop documents written mostly in capitals: the score is the share of upper-case letters."""

    kind = "shouting"  # the drop reason and the score column's suffix (score_shouting)

    def score_document(self, text: str) -> float:
        letters = [c for c in text if c.isalpha()]
        return sum(c.isupper() for c in letters) / len(letters) if letters else 0.0


@dataclass(frozen=True)
class SignatureSettings:
    marker: str = field(default="--", metadata={"help": "a line starting with this ends the document"})


class StripSignature(curate.MapStage):
    """Cut each document at its e-mail style signature line (a line starting with ``marker``)."""

    name = "strip_signature"
    Settings = SignatureSettings
    help = "cut documents at a signature line"

    def transform(self, df: pd.DataFrame, settings: SignatureSettings) -> pd.DataFrame:
        def cut(text):
            lines = text.split("\n")
            for i, line in enumerate(lines):
                if line.startswith(settings.marker):
                    return "\n".join(lines[:i]).rstrip()
            return text

        return df.assign(text=df["text"].map(cut).astype(df["text"].dtype))
