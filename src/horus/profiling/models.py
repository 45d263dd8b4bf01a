"""Resolve a model name to what the training loop needs: build, example input, loss, family.

Names are looked up first among the tiny local test models below (CPU tests, no zoo needed),
then in the model zoo ``horus.zoo.ZOO`` (duck-typed: ``build(input_size)``,
``example_input(batch, input_size, device)``, ``loss_fn``, ``family``, a default input size).
Imports torch lazily: only the worker process and tests call :func:`resolve_model`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from horus.errors import HorusInputError


@dataclass(frozen=True)
class TrainableModel:
    """Everything the loop needs to train one model on synthetic data."""

    name: str
    family: str
    default_input_size: int
    build: Callable[[int], Any]  # input_size -> nn.Module
    example_input: Callable[[int, int, Any], Any]  # (batch, input_size, device) -> batch data
    loss_fn: Callable[[Any, Any], Any]  # (model output, batch data) -> scalar loss
    forward: Callable[[Any, Any], Any]  # (module, batch data) -> model output


def call_with_input(module: Any, data: Any) -> Any:
    """Feed ``data`` to ``module``: dicts as keyword arguments, tuples/lists as positional ones."""
    if isinstance(data, dict):
        return module(**data)
    if isinstance(data, (tuple, list)):
        return module(*data)
    return module(data)


def _tiny_mlp_build(input_size: int) -> Any:
    import torch.nn as nn

    return nn.Sequential(nn.Linear(input_size, 64), nn.ReLU(), nn.Linear(64, 10))


def _tiny_mlp_input(batch: int, input_size: int, device: Any) -> Any:
    import torch

    return torch.randn(batch, input_size, device=device)


def _mean_square_loss(output: Any, data: Any) -> Any:
    return output.float().pow(2).mean()


def _oom_build(input_size: int) -> Any:
    import torch
    import torch.nn as nn

    class RaisesOOM(nn.Module):
        """Fake model whose forward raises the CUDA out-of-memory exception type (tests the OOM path)."""

        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(input_size, 1)

        def forward(self, x: Any) -> Any:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. (simulated by the _test_oom model)")

    return RaisesOOM()


def _missing_dependency_build(input_size: int) -> Any:
    import horus_module_that_does_not_exist  # noqa: F401  (tests the ImportError path)

    raise AssertionError("unreachable")


TEST_MODELS: dict[str, TrainableModel] = {
    "_test_mlp": TrainableModel("_test_mlp", "mlp", 32, _tiny_mlp_build, _tiny_mlp_input, _mean_square_loss,
                                call_with_input),
    "_test_oom": TrainableModel("_test_oom", "mlp", 32, _oom_build, _tiny_mlp_input, _mean_square_loss,
                                call_with_input),
    "_test_missing_dep": TrainableModel("_test_missing_dep", "mlp", 32, _missing_dependency_build,
                                        _tiny_mlp_input, _mean_square_loss, call_with_input),
}


def _default_input_size(entry: Any) -> int:
    for attr in ("default_input_size", "input_size"):
        value = getattr(entry, attr, None)
        if isinstance(value, int):
            return value
    raise HorusInputError("zoo", f"entry {entry!r} has no default input size attribute")


def _zoo_entry(name: str) -> TrainableModel:
    try:
        from horus.zoo import ZOO  # type: ignore[attr-defined]
    except ImportError as exc:
        raise HorusInputError("model", f"unknown model {name!r}: the model zoo is unavailable ({exc})") from None
    try:
        entry = ZOO[name] if not hasattr(ZOO, "get_entry") else ZOO.get_entry(name)
    except KeyError:
        known = ", ".join(sorted(ZOO)) if hasattr(ZOO, "__iter__") else "?"
        raise HorusInputError("model", f"unknown model {name!r}; zoo models: {known}") from None
    forward = getattr(entry, "forward", None) or call_with_input
    return TrainableModel(name, str(getattr(entry, "family", "unknown")), _default_input_size(entry),
                          entry.build, entry.example_input, entry.loss_fn, forward)


def resolve_model(name: str) -> TrainableModel:
    """The trainable description of ``name`` (a local test model or a zoo entry)."""
    if name in TEST_MODELS:
        return TEST_MODELS[name]
    return _zoo_entry(name)
