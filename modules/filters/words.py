"""Words of languages written without spaces: the ``language`` setting of the word-based filters.

Without it (the default) a word is what ``str.split()`` gives, as before. ``language: zh`` segments with
jieba (its default dictionary and HMM, as NeMo Curator's Chinese word splitter), ``language: ja`` with
Janome (a dictionary-based morphological analyser, IPADIC, installed from the package index with its
dictionary, no MeCab needed). A segmenter's token of nothing but whitespace is not a word; punctuation
is one, as in NeMo Curator ("你好。" is 2 words, "我喜欢学习中文。" 5). Both are extras
(``pip install 'curate-llm[cjk]'``), imported when a filter first needs them, once per process.

The n-gram filters measure an n-gram's characters as its words plus n-1 separators, as for spaced
text; in a language without spaces the score is a little higher than the text's own share.
"""

from __future__ import annotations

import functools

from curate.stages.errors import SettingsError

LANGUAGES = {"zh": ("jieba", "jieba"), "ja": ("janome", "Janome")}
HELP = ("words of a language written without spaces: zh (jieba) or ja (Janome); default: split on "
        "whitespace")


def check_language(settings) -> None:
    """Validate a filter's ``language`` (None, zh, ja) and that its segmenter is installed."""
    lang = settings.language
    if lang is None:
        return
    if lang not in LANGUAGES:
        raise SettingsError(f"language must be one of {', '.join(LANGUAGES)} (or left out); got {lang!r}")
    module, name = LANGUAGES[lang]
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise SettingsError(f"language {lang}: needs {name}; install it with pip install 'curate-llm[cjk]'")


@functools.cache
def _segmenter(lang: str):
    if lang == "zh":
        import logging

        import jieba

        jieba.setLogLevel(logging.WARNING)  # its dictionary load logs to stderr otherwise
        jieba.initialize()
        return lambda text: jieba.lcut(text)
    from janome.tokenizer import Tokenizer

    tokenizer = Tokenizer(wakati=True)
    return lambda text: list(tokenizer.tokenize(text, wakati=True))


def segment(texts: list[str], lang: str) -> list[list[str]]:
    """Each text's words in ``lang`` (whitespace-only tokens left out)."""
    cut = _segmenter(lang)
    return [[w for w in cut(t) if w.strip()] if t else [] for t in texts]
