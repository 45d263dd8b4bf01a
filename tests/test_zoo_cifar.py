"""CIFAR-10 variants of the zoo (pytorch-cifar layouts): parameter counts derived here from the layer shapes,
equal to the counts pytorch-cifar's models have (VGG11 9,231,114; VGG16 14,728,266; ResNet50 23,520,842)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from horus.catalog import load_catalog
from horus.zoo import get_entry
from horus.zoo.models.vgg import _CONFIGS

CIFAR_MODELS = ("vgg11_cifar", "vgg16_cifar", "resnet50_cifar", "mobilenet_v2_cifar")


def n_params(name: str) -> int:
    with torch.device("meta"):
        return sum(p.numel() for p in get_entry(name).build(None).parameters())


def vgg_bn_params(config: list[int | str], classes: int = 10) -> int:
    """3x3 conv (weights + bias) + BatchNorm (scale + shift) per conv layer, then one Linear(512, classes)."""
    total, cin = 0, 3
    for item in config:
        if item != "M":
            cout = int(item)
            total += 9 * cin * cout + cout + 2 * cout
            cin = cout
    return total + cin * classes + classes


@pytest.mark.parametrize("name,config,published", [("vgg11_cifar", "vgg11", 9_231_114),
                                                   ("vgg16_cifar", "vgg16", 14_728_266)])
def test_cifar_vgg_has_no_imagenet_classifier(name: str, config: str, published: int) -> None:
    assert n_params(name) == vgg_bn_params(_CONFIGS[config]) == published
    assert n_params(config) > 9 * published  # the ImageNet VGG's 4096-wide head dominates it


def test_cifar_resnet50_and_mobilenet_v2_differ_from_imagenet_by_stem_and_head_only() -> None:
    # ResNet-50: 7x7 stem conv -> 3x3; 2048 x 1000 fc -> 2048 x 10
    imagenet = n_params("resnet50")
    assert n_params("resnet50_cifar") == imagenet - 7 * 7 * 3 * 64 + 3 * 3 * 3 * 64 - 2049 * 1000 + 2049 * 10
    assert n_params("resnet50_cifar") == 23_520_842
    # MobileNetV2: only strides change (no parameters), the 1280 x 1000 classifier becomes 1280 x 10
    assert n_params("mobilenet_v2_cifar") == n_params("mobilenet_v2") - 1281 * 1000 + 1281 * 10 == 2_236_682


@pytest.mark.parametrize("name", CIFAR_MODELS)
def test_cifar_models_train_on_32px_and_are_in_the_catalog(name: str) -> None:
    entry = get_entry(name)
    model = entry.build(None)
    (x,) = entry.example_input(2, entry.default_input_size, "cpu")
    logits = model(x)
    assert entry.default_input_size == 32 and entry.family == "cnn" and logits.shape == (2, 10)
    entry.loss_fn(logits, (x,)).backward()
    info = load_catalog()[name]
    assert info.input_size == 32 and info.params == n_params(name)
