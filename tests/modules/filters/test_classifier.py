"""Classifier filter with a tiny fastText model trained by ``curate train-classifier``'s code."""

import random

import numpy as np
import pandas as pd
import pytest

from curate.app.commands.train_classifier import train
from curate.stages.dataset import STRING
from curate.stages.errors import SettingsError
from curate.stages.filters import get_filter
from curate.stages.filters.base import ScoreFilter

GOOD_WORDS = "river valley history research careful analysis results evidence method study report".split()
BAD_WORDS = "click buy cheap free winner casino bonus offer now deal discount".split()


def docs(words, n, seed):
    rng = random.Random(seed)
    return [" ".join(rng.choice(words) for _ in range(30)) for _ in range(n)]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = tmp_path_factory.mktemp("clf") / "model.bin"
    result = train(docs(GOOD_WORDS, 200, 1), docs(BAD_WORDS, 200, 2), str(path), dim=8, bucket=1000, epoch=10, lr=0.05,
                   valid_fraction=0.2)
    assert result["precision"] > 0.9
    return str(path)


def test_threshold_keeps_good_and_drops_bad(model):
    flt = get_filter("classifier")(model=model, min=0.5)
    good, bad = docs(GOOD_WORDS, 1, 9)[0], docs(BAD_WORDS, 1, 9)[0]
    assert flt.score(good) > 0.9 and flt.keep(flt.score(good))
    assert flt.score(bad) < 0.1 and not flt.keep(flt.score(bad))
    df = pd.DataFrame({"id": ["g", "b"], "text": [good, bad]}).astype(STRING)
    out = ScoreFilter([flt]).apply(df)
    assert out["_reason"].fillna("-").tolist() == ["-", "classifier"]


def test_empty_and_whitespace(model):
    flt = get_filter("classifier")(model=model)
    assert flt.score("") == 0.0 and flt.score("  \n ") == 0.0


def test_pareto_is_seeded_per_document_not_per_batch(model):
    flt = get_filter("classifier")(model=model, mode="pareto", alpha=3.0, seed=7)
    texts = docs(GOOD_WORDS, 50, 3) + docs(BAD_WORDS, 150, 4)
    df = pd.DataFrame({"id": [f"d{i}" for i in range(len(texts))], "text": texts}).astype(STRING)
    whole = ScoreFilter([flt]).apply(df)["_reason"].isna()
    split = pd.concat([ScoreFilter([flt]).apply(df.iloc[:77])["_reason"],
                       ScoreFilter([flt]).apply(df.iloc[77:])["_reason"]]).isna()
    assert whole.tolist() == split.tolist()
    kept_good, kept_bad = whole[:50].mean(), whole[50:].mean()
    # keep probability is (2 - score) ** -alpha: about 1 for score ~1, 2 ** -3 = 0.125 for score ~0
    assert kept_good > 0.8
    assert 0.02 < kept_bad < 0.3
    other_seed = get_filter("classifier")(model=model, mode="pareto", seed=8)
    assert ScoreFilter([other_seed]).apply(df)["_reason"].isna().tolist() != whole.tolist()


def test_validation(tmp_path, model):
    with pytest.raises(SettingsError, match="model: the path"):
        get_filter("classifier")()
    with pytest.raises(SettingsError, match="no such file"):
        get_filter("classifier")(model=str(tmp_path / "none.bin"))
    with pytest.raises(SettingsError, match="mode must be one of"):
        get_filter("classifier")(model=model, mode="vibes")
    assert np.isfinite(get_filter("classifier")(model=model).score("x"))


def test_retrained_model_changes_the_chain(tmp_path, model):
    import shutil

    from curate.stages.filters.base import build_chain, parse_chain

    copy = tmp_path / "m.bin"
    shutil.copy(model, copy)
    (spec,) = parse_chain({"filters": [{"filter": "classifier", "model": str(copy)}]}, "x")
    assert spec["model_stamp"]
    assert build_chain([spec])[0].model == str(copy)
    with open(copy, "ab") as f:
        f.write(b"\0")
    (again,) = parse_chain({"filters": [{"filter": "classifier", "model": str(copy)}]}, "x")
    assert again["model_stamp"] != spec["model_stamp"]


def test_case_is_kept_as_nemo_does(tmp_path):
    """A model trained the NeMo way (cased text) sees cased text: upper-case good words, lower-case
    bad words. Lower-casing before predicting (the old behaviour) turns good documents into bad ones."""
    from curate.stages.filters.classifier import fasttext_lines

    assert fasttext_lines(["A B\nc __label__hq  d "]) == ["A B c hq d"]  # NeMo: "__label__" -> " "
    assert fasttext_lines(["A B"], lowercase=True) == ["a b"]
    words = [w.upper() for w in GOOD_WORDS]
    path = tmp_path / "cased.bin"
    train(docs(words, 200, 1), docs(GOOD_WORDS, 200, 2), str(path), dim=8, bucket=1000, epoch=10, lr=0.05,
          valid_fraction=0.2)
    doc = docs(words, 1, 9)[0]
    assert get_filter("classifier")(model=str(path)).score(doc) > 0.9
    assert get_filter("classifier")(model=str(path), lowercase=True).score(doc) < 0.1
