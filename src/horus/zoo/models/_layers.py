"""Building blocks shared by the zoo's CNNs."""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

from horus.zoo.base import ZooEntry, add, classification_loss, image_input


def conv_bn_act(
    cin: int, cout: int, kernel: int | tuple[int, int], stride: int = 1, groups: int = 1,
    act: Callable[[], nn.Module] | None = nn.ReLU, eps: float = 1e-5, padding: int | tuple[int, int] | None = None,
) -> nn.Sequential:
    """Conv (no bias) -> BatchNorm -> optional activation, 'same'-style padding by default."""
    if padding is None:
        padding = (kernel - 1) // 2 if isinstance(kernel, int) else (kernel[0] // 2, kernel[1] // 2)
    layers: list[nn.Module] = [
        nn.Conv2d(cin, cout, kernel, stride, padding, groups=groups, bias=False),
        nn.BatchNorm2d(cout, eps=eps),
    ]
    if act is not None:
        layers.append(act())
    return nn.Sequential(*layers)


def add_classifier(name: str, build: Callable[[], nn.Module], input_size: int = 224, description: str = "") -> None:
    """Register an ImageNet classifier (3-channel square input, 1000 classes, cross-entropy loss)."""
    add(ZooEntry(
        name=name, family="cnn", build=lambda _size=None: build(), example_input=image_input(3),
        loss_fn=classification_loss, default_input_size=input_size, description=description,
    ))
