"""Bring-your-own models: a ``module:factory`` path or an ONNX file.

Trust model (docs/zoo.md): ``module:factory`` imports ``module`` (running its top-level code, exactly
as ``python -c "import module"`` would) and calls ``factory(batch)``. Name only modules you trust.
Horus refuses what cannot be a model factory before calling anything: modules of Python's standard
library and built-ins (``os:getcwd``, ``json:loads``, ``subprocess:run``...), Horus's own modules,
attributes that are not plain Python functions defined in that module, and functions that do not
take exactly one positional argument. The result must be ``(torch.nn.Module, example inputs)``.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any

from horus.errors import HorusInputError


_REFUSED_PACKAGES = frozenset({"horus", "torch", "numpy", "pandas", "builtins", "__main__"})


def _refuse(spec: str, why: str) -> None:
    raise HorusInputError(spec, f"{why}; expected 'package.module:factory' naming a function of your own module "
                                "that returns (torch.nn.Module, example inputs)")


def load_factory(spec: str) -> Callable[[int], tuple[Any, tuple[Any, ...]]]:
    """Resolve ``"package.module:factory"``; ``factory(batch) -> (model, example_inputs)``. See the trust model."""
    import inspect

    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise HorusInputError(spec, "expected 'package.module:factory'")
    if not all(part.isidentifier() for part in module_name.split(".")) or not attr.isidentifier():
        raise HorusInputError(spec, "expected 'package.module:factory' with Python identifiers")
    top = module_name.split(".")[0]
    if top in sys.stdlib_module_names or top in sys.builtin_module_names or top in _REFUSED_PACKAGES:
        _refuse(spec, f"{module_name!r} is part of Python or a library Horus uses, not a model module")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise HorusInputError(spec, f"cannot import module {module_name!r} ({exc})") from None
    factory = getattr(module, attr, None)
    if factory is None:
        raise HorusInputError(spec, f"module {module_name!r} has no {attr!r}")
    if not inspect.isfunction(factory) or factory.__module__ != module.__name__:
        _refuse(spec, f"{attr!r} is not a Python function defined in {module_name!r}")
    params = list(inspect.signature(factory).parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    required_others = [p for p in params[1:] if p.default is p.empty and p.kind not in variadic]
    if not positional or required_others:
        _refuse(spec, f"{attr!r} must take the batch size as its one required argument")
    return factory


def load_model(spec: str, batch: int) -> tuple[Any, tuple[Any, ...]]:
    """Call a ``module:factory`` and check it returned ``(nn.Module, tuple of tensors)``."""
    import torch

    try:
        result = load_factory(spec)(batch)
    except HorusInputError:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's factory failed: say so in one line
        raise HorusInputError(spec, f"factory({batch}) raised {type(exc).__name__}: {str(exc)[:200]}") from None
    if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], torch.nn.Module)):
        raise HorusInputError(spec, "factory(batch) must return (torch.nn.Module, tuple of example input tensors)")
    model, inputs = result
    inputs = inputs if isinstance(inputs, tuple) else (inputs,)
    if not all(isinstance(t, torch.Tensor) for t in inputs):
        raise HorusInputError(spec, "factory(batch) example inputs must be tensors")
    return model, inputs
