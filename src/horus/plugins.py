"""Import every module of a plugin package so that its ``@REGISTRY.register`` decorators run."""

from __future__ import annotations

import importlib
import pkgutil


def load_all(package: str) -> None:
    """Import all modules of ``package`` (e.g. ``"horus.policies"``)."""
    pkg = importlib.import_module(package)
    for module in pkgutil.iter_modules(pkg.__path__):
        if not module.name.startswith("_"):
            importlib.import_module(f"{package}.{module.name}")
