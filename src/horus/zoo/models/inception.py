"""Inception-v3 (Szegedy et al. 2016), 299x299 input, with the auxiliary classifier used in training.

Module widths follow the paper's Figure 5-7 modules as instantiated by torchvision's ImageNet model.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from horus.zoo.models._layers import add_classifier, conv_bn_act


def cbr(cin: int, cout: int, kernel: int | tuple[int, int], stride: int = 1, padding: int | tuple[int, int] = 0) -> nn.Module:
    return conv_bn_act(cin, cout, kernel, stride, eps=0.001, padding=padding)


class Branches(nn.Module):
    """Runs each branch on the same input and concatenates along channels."""

    def __init__(self, *branches: nn.Module) -> None:
        super().__init__()
        self.branches = nn.ModuleList(branches)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([b(x) for b in self.branches], 1)


class SplitPair(nn.Module):
    """A 1x3 and a 3x1 conv on the same input, concatenated (Inception-E expanded filter bank)."""

    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.a = cbr(cin, cout, (1, 3), padding=(0, 1))
        self.b = cbr(cin, cout, (3, 1), padding=(1, 0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.a(x), self.b(x)], 1)


def _avg_pool_branch(cin: int, cout: int) -> nn.Module:
    return nn.Sequential(nn.AvgPool2d(3, 1, 1), cbr(cin, cout, 1))


def block_a(cin: int, pool: int) -> nn.Module:
    return Branches(
        cbr(cin, 64, 1),
        nn.Sequential(cbr(cin, 48, 1), cbr(48, 64, 5, padding=2)),
        nn.Sequential(cbr(cin, 64, 1), cbr(64, 96, 3, padding=1), cbr(96, 96, 3, padding=1)),
        _avg_pool_branch(cin, pool),
    )


def block_b(cin: int) -> nn.Module:
    return Branches(
        cbr(cin, 384, 3, 2),
        nn.Sequential(cbr(cin, 64, 1), cbr(64, 96, 3, padding=1), cbr(96, 96, 3, 2)),
        nn.MaxPool2d(3, 2),
    )


def block_c(cin: int, c7: int) -> nn.Module:
    def row(a: int, b: int) -> nn.Module:  # 1x7
        return cbr(a, b, (1, 7), padding=(0, 3))

    def col(a: int, b: int) -> nn.Module:  # 7x1
        return cbr(a, b, (7, 1), padding=(3, 0))

    return Branches(
        cbr(cin, 192, 1),
        nn.Sequential(cbr(cin, c7, 1), row(c7, c7), col(c7, 192)),
        nn.Sequential(cbr(cin, c7, 1), col(c7, c7), row(c7, c7), col(c7, c7), row(c7, 192)),
        _avg_pool_branch(cin, 192),
    )


def block_d(cin: int) -> nn.Module:
    return Branches(
        nn.Sequential(cbr(cin, 192, 1), cbr(192, 320, 3, 2)),
        nn.Sequential(
            cbr(cin, 192, 1), cbr(192, 192, (1, 7), padding=(0, 3)), cbr(192, 192, (7, 1), padding=(3, 0)),
            cbr(192, 192, 3, 2),
        ),
        nn.MaxPool2d(3, 2),
    )


def block_e(cin: int) -> nn.Module:
    return Branches(
        cbr(cin, 320, 1),
        nn.Sequential(cbr(cin, 384, 1), SplitPair(384, 384)),
        nn.Sequential(cbr(cin, 448, 1), cbr(448, 384, 3, padding=1), SplitPair(384, 384)),
        _avg_pool_branch(cin, 192),
    )


class AuxHead(nn.Module):
    def __init__(self, cin: int, num_classes: int) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.AvgPool2d(5, 3), cbr(cin, 128, 1), cbr(128, 768, 5), nn.AdaptiveAvgPool2d(1))
        self.fc = nn.Linear(768, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.body(x), 1))


class InceptionV3(nn.Module):
    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            cbr(3, 32, 3, 2), cbr(32, 32, 3), cbr(32, 64, 3, padding=1), nn.MaxPool2d(3, 2),
            cbr(64, 80, 1), cbr(80, 192, 3), nn.MaxPool2d(3, 2),
        )
        self.mid = nn.Sequential(
            block_a(192, 32), block_a(256, 64), block_a(288, 64), block_b(288),
            block_c(768, 128), block_c(768, 160), block_c(768, 160), block_c(768, 192),
        )
        self.aux = AuxHead(768, num_classes)
        self.top = nn.Sequential(block_d(768), block_e(1280), block_e(2048))
        self.dropout = nn.Dropout(0.5)
        self.fc = nn.Linear(2048, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        mid = self.mid(self.stem(x))
        logits = self.fc(self.dropout(torch.flatten(F.adaptive_avg_pool2d(self.top(mid), 1), 1)))
        return (logits, self.aux(mid)) if self.training else logits


add_classifier("inception_v3", InceptionV3, input_size=299, description="Inception-v3 with auxiliary head")
