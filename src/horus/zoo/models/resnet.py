"""ResNet-18/34/50/101 (He et al. 2016), layer widths as in torchvision's ImageNet models.

``resnet18_cifar``: the CIFAR-10 ResNet-18 Gavel trains as its "ResNet-18" job (32x32 inputs, 10 classes):
the same BasicBlock stages behind a 3x3 stride-1 stem conv with no max-pool (11,173,962 parameters).
"""

from __future__ import annotations

import torch
from torch import nn

from horus.zoo.base import ZooEntry, add, classification_loss, image_input
from horus.zoo.models._layers import add_classifier, conv_bn_act


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin: int, width: int, stride: int) -> None:
        super().__init__()
        out = width * self.expansion
        self.body = nn.Sequential(conv_bn_act(cin, width, 3, stride), conv_bn_act(width, out, 3, act=None))
        self.shortcut = conv_bn_act(cin, out, 1, stride, act=None) if stride != 1 or cin != out else nn.Identity()
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.body(x) + self.shortcut(x))


class Bottleneck(BasicBlock):
    expansion = 4

    def __init__(self, cin: int, width: int, stride: int) -> None:
        super().__init__(cin, width, stride)
        out = width * self.expansion
        # stride on the 3x3 conv ("ResNet v1.5", as torchvision)
        self.body = nn.Sequential(
            conv_bn_act(cin, width, 1), conv_bn_act(width, width, 3, stride), conv_bn_act(width, out, 1, act=None),
        )


def imagenet_stem() -> nn.Sequential:
    """7x7 stride-2 conv + 3x3 stride-2 max-pool (input side / 4)."""
    return nn.Sequential(conv_bn_act(3, 64, 7, 2, padding=3), nn.MaxPool2d(3, 2, 1))


def cifar_stem() -> nn.Sequential:
    """3x3 stride-1 conv, no pooling: keeps CIFAR's 32x32 resolution for the first stage."""
    return conv_bn_act(3, 64, 3)


class ResNet(nn.Module):
    def __init__(self, block: type[BasicBlock], depths: tuple[int, ...], num_classes: int = 1000,
                 stem: nn.Module | None = None) -> None:
        super().__init__()
        self.stem = imagenet_stem() if stem is None else stem
        stages: list[nn.Module] = []
        cin = 64
        for i, n in enumerate(depths):
            width = 64 * 2**i
            for j in range(n):
                stages.append(block(cin, width, 2 if (j == 0 and i > 0) else 1))
                cin = width * block.expansion
        self.stages = nn.Sequential(*stages)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.stages(self.stem(x))), 1))


for _name, _block, _depths in (
    ("resnet18", BasicBlock, (2, 2, 2, 2)),
    ("resnet34", BasicBlock, (3, 4, 6, 3)),
    ("resnet50", Bottleneck, (3, 4, 6, 3)),
    ("resnet101", Bottleneck, (3, 4, 23, 3)),
):
    add_classifier(_name, lambda b=_block, d=_depths: ResNet(b, d), description=f"ResNet {_depths}")

CIFAR10_CLASSES = 10

add(ZooEntry(
    name="resnet18_cifar", family="cnn",
    build=lambda _size=None: ResNet(BasicBlock, (2, 2, 2, 2), CIFAR10_CLASSES, stem=cifar_stem()),
    example_input=image_input(3), loss_fn=classification_loss, default_input_size=32,
    description="ResNet-18 for CIFAR-10 (3x3 stem, no max-pool, 10 classes), as Gavel's ResNet-18 job",
))
