"""Bring-your-own models: a ``module:factory`` path or an ONNX file."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from horus.errors import HorusInputError


def load_factory(spec: str) -> Callable[[int], tuple[Any, tuple[Any, ...]]]:
    """Resolve ``"package.module:factory"``; ``factory(batch) -> (model, example_inputs)``."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise HorusInputError(spec, "expected 'package.module:factory'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise HorusInputError(spec, f"cannot import module {module_name!r} ({exc})") from None
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise HorusInputError(spec, f"module {module_name!r} has no callable {attr!r}")
    return factory


def load_model(spec: str, batch: int) -> tuple[Any, tuple[Any, ...]]:
    """Call a ``module:factory`` and check it returned ``(nn.Module, tuple of tensors)``."""
    import torch

    result = load_factory(spec)(batch)
    if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], torch.nn.Module)):
        raise HorusInputError(spec, "factory(batch) must return (torch.nn.Module, tuple of example input tensors)")
    model, inputs = result
    inputs = inputs if isinstance(inputs, tuple) else (inputs,)
    if not all(isinstance(t, torch.Tensor) for t in inputs):
        raise HorusInputError(spec, "factory(batch) example inputs must be tensors")
    return model, inputs
