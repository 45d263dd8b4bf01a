"""DenseNet-121 (Huang et al. 2017): growth 32, blocks (6, 12, 24, 16), bottleneck 4x, compression 0.5."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from horus.zoo.models._layers import add_classifier


def _bn_relu_conv(cin: int, cout: int, kernel: int) -> list[nn.Module]:
    return [nn.BatchNorm2d(cin), nn.ReLU(), nn.Conv2d(cin, cout, kernel, padding=kernel // 2, bias=False)]


class DenseLayer(nn.Module):
    def __init__(self, cin: int, growth: int, bottleneck: int) -> None:
        super().__init__()
        self.body = nn.Sequential(*_bn_relu_conv(cin, bottleneck * growth, 1), *_bn_relu_conv(bottleneck * growth, growth, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x, self.body(x)], 1)


class DenseNet(nn.Module):
    def __init__(self, blocks: tuple[int, ...] = (6, 12, 24, 16), growth: int = 32, stem: int = 64, bottleneck: int = 4) -> None:
        super().__init__()
        layers: list[nn.Module] = [
            nn.Conv2d(3, stem, 7, 2, 3, bias=False), nn.BatchNorm2d(stem), nn.ReLU(), nn.MaxPool2d(3, 2, 1),
        ]
        channels = stem
        for i, n in enumerate(blocks):
            for _ in range(n):
                layers.append(DenseLayer(channels, growth, bottleneck))
                channels += growth
            if i < len(blocks) - 1:  # transition: halve channels and resolution
                layers += [*_bn_relu_conv(channels, channels // 2, 1), nn.AvgPool2d(2, 2)]
                channels //= 2
        layers.append(nn.BatchNorm2d(channels))
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(channels, 1000)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(F.relu(self.features(x)), 1), 1))


add_classifier("densenet121", DenseNet, description="DenseNet-121")
