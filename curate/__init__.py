"""curate: raw web, wiki, paper and code data in, training-ready token files out, on Dask.

One importable name for the whole application:

- ``curate.app``: the application shell (CLI, cluster bootstrap, job runner), the repository's ``app/``;
- ``curate.stages``: the stages and the dataset contract, the repository's ``modules/``.

Installed (``pip install .``), setuptools' ``package-dir`` puts both under ``curate/`` in
site-packages, so no top-level ``app`` or ``modules`` is ever installed. In a checkout, the folders
stay where they are and the finder below maps the two names onto them; nothing else in the code
knows the difference, and every import says ``curate.app...`` or ``curate.stages...``.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys

__version__ = "0.1.0"

#: subpackage name -> folder of the repository, in a checkout
_CHECKOUT = {"curate.app": "app", "curate.stages": "modules"}


class _CheckoutFinder(importlib.abc.MetaPathFinder):
    """Finds ``curate.app`` / ``curate.stages`` in the repository's ``app/`` / ``modules/``.

    Only the two package names are mapped; their submodules are found through the packages'
    ``__path__`` by Python's own path finder, exactly as when installed."""

    def __init__(self, root: str):
        self.root = root

    def find_spec(self, fullname, path=None, target=None):
        folder = _CHECKOUT.get(fullname)
        if folder is None:
            return None
        folder = os.path.join(self.root, folder)
        return importlib.util.spec_from_file_location(
            fullname, os.path.join(folder, "__init__.py"), submodule_search_locations=[folder])


def _map_checkout() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    if os.path.isdir(os.path.join(here, "stages")):
        return  # installed: curate/app and curate/stages are real subfolders
    root = os.path.dirname(here)
    if not os.path.isfile(os.path.join(root, "modules", "__init__.py")):
        raise ImportError(f"curate: neither an installed package nor a checkout at {root}")
    if not any(isinstance(f, _CheckoutFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _CheckoutFinder(root))


_map_checkout()


#: the Python API, imported on first use so that ``import curate`` stays cheap
_API = {
    "Pipeline": "curate.app.api", "Step": "curate.app.api", "Result": "curate.app.api", "list_stages": "curate.app.api",
    "Stage": "curate.stages.stage", "MapStage": "curate.stages.stage",
    "Filter": "curate.stages.filters.base", "DocumentFilter": "curate.stages.filters.custom",
    "CurateError": "curate.stages.errors", "SettingsError": "curate.stages.errors", "DataError": "curate.stages.errors",
}
__all__ = sorted(_API)


def __getattr__(name: str):
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'curate' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_API))
