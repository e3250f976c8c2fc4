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
