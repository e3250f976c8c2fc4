"""Presidio's pattern recognisers for ``redact``, offline.

``presidio-analyzer`` finds phone numbers (with Google's ``phonenumbers``), credit-card numbers (Luhn
checked), US social security numbers, IBANs (checksum checked) and the rest of its predefined
pattern recognisers. It normally loads a spaCy model for its NLP artefacts and downloads one when it
is missing; here the engine is built around ``spacy.blank(lang)`` (a tokenizer, no model, nothing
downloaded), which is all the pattern recognisers need. Names of people, places and organisations
need a named-entity model: give a spaCy model directory (``spacy_model``) and ``PERSON``,
``LOCATION``, ``NRP``, ... come from it.

The analyzer is built once per worker process (``functools.lru_cache``), never on the client's
behalf and never at import time. Overlapping findings are resolved by score, then length; each kept
span is replaced from the end of the text backwards, so offsets stay valid.
"""

from __future__ import annotations

import functools
import hashlib
import os

#: what ``--presidio`` means without a list: the recognisers with a checksum or a strict format,
#: which are precise without context words (the others, e.g. US_BANK_NUMBER, DATE_TIME, match
#: almost any number or date)
DEFAULT_ENTITIES = ("PHONE_NUMBER", "CREDIT_CARD", "US_SSN", "IBAN_CODE", "CRYPTO", "UK_NHS", "US_ITIN")
#: short tags for the replacement tokens
TAGS = {"PHONE_NUMBER": "phone", "CREDIT_CARD": "credit-card", "US_SSN": "ssn", "IBAN_CODE": "iban",
        "EMAIL_ADDRESS": "email", "IP_ADDRESS": "network-address", "PERSON": "person", "LOCATION": "location",
        "CRYPTO": "crypto-address", "US_ITIN": "itin", "UK_NHS": "nhs-number"}


def tag(entity: str) -> str:
    return TAGS.get(entity, entity.lower().replace("_", "-"))


def available() -> bool:
    import importlib.util

    return importlib.util.find_spec("presidio_analyzer") is not None and importlib.util.find_spec("spacy") is not None


@functools.lru_cache(maxsize=4)
def analyzer(language: str, spacy_model: str | None):
    """An AnalyzerEngine on a blank (or the user's) spaCy pipeline; built once per process."""
    import spacy
    from presidio_analyzer import AnalyzerEngine, RecognizerRegistry
    from presidio_analyzer.nlp_engine import SpacyNlpEngine

    nlp = spacy.load(spacy_model) if spacy_model else spacy.blank(language)
    engine = SpacyNlpEngine(models=[{"lang_code": language, "model_name": spacy_model or f"blank:{language}"}])
    engine.nlp = {language: nlp}  # instead of engine.load(), which would download a missing model
    registry = RecognizerRegistry(supported_languages=[language])
    registry.load_predefined_recognizers(languages=[language], nlp_engine=engine)
    return AnalyzerEngine(nlp_engine=engine, registry=registry, supported_languages=[language])


def resolve(results) -> list:
    """Non-overlapping findings: higher score first, then longer, then earlier."""
    chosen: list = []
    for r in sorted(results, key=lambda r: (-r.score, -(r.end - r.start), r.start)):
        if all(r.end <= c.start or r.start >= c.end for c in chosen):
            chosen.append(r)
    return sorted(chosen, key=lambda r: r.start)


def replacement(entity: str, value: str, strategy: str, token: str, salt: bytes) -> str:
    if strategy == "redact":
        return f"<redacted-{tag(entity)}>"
    if strategy == "replace":
        return token
    digest = hashlib.sha256(salt + value.encode("utf-8")).hexdigest()[:16]
    return f"<{tag(entity)}-{digest}>"


def salt_from_env(name: str | None) -> bytes:
    """The hash salt, read from the named environment variable on the worker (never in settings or
    manifests). Unsalted hashes of short values such as phone numbers are easy to reverse."""
    if not name:
        return b""
    return os.environ.get(name, "").encode("utf-8")


def redact_texts(texts: list[str], entities: tuple[str, ...], language: str, spacy_model: str | None,
                 threshold: float, strategy: str, token: str, salt_env: str | None):
    """(texts with findings replaced, per-entity counts per text)."""
    engine = analyzer(language, spacy_model)
    salt = salt_from_env(salt_env)
    out, counts = [], []
    for text in texts:
        found = resolve(engine.analyze(text=text, language=language, entities=list(entities),
                                       score_threshold=threshold)) if text else []
        c: dict[str, int] = {}
        for r in reversed(found):
            text = text[:r.start] + replacement(r.entity_type, text[r.start:r.end], strategy, token, salt) + text[r.end:]
            c[r.entity_type] = c.get(r.entity_type, 0) + 1
        out.append(text)
        counts.append(c)
    return out, counts


def entity_names(language: str = "en") -> list[str]:
    """Entities the pattern recognisers can find (for messages)."""
    return sorted(analyzer(language, None).get_supported_entities(language=language))
