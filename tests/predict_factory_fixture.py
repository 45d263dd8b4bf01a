"""A user's ``module:factory`` for ``horus predict``: the zoo's CIFAR ResNet-18, built the way a user would."""

from __future__ import annotations

import torch


def make(batch: int) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    from horus.zoo import get_entry

    entry = get_entry("resnet18_cifar")
    return entry.build(32), (torch.randn(batch, 3, 32, 32),)
