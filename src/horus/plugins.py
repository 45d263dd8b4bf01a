"""Import every module of a plugin package so that its ``@REGISTRY.register`` decorators run."""

from __future__ import annotations

import importlib
import pkgutil

_LOADED: set[str] = set()  # packages walked completely in this process


def load_all(package: str) -> None:
    """Import all modules of ``package`` and of its subpackages (e.g. ``"horus.policies"``), once per process:
    some policies call this whenever one is built (the Kubernetes extender builds one per node and request)."""
    if package in _LOADED:
        return
    pkg = importlib.import_module(package)
    for module in pkgutil.walk_packages(pkg.__path__, prefix=f"{package}."):
        if not module.name.rsplit(".", 1)[-1].startswith("_"):
            importlib.import_module(module.name)
    _LOADED.add(package)
