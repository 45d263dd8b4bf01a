"""Import every module of a plugin package so that its ``@REGISTRY.register`` decorators run."""

from __future__ import annotations

import importlib
import pkgutil


def load_all(package: str) -> None:
    """Import all modules of ``package`` and of its subpackages (e.g. ``"horus.policies"``)."""
    pkg = importlib.import_module(package)
    for module in pkgutil.walk_packages(pkg.__path__, prefix=f"{package}."):
        if not module.name.rsplit(".", 1)[-1].startswith("_"):
            importlib.import_module(module.name)
