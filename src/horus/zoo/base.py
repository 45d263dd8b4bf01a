"""ZooEntry: how to build a zoo model, feed it, and take one training step's loss."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

Inputs = tuple[torch.Tensor, ...]
FAMILIES: tuple[str, ...] = ("cnn", "recurrent", "transformer", "recommendation", "gan", "rl", "detector")


@dataclass(frozen=True)
class ZooEntry:
    """One zoo model.

    ``build(input_size)`` returns the module with random weights (``None`` = default input size);
    ``example_input(batch, input_size, device)`` returns the forward inputs; ``loss_fn(output, inputs)``
    turns the forward output into the scalar loss of one training step.
    """

    name: str
    family: str
    build: Callable[[int | None], nn.Module]
    example_input: Callable[[int, int | None, Any], Inputs]
    loss_fn: Callable[[Any, Inputs], torch.Tensor]
    default_input_size: int
    description: str = ""

    def size(self, input_size: int | None) -> int:
        return self.default_input_size if input_size is None else int(input_size)


ZOO: dict[str, ZooEntry] = {}


def add(entry: ZooEntry) -> ZooEntry:
    """Register ``entry`` in ``ZOO`` (names are unique)."""
    if entry.family not in FAMILIES:
        raise ValueError(f"zoo model {entry.name!r}: unknown family {entry.family!r}")
    if entry.name in ZOO:
        raise ValueError(f"zoo model {entry.name!r} registered twice")
    ZOO[entry.name] = entry
    return entry


# ---- shared input / loss helpers -------------------------------------------------------------

def image_input(channels: int = 3) -> Callable[[int, int | None, Any], Inputs]:
    """Example input of an image model: one (batch, channels, size, size) float tensor."""

    def make(batch: int, input_size: int | None, device: Any = "cpu") -> Inputs:
        return (torch.randn(batch, channels, input_size, input_size, device=device),)

    return make


def token_input(vocab: int, n_tensors: int = 1) -> Callable[[int, int | None, Any], Inputs]:
    """Example input of a sequence model: ``n_tensors`` (batch, seq_len) int64 token-id tensors."""

    def make(batch: int, input_size: int | None, device: Any = "cpu") -> Inputs:
        return tuple(torch.randint(0, vocab, (batch, input_size), device=device) for _ in range(n_tensors))

    return make


def _first(output: Any) -> torch.Tensor:
    return output[0] if isinstance(output, (tuple, list)) else output


def classification_loss(output: Any, inputs: Inputs) -> torch.Tensor:
    """Cross entropy of (batch, classes) logits against class 0 (auxiliary logits added if present)."""
    outputs = output if isinstance(output, (tuple, list)) else (output,)
    loss = torch.zeros((), device=outputs[0].device)
    for logits in outputs:
        logits = logits.reshape(-1, logits.shape[-1])
        target = torch.zeros(logits.shape[0], dtype=torch.long, device=logits.device)
        loss = loss + F.cross_entropy(logits, target)
    return loss


def mean_square_loss(output: Any, inputs: Inputs) -> torch.Tensor:
    """Mean of squares of every output tensor (regression-style objective against zero)."""
    outputs = output if isinstance(output, (tuple, list)) else (output,)
    return sum(o.float().square().mean() for o in outputs)  # type: ignore[return-value]


def make_divisible(value: float, divisor: int = 8, min_value: int | None = None) -> int:
    """Round a channel count to a multiple of ``divisor`` without going below 90% of it (MobileNet rule)."""
    min_value = divisor if min_value is None else min_value
    new = max(min_value, int(value + divisor / 2) // divisor * divisor)
    return new + divisor if new < 0.9 * value else new
