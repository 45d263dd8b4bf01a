"""Optional dependencies (pyproject extras) and the one-line error when a command needs a missing one.

The plain install (``pip install -e .``) runs the simulator and the live service; graph extraction, the
model zoo, ``horus train`` and the profiling harness need torch (the ``graph`` extra), and so on.
``require`` checks up front; ``horus.cli`` turns any other ``ModuleNotFoundError`` of a module listed
here into the same one line (``missing_extra``) instead of a traceback.
"""

from __future__ import annotations

import importlib

from horus.errors import HorusInputError

# Top-level module -> (pip package, extra that installs it).
EXTRA_OF: dict[str, tuple[str, str]] = {
    "torch": ("torch", "graph"),
    "transformers": ("transformers", "graph"),
    "onnx": ("onnx", "graph"),
    "onnxscript": ("onnxscript", "graph"),
    "lightgbm": ("lightgbm", "ml"),
    "xgboost": ("xgboost", "ml"),
    "pynvml": ("nvidia-ml-py", "profile"),
    "ray": ("ray", "ray"),
    "kubernetes": ("kubernetes", "k8s"),
}


class MissingExtraError(HorusInputError):
    """A command needs an optional package that is not installed (one line naming the extra)."""

    def __init__(self, command: str, module: str) -> None:
        package, extra = EXTRA_OF.get(module, (module, ""))
        how = f"install the {extra} extra: pip install -e '.[{extra}]'" if extra else f"pip install {package}"
        super().__init__(command, f"needs {package}, which is not installed here; {how}")
        self.module = module


def missing_extra(exc: ImportError, command: str) -> MissingExtraError | None:
    """The one-line error for ``exc`` if it is a missing optional package Horus knows; else None."""
    name = getattr(exc, "name", None) or ""
    top = name.split(".")[0]
    return MissingExtraError(command, top) if isinstance(exc, ModuleNotFoundError) and top in EXTRA_OF else None


def require(module: str, command: str) -> None:
    """Import ``module`` now, or raise ``MissingExtraError`` naming ``command`` and the extra to install."""
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] != module.split(".")[0]:
            raise  # the module exists but one of its own dependencies is missing: a real error
        raise MissingExtraError(command, module.split(".")[0]) from None
