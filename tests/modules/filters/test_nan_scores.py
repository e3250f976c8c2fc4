"""NaN filter scores (issue 40, point 8).

A document whose score is NaN used to be dropped under the filter's reason while the score sample
counted it "not scored": the report showed "would reject 0" beside "dropped first 5". Now a NaN
score is a score that rejects: the document's reason is ``nan`` (its ``_detail`` names the filter),
and the filter's counts have it as scored, rejected and ``nan``. A filter that did not score a
document (an expensive one, after an earlier filter rejected it) still does not count it.
"""

from __future__ import annotations

import pandas as pd
import pytest

from tests.conftest import read_output, run_stage, side, write_jsonl

MODULE = '''
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from curate.stages.filters.base import Filter


@dataclass(frozen=True)
class NanForShort(Filter):
    """Words per line; NaN for a document of fewer than 3 words (no answer)."""

    kind: ClassVar[str] = "nan_for_short"
    threshold_range: ClassVar[tuple] = (0, None)
    min: float | None = 1

    def score_texts(self, t):
        n = t.words.count.astype(np.float64)
        return np.where(n < 3, np.nan, n)


@dataclass(frozen=True)
class ExpensiveNan(NanForShort):
    kind: ClassVar[str] = "expensive_nan"
    expensive: ClassVar[bool] = True
'''

DOCS = [{"id": f"d{i}", "text": "two words" if i % 3 == 0 else "a longer document of words"} for i in range(12)]


@pytest.fixture
def chain(tmp_path, monkeypatch):
    (tmp_path / "nanfilters.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    write_jsonl(tmp_path / "in" / "a.jsonl", DOCS[:6])
    write_jsonl(tmp_path / "in" / "b.jsonl", DOCS[6:])  # two partitions

    def make(*filters):
        path = tmp_path / "chain.yaml"
        path.write_text("filters:\n" + "".join(f"  - {f}\n" for f in filters))
        return str(path)
    return make


def test_a_nan_score_rejects_with_reason_nan_and_counts_as_scored(tmp_path, chain):
    m = run_stage("filter", {"config": chain("{filter: 'nanfilters:NanForShort'}", "{filter: word_count, min: 1}")},
                  str(tmp_path / "in" / "*.jsonl"), tmp_path / "out")
    assert m["counts"]["out"] == 8 and m["counts"]["dropped"] == {"nan": 4}
    rejects = pd.concat(pd.read_parquet(p) for p in sorted((side(tmp_path / "out", "_rejects")).glob("*.parquet")))
    assert sorted(rejects["id"]) == ["d0", "d3", "d6", "d9"]
    assert set(rejects["_reason"]) == {"nan"} and set(rejects["_detail"]) == {"nan_for_short: the score is NaN"}
    counts = m["score_sample"]["filters"]["nan_for_short"]
    assert (counts["scored"], counts["rejected"], counts["nan"], counts["only"]) == (12, 4, 4, 4)
    assert m["score_sample"]["documents"] == 12
    assert sorted(read_output(tmp_path / "out")["id"]) == sorted(d["id"] for d in DOCS if d["text"] != "two words")


def test_a_filter_that_did_not_score_a_document_does_not_count_it(tmp_path, chain):
    # word_count (min 4) rejects the short ones first: the expensive filter never sees them
    m = run_stage("filter", {"config": chain("{filter: word_count, min: 4}", "{filter: 'nanfilters:ExpensiveNan'}")},
                  str(tmp_path / "in" / "*.jsonl"), tmp_path / "out")
    assert m["counts"]["dropped"] == {"word_count": 4}
    counts = m["score_sample"]["filters"]["expensive_nan"]
    assert (counts["scored"], counts["rejected"], counts["nan"]) == (8, 0, 0)


def test_an_expensive_filter_s_nan_is_its_rejection(tmp_path, chain):
    m = run_stage("filter", {"config": chain("{filter: word_count, min: 1}", "{filter: 'nanfilters:ExpensiveNan'}")},
                  str(tmp_path / "in" / "*.jsonl"), tmp_path / "out")
    assert m["counts"]["dropped"] == {"nan": 4}
    counts = m["score_sample"]["filters"]["expensive_nan"]
    assert (counts["scored"], counts["rejected"], counts["nan"]) == (12, 4, 4)
