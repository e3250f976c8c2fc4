"""The shipped chains on the bundled sample (the Rust book pages, jobs/data/sample.jsonl.gz)."""

import gzip
import json
from pathlib import Path

import pandas as pd
import pytest

from curate.stages.clean import CleanSettings, clean
from curate.stages.dataset import STRING
from curate.stages.filters.base import ScoreFilter, build_chain, load_chain

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def pages():
    with gzip.open(ROOT / "jobs/data/sample.jsonl.gz", "rt", encoding="utf-8") as f:
        df = pd.DataFrame([json.loads(line) for line in f]).astype(STRING)
    return clean(df, CleanSettings()).drop(columns=["_reason"])


def run(pages, name):
    out = ScoreFilter(build_chain(load_chain(str(ROOT / "jobs/filters" / name)))).apply(pages)
    stub = out["text"].str.startswith("Redirecting to").to_numpy()
    return out, stub


def test_docs_chain_keeps_every_real_page_and_drops_redirect_stubs(pages):
    out, stub = run(pages, "docs_en.yaml")
    assert stub.sum() == 22
    assert out["_reason"][~stub].isna().all()
    assert (out["_reason"][stub] == "word_count").all()


def test_nemo_defaults_are_strict_on_documentation(pages):
    out, stub = run(pages, "heuristic_en.yaml")
    dropped = out["_reason"][~stub].value_counts().to_dict()
    # code blocks: repeated lines ("}"), lines without end marks, symbols
    assert set(dropped) == {"repeated_lines", "punctuation", "non_alpha_numeric"}
    assert sum(dropped.values()) > 50
