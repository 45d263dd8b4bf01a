"""SqueezeNet 1.0/1.1 (Iandola 2016) and ShuffleNetV2 x1.0 (Ma et al. 2018)."""

from __future__ import annotations

import torch
from torch import nn

from horus.zoo.models._layers import add_classifier, conv_bn_act


class Fire(nn.Module):
    def __init__(self, cin: int, squeeze: int, expand: int) -> None:
        super().__init__()
        self.squeeze = nn.Sequential(nn.Conv2d(cin, squeeze, 1), nn.ReLU())
        self.expand1 = nn.Sequential(nn.Conv2d(squeeze, expand, 1), nn.ReLU())
        self.expand3 = nn.Sequential(nn.Conv2d(squeeze, expand, 3, padding=1), nn.ReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = self.squeeze(x)
        return torch.cat([self.expand1(s), self.expand3(s)], 1)


def _pool() -> nn.Module:
    return nn.MaxPool2d(3, 2, ceil_mode=True)


def squeezenet(version: str) -> nn.Module:
    if version == "1_0":
        features = [
            nn.Conv2d(3, 96, 7, 2), nn.ReLU(), _pool(), Fire(96, 16, 64), Fire(128, 16, 64), Fire(128, 32, 128),
            _pool(), Fire(256, 32, 128), Fire(256, 48, 192), Fire(384, 48, 192), Fire(384, 64, 256), _pool(),
            Fire(512, 64, 256),
        ]
    else:
        features = [
            nn.Conv2d(3, 64, 3, 2), nn.ReLU(), _pool(), Fire(64, 16, 64), Fire(128, 16, 64), _pool(),
            Fire(128, 32, 128), Fire(256, 32, 128), _pool(), Fire(256, 48, 192), Fire(384, 48, 192),
            Fire(384, 64, 256), Fire(512, 64, 256),
        ]
    head = [nn.Dropout(0.5), nn.Conv2d(512, 1000, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten()]
    return nn.Sequential(*features, *head)


class ShuffleUnit(nn.Module):
    """ShuffleNetV2 unit: split (stride 1) or duplicate (stride 2) channels, two branches, concat, shuffle."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        half = cout // 2
        self.stride = stride
        if stride > 1:
            self.left = nn.Sequential(
                conv_bn_act(cin, cin, 3, stride, groups=cin, act=None), conv_bn_act(cin, half, 1),
            )
        self.right = nn.Sequential(
            conv_bn_act(cin if stride > 1 else half, half, 1),
            conv_bn_act(half, half, 3, stride, groups=half, act=None),
            conv_bn_act(half, half, 1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.stride == 1:
            a, b = x.chunk(2, dim=1)
            out = torch.cat([a, self.right(b)], 1)
        else:
            out = torch.cat([self.left(x), self.right(x)], 1)
        n, c, h, w = out.shape
        return out.view(n, 2, c // 2, h, w).transpose(1, 2).reshape(n, c, h, w)


class ShuffleNetV2(nn.Module):
    def __init__(self, repeats: tuple[int, ...] = (4, 8, 4), widths: tuple[int, ...] = (24, 116, 232, 464, 1024)) -> None:
        super().__init__()
        self.stem = nn.Sequential(conv_bn_act(3, widths[0], 3, 2), nn.MaxPool2d(3, 2, 1))
        units: list[nn.Module] = []
        cin = widths[0]
        for n, cout in zip(repeats, widths[1:-1]):
            units += [ShuffleUnit(cin, cout, 2)] + [ShuffleUnit(cout, cout, 1) for _ in range(n - 1)]
            cin = cout
        self.stages = nn.Sequential(*units)
        self.last = conv_bn_act(cin, widths[-1], 1)
        self.fc = nn.Linear(widths[-1], 1000)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.last(self.stages(self.stem(x))).mean([2, 3]))


add_classifier("squeezenet1_0", lambda: squeezenet("1_0"), description="SqueezeNet 1.0")
add_classifier("squeezenet1_1", lambda: squeezenet("1_1"), description="SqueezeNet 1.1")
add_classifier("shufflenet_v2_x1_0", ShuffleNetV2, description="ShuffleNetV2 1.0x")
