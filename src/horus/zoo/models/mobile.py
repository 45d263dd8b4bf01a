"""MobileNetV2 (Sandler 2018), MobileNetV3 large/small (Howard 2019), EfficientNet-B0 (Tan & Le 2019).

Block tables follow the papers; channel rounding (``make_divisible``), SE widths and classifier heads
follow the torchvision ImageNet models so parameter counts match its published table.
"""

from __future__ import annotations

import torch
from torch import nn

from horus.zoo.base import make_divisible
from horus.zoo.models._layers import add_classifier, conv_bn_act


class SqueezeExcite(nn.Module):
    def __init__(self, channels: int, squeeze: int, act: type[nn.Module], gate: type[nn.Module]) -> None:
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(channels, squeeze, 1)
        self.fc2 = nn.Conv2d(squeeze, channels, 1)
        self.act = act()
        self.gate = gate()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gate(self.fc2(self.act(self.fc1(self.pool(x)))))


class InvertedResidual(nn.Module):
    """Expand (1x1) -> depthwise (kxk) -> optional squeeze-excite -> project (1x1), residual when shapes match."""

    def __init__(
        self, cin: int, expanded: int, cout: int, kernel: int, stride: int, act: type[nn.Module],
        se: nn.Module | None = None, eps: float = 1e-5,
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        if expanded != cin:
            layers.append(conv_bn_act(cin, expanded, 1, act=act, eps=eps))
        layers.append(conv_bn_act(expanded, expanded, kernel, stride, groups=expanded, act=act, eps=eps))
        if se is not None:
            layers.append(se)
        layers.append(conv_bn_act(expanded, cout, 1, act=None, eps=eps))
        self.block = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.block(x)
        return x + y if self.residual else y


class _Classifier(nn.Module):
    def __init__(self, features: nn.Module, head: nn.Module) -> None:
        super().__init__()
        self.features = features
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = head

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.pool(self.features(x)), 1))


def mobilenet_v2(cifar: bool = False, num_classes: int = 1000) -> nn.Module:
    """MobileNetV2 (Table 2 of the paper) with a dropout + 1280 -> 1000 head; ``cifar``: strides 1 in the stem and
    the second stage and a plain 1280 -> ``num_classes`` head (pytorch-cifar's CIFAR change)."""
    # (expansion t, channels c, repeats n, first stride s), Table 2 of the paper
    table = ((1, 16, 1, 1), (6, 24, 2, 1 if cifar else 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
             (6, 160, 3, 2), (6, 320, 1, 1))
    layers: list[nn.Module] = [conv_bn_act(3, 32, 3, 1 if cifar else 2, act=nn.ReLU6)]
    cin = 32
    for t, c, n, s in table:
        for i in range(n):
            layers.append(InvertedResidual(cin, cin * t, c, 3, s if i == 0 else 1, nn.ReLU6))
            cin = c
    layers.append(conv_bn_act(cin, 1280, 1, act=nn.ReLU6))
    head = nn.Linear(1280, num_classes) if cifar else nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, num_classes))
    return _Classifier(nn.Sequential(*layers), head)


# (kernel, expanded, out, squeeze-excite, hard-swish, stride), Tables 1-2 of the MobileNetV3 paper
_V3_LARGE = (
    (3, 16, 16, False, False, 1), (3, 64, 24, False, False, 2), (3, 72, 24, False, False, 1),
    (5, 72, 40, True, False, 2), (5, 120, 40, True, False, 1), (5, 120, 40, True, False, 1),
    (3, 240, 80, False, True, 2), (3, 200, 80, False, True, 1), (3, 184, 80, False, True, 1),
    (3, 184, 80, False, True, 1), (3, 480, 112, True, True, 1), (3, 672, 112, True, True, 1),
    (5, 672, 160, True, True, 2), (5, 960, 160, True, True, 1), (5, 960, 160, True, True, 1),
)
_V3_SMALL = (
    (3, 16, 16, True, False, 2), (3, 72, 24, False, False, 2), (3, 88, 24, False, False, 1),
    (5, 96, 40, True, True, 2), (5, 240, 40, True, True, 1), (5, 240, 40, True, True, 1),
    (5, 120, 48, True, True, 1), (5, 144, 48, True, True, 1), (5, 288, 96, True, True, 2),
    (5, 576, 96, True, True, 1), (5, 576, 96, True, True, 1),
)


def mobilenet_v3(table: tuple[tuple[int, int, int, bool, bool, int], ...], last_channel: int) -> nn.Module:
    layers: list[nn.Module] = [conv_bn_act(3, 16, 3, 2, act=nn.Hardswish, eps=0.001)]
    cin = 16
    for kernel, expanded, cout, use_se, hswish, stride in table:
        se = SqueezeExcite(expanded, make_divisible(expanded // 4), nn.ReLU, nn.Hardsigmoid) if use_se else None
        act = nn.Hardswish if hswish else nn.ReLU
        layers.append(InvertedResidual(cin, expanded, cout, kernel, stride, act, se, eps=0.001))
        cin = cout
    layers.append(conv_bn_act(cin, 6 * cin, 1, act=nn.Hardswish, eps=0.001))
    head = nn.Sequential(
        nn.Linear(6 * cin, last_channel), nn.Hardswish(), nn.Dropout(0.2), nn.Linear(last_channel, 1000),
    )
    return _Classifier(nn.Sequential(*layers), head)


def efficientnet_b0() -> nn.Module:
    # (expansion, kernel, stride, in, out, repeats), Table 1 of the EfficientNet paper
    table = (
        (1, 3, 1, 32, 16, 1), (6, 3, 2, 16, 24, 2), (6, 5, 2, 24, 40, 2), (6, 3, 2, 40, 80, 3),
        (6, 5, 1, 80, 112, 3), (6, 5, 2, 112, 192, 4), (6, 3, 1, 192, 320, 1),
    )
    layers: list[nn.Module] = [conv_bn_act(3, 32, 3, 2, act=nn.SiLU)]
    for t, kernel, stride, cin, cout, n in table:
        for i in range(n):
            block_in = cin if i == 0 else cout
            expanded = make_divisible(block_in * t)
            se = SqueezeExcite(expanded, max(1, block_in // 4), nn.SiLU, nn.Sigmoid)
            layers.append(InvertedResidual(block_in, expanded, cout, kernel, stride if i == 0 else 1, nn.SiLU, se))
    layers.append(conv_bn_act(320, 1280, 1, act=nn.SiLU))
    return _Classifier(nn.Sequential(*layers), nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, 1000)))


add_classifier("mobilenet_v2", mobilenet_v2, description="MobileNetV2 1.0")
add_classifier("mobilenet_v3_large", lambda: mobilenet_v3(_V3_LARGE, 1280), description="MobileNetV3-Large 1.0")
add_classifier("mobilenet_v3_small", lambda: mobilenet_v3(_V3_SMALL, 1024), description="MobileNetV3-Small 1.0")
add_classifier("efficientnet_b0", efficientnet_b0, description="EfficientNet-B0")
