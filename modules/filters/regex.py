"""``regex``: 1 when a regular expression matches somewhere in the document, else 0; the default drops
the matches (datatrove's ``RegexFilter``: ``max: 0``), ``min: 1`` keeps only them.

The expression is RE2's syntax (what Arrow runs, in linear time whatever the text: no catastrophic
backtracking on a hostile page), which is Python's without backreferences and lookaround; such an
expression is refused before any work, naming it. ``ignore_case`` is RE2's ``(?i)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from curate.stages.errors import SettingsError
from curate.stages.filters.base import Filter, Texts


@dataclass(frozen=True)
class Regex(Filter):
    """1 when ``pattern`` (RE2) matches somewhere in the text, else 0; the default drops matches
    (datatrove's RegexFilter), ``min: 1`` keeps only them."""

    kind: ClassVar[str] = "regex"
    pattern: str = field(default="", metadata={"help": "the regular expression (RE2 syntax: no backreferences "
                                                       "or lookaround)"})
    ignore_case: bool = field(default=False, metadata={"help": "match letters of either case"})

    def __post_init__(self):
        if self.min is None and self.max is None:
            object.__setattr__(self, "max", 0)
        super().__post_init__()
        if not isinstance(self.pattern, str) or not self.pattern:
            raise SettingsError("pattern must be a non-empty regular expression")
        if not isinstance(self.ignore_case, bool):
            raise SettingsError(f"ignore_case must be true or false; got {self.ignore_case!r}")
        import pyarrow as pa
        import pyarrow.compute as pc

        try:  # compiled once here: a pattern RE2 refuses is a settings error, not a failed task
            pc.match_substring_regex(pa.array([""]), self.compiled)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise SettingsError(f"pattern {self.pattern!r} is not an RE2 expression: {e}") from None

    @property
    def compiled(self) -> str:
        return ("(?i)" if self.ignore_case else "") + self.pattern

    def default_name(self) -> str:
        return "regex"

    def score_texts(self, t: Texts):
        return t.contains(self.compiled).astype(np.float64)
