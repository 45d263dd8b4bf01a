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
from horus.zoo.models.mobile import mobilenet_v2
from horus.zoo.models.resnet import Bottleneck, ResNet, cifar_stem
from horus.zoo.models.vgg import _CONFIGS, vgg_features

CIFAR10_CLASSES = 10


class CifarVGG(nn.Module):
    """VGG conv stack with BatchNorm, global pooling and a single 512 -> classes linear layer."""

    def __init__(self, config: list[int | str], num_classes: int = CIFAR10_CLASSES) -> None:
        super().__init__()
        self.features = vgg_features(config, batch_norm=True)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(next(int(c) for c in reversed(config) if c != "M"), num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


def _add(name: str, build: object, description: str) -> None:
    add(ZooEntry(name=name, family="cnn", build=lambda _size=None: build(),  # type: ignore[operator]
                 example_input=image_input(3), loss_fn=classification_loss, default_input_size=32,
                 description=description))


_add("vgg11_cifar", lambda: CifarVGG(_CONFIGS["vgg11"]), "VGG-11 with BatchNorm for CIFAR-10 (512 -> 10 classifier)")
_add("vgg16_cifar", lambda: CifarVGG(_CONFIGS["vgg16"]), "VGG-16 with BatchNorm for CIFAR-10 (512 -> 10 classifier)")
_add("resnet50_cifar", lambda: ResNet(Bottleneck, (3, 4, 6, 3), CIFAR10_CLASSES, stem=cifar_stem()),
     "ResNet-50 for CIFAR-10 (3x3 stem, no max-pool, 10 classes)")
_add("mobilenet_v2_cifar", lambda: mobilenet_v2(cifar=True, num_classes=CIFAR10_CLASSES), "MobileNetV2 for CIFAR-10 (stride-1 stem and second stage, 10 classes)")
