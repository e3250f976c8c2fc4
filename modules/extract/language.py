"""Language identification with py3langid, whose model ships inside the PyPI package.

Nothing is fetched at run time. The model (about 0.5 s to load) is loaded once per process on first
use and then reused by every task of that worker. Only the first ``SAMPLE_CHARS`` characters are
classified: more text barely changes the answer and costs time linearly.
"""

from __future__ import annotations

import functools

#: characters of a document that are classified
SAMPLE_CHARS = 2000
#: language code for text with no letters at all (the model would return a uniform guess)
UNDETERMINED = "und"


@functools.lru_cache(maxsize=1)
def _identifier():
    # the cache is the per-process model; it is read-only after loading
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


def identify(text: str) -> tuple[str, float]:
    """(ISO 639 code, probability in 0..1) of ``text``; ("und", 0.0) when it has no letters."""
    sample = text[:SAMPLE_CHARS]
    if not any(ch.isalpha() for ch in sample):
        return UNDETERMINED, 0.0
    lang, score = _identifier().classify(sample)
    return lang, round(float(score), 4)


def labels() -> list[str]:
    """Every language code the model can answer."""
    return list(_identifier().labels)
