"""CIFAR-10 variants of the zoo's ImageNet classifiers, as the common CIFAR training repositories build them.

Layouts follow kuangliu's ``pytorch-cifar`` (the repository Gavel's ResNet-18 job and many papers train):
32x32 inputs, 10 classes, no ImageNet down-sampling stem.

* ``vgg11_cifar`` / ``vgg16_cifar``: the VGG configs A / D with BatchNorm after every conv and one
  ``Linear(512, 10)`` classifier (no 4096-wide head): 9,231,114 / 14,728,266 parameters. The final pooling is
  adaptive (pytorch-cifar's 1x1 average pool at 32x32), so larger inputs also build.
* ``resnet50_cifar``: ResNet-50 bottlenecks behind the 3x3 stride-1 stem of ``resnet18_cifar`` (23,520,842).
* ``mobilenet_v2_cifar``: MobileNetV2 with a stride-1 stem and a stride-1 second stage (pytorch-cifar's CIFAR
  change), the paper's inverted residuals and a 1280 -> 10 classifier (2,236,682; pytorch-cifar's variant adds
  1x1 projection shortcuts where the paper has none, 2,296,922).
"""

from __future__ import annotations

import torch
from torch import nn

from horus.zoo.base import ZooEntry, add, classification_loss, image_input
from horus.zoo.models._layers import conv_bn_act
from horus.zoo.models.mobile import InvertedResidual, _Classifier
from horus.zoo.models.resnet import Bottleneck, ResNet, cifar_stem
from horus.zoo.models.vgg import _CONFIGS

CIFAR10_CLASSES = 10


class CifarVGG(nn.Module):
    """VGG conv stack with BatchNorm, global pooling and a single 512 -> classes linear layer."""

    def __init__(self, config: list[int | str], num_classes: int = CIFAR10_CLASSES) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        cin = 3
        for item in config:
            if item == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers += [nn.Conv2d(cin, int(item), 3, padding=1), nn.BatchNorm2d(int(item)), nn.ReLU()]
                cin = int(item)
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(cin, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


def mobilenet_v2_cifar(num_classes: int = CIFAR10_CLASSES) -> nn.Module:
    """MobileNetV2 (Table 2 of the paper) with strides 1 in the stem and the second stage."""
    table = ((1, 16, 1, 1), (6, 24, 2, 1), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))
    layers: list[nn.Module] = [conv_bn_act(3, 32, 3, 1, act=nn.ReLU6)]
    cin = 32
    for t, c, n, s in table:
        for i in range(n):
            layers.append(InvertedResidual(cin, cin * t, c, 3, s if i == 0 else 1, nn.ReLU6))
            cin = c
    layers.append(conv_bn_act(cin, 1280, 1, act=nn.ReLU6))
    return _Classifier(nn.Sequential(*layers), nn.Linear(1280, num_classes))


def _add(name: str, build: object, description: str) -> None:
    add(ZooEntry(name=name, family="cnn", build=lambda _size=None: build(),  # type: ignore[operator]
                 example_input=image_input(3), loss_fn=classification_loss, default_input_size=32,
                 description=description))


_add("vgg11_cifar", lambda: CifarVGG(_CONFIGS["vgg11"]), "VGG-11 with BatchNorm for CIFAR-10 (512 -> 10 classifier)")
_add("vgg16_cifar", lambda: CifarVGG(_CONFIGS["vgg16"]), "VGG-16 with BatchNorm for CIFAR-10 (512 -> 10 classifier)")
_add("resnet50_cifar", lambda: ResNet(Bottleneck, (3, 4, 6, 3), CIFAR10_CLASSES, stem=cifar_stem()),
     "ResNet-50 for CIFAR-10 (3x3 stem, no max-pool, 10 classes)")
_add("mobilenet_v2_cifar", mobilenet_v2_cifar, "MobileNetV2 for CIFAR-10 (stride-1 stem and second stage, 10 classes)")
