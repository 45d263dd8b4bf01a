"""A ``module:factory`` model for the ``horus features`` CLI test."""

from __future__ import annotations

import torch


def make(batch: int) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    return torch.nn.Linear(16, 4), (torch.randn(batch, 16),)
