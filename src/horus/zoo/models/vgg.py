"""VGG-11/16/19 (Simonyan & Zisserman 2015, configs A/D/E, no batch norm) and AlexNet (torchvision variant)."""

from __future__ import annotations

import torch
from torch import nn

from horus.zoo.models._layers import add_classifier

_CONFIGS: dict[str, list[int | str]] = {
    "vgg11": [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "vgg16": [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"],
    "vgg19": [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M", 512, 512, 512, 512, "M"],
}


def _classifier(in_features: int, hidden: int = 4096, num_classes: int = 1000, dropout_first: bool = False) -> nn.Sequential:
    layers: list[nn.Module] = [nn.Dropout()] if dropout_first else []
    layers += [nn.Linear(in_features, hidden), nn.ReLU(), nn.Dropout(), nn.Linear(hidden, hidden), nn.ReLU()]
    layers += [nn.Linear(hidden, num_classes)] if dropout_first else [nn.Dropout(), nn.Linear(hidden, num_classes)]
    return nn.Sequential(*layers)


def vgg_features(config: list[int | str], batch_norm: bool = False) -> nn.Sequential:
    """The conv stack of a VGG config: 3x3 convs (each followed by BatchNorm when ``batch_norm``) and ReLU, "M" a
    2x2 max-pool."""
    layers: list[nn.Module] = []
    cin = 3
    for item in config:
        if item == "M":
            layers.append(nn.MaxPool2d(2, 2))
        else:
            layers += [nn.Conv2d(cin, int(item), 3, padding=1), *([nn.BatchNorm2d(int(item))] if batch_norm else []),
                       nn.ReLU()]
            cin = int(item)
    return nn.Sequential(*layers)


class VGG(nn.Module):
    def __init__(self, config: list[int | str]) -> None:
        super().__init__()
        self.features = vgg_features(config)
        self.pool = nn.AdaptiveAvgPool2d(7)
        self.classifier = _classifier(512 * 7 * 7)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


class AlexNet(nn.Module):
    """AlexNet as in 'One weird trick' (Krizhevsky 2014): 64-192-384-256-256 conv widths."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 11, 4, 2), nn.ReLU(), nn.MaxPool2d(3, 2),
            nn.Conv2d(64, 192, 5, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2),
            nn.Conv2d(192, 384, 3, padding=1), nn.ReLU(),
            nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(),
            nn.Conv2d(256, 256, 3, padding=1), nn.ReLU(), nn.MaxPool2d(3, 2),
        )
        self.pool = nn.AdaptiveAvgPool2d(6)
        self.classifier = _classifier(256 * 6 * 6, dropout_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


for _name, _config in _CONFIGS.items():
    add_classifier(_name, lambda c=_config: VGG(c), description=f"VGG {_name[3:]} layers")
add_classifier("alexnet", AlexNet, description="AlexNet (one-weird-trick variant)")
