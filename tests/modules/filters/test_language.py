"""Language filter: py3langid when the input has no language columns, the columns when it has."""

import numpy as np
import pandas as pd
import pytest

from curate.stages.dataset import STRING
from curate.stages.errors import SettingsError
from curate.stages.filters import get_filter
from curate.stages.filters.base import ScoreFilter

EN = "The committee will meet again next week to discuss the budget and the new school building."
DE = "Der Ausschuss trifft sich nächste Woche wieder, um den Haushalt und das neue Schulgebäude zu besprechen."


def test_keeps_listed_language_and_drops_others():
    flt = get_filter("language")(languages=("en",))
    assert flt.score(EN) > 0.9 and flt.keep(flt.score(EN))
    assert flt.score(DE) == 0.0 and not flt.keep(flt.score(DE))
    df = pd.DataFrame({"id": ["en", "de", "blank"], "text": [EN, DE, "  \n "]}).astype(STRING)
    out = ScoreFilter([flt]).apply(df)
    assert out["_reason"].fillna("-").tolist() == ["-", "language", "language"]
    assert out["language"].tolist()[:2] == ["en", "de"] and pd.isna(out["language"].iloc[2])
    assert out["language_score"].iloc[2] == 0.0


def test_several_languages():
    flt = get_filter("language")(languages=("en", "de"), min=0.5)
    assert flt.keep(flt.score(DE)) and flt.keep(flt.score(EN))


def test_uses_existing_columns_and_fills_missing_ones():
    df = pd.DataFrame({
        "id": ["a", "b", "c"],
        "text": [DE, EN, DE],  # the columns say otherwise for a and b: they win
        "language": ["en", "fr", None],
        "language_score": [0.9, 0.99, None],
    }).astype({"id": STRING, "text": STRING, "language": STRING, "language_score": "float64"})
    out = ScoreFilter([get_filter("language")()], keep_scores=True).apply(df)
    assert out["_reason"].fillna("-").tolist() == ["-", "language", "language"]
    assert out["language"].tolist() == ["en", "fr", "de"]  # c identified by py3langid
    np.testing.assert_allclose(out["score_language"].tolist()[:2], [0.9, 0.0])


def test_empty_and_whitespace():
    flt = get_filter("language")()
    for text in ("", "   ", "\n\n"):
        assert flt.score(text) == 0.0


def test_validation():
    with pytest.raises(SettingsError, match="languages"):
        get_filter("language")(languages=())
    with pytest.raises(SettingsError, match="min must be in 0..1"):
        get_filter("language")(min=2)


def test_lid176_and_per_language_thresholds(tmp_path):
    """FineWeb-2 style: each language its own confidence threshold; the decision needs the language,
    so tag writes keep_language and select reproduces filter with it."""
    import pandas as pd

    from curate.stages.filters.base import ScoreFilter, Texts
    from curate.stages.filters.language import LanguageFilter

    df = pd.DataFrame({"id": pd.Series(["de1", "de2", "en1", "fr1"], dtype="string"),
                       "text": pd.Series(["Das ist ein ganz normaler deutscher Satz über das Wetter.", "Ein Satz.",
                                          "A plain English sentence about the weather today.",
                                          "Une phrase française sur le temps qu'il fait."], dtype="string")})
    flt = LanguageFilter(languages=("de", "en"), model="lid176", min=0.5, thresholds={"de": 0.95})
    scores, tags = flt.evaluate(df, Texts(df["text"]))
    assert tags["language"].tolist() == ["de", "de", "en", "fr"] and scores[3] == 0.0
    expected = [s >= (0.95 if lang == "de" else 0.5) and lang in ("de", "en") for s, lang in zip(scores, tags["language"])]
    kept = ScoreFilter([flt]).apply(df)
    assert (kept["_reason"].isna()).tolist() == expected
    assert not flt.threshold_decides and LanguageFilter(languages=("de",)).threshold_decides
