"""Zoo CNNs/ViT match torchvision's published parameter counts exactly and its GMACs within 3%.

Figures: torchvision "Table of all available classification weights" (params, GFLOPS = multiply-accumulates).
Models are built on the meta device, so no weight memory is allocated.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from horus.graph.extract import build_zoo_model, count_flops_and_activations  # noqa: E402

# name: (parameters, GMACs at the model's default input size)
PUBLISHED: dict[str, tuple[int, float]] = {
    "resnet18": (11_689_512, 1.81),
    "resnet34": (21_797_672, 3.66),
    "resnet50": (25_557_032, 4.09),
    "resnet101": (44_549_160, 7.80),
    "vgg11": (132_863_336, 7.61),
    "vgg16": (138_357_544, 15.47),
    "vgg19": (143_667_240, 19.63),
    "alexnet": (61_100_840, 0.71),
    "mobilenet_v2": (3_504_872, 0.30),
    "mobilenet_v3_large": (5_483_032, 0.22),
    "mobilenet_v3_small": (2_542_856, 0.06),
    "densenet121": (7_978_856, 2.83),
    "inception_v3": (27_161_264, 5.71),
    "efficientnet_b0": (5_288_548, 0.39),
    "shufflenet_v2_x1_0": (2_278_604, 0.14),
    "squeezenet1_0": (1_248_424, 0.82),
    "squeezenet1_1": (1_235_496, 0.35),
    "vit_b16": (86_567_656, 17.56),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_count_matches_torchvision(name: str) -> None:
    model, _, _ = build_zoo_model(name, 1)
    assert sum(p.numel() for p in model.parameters()) == PUBLISHED[name][0]


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_gmacs_match_torchvision(name: str) -> None:
    model, inputs, _ = build_zoo_model(name, 1)
    model.eval()  # published figures are inference FLOPs (no Inception auxiliary head)
    forward, _, _ = count_flops_and_activations(model, inputs, backward=False)
    gmacs = forward / 2 / 1e9
    published = PUBLISHED[name][1]
    # 3 %, or half a unit of the table's last printed digit for the tiny models (0.06 is 0.055..0.065)
    assert abs(gmacs - published) <= max(0.03 * published, 0.005), f"{name}: {gmacs:.3f} GMACs vs {published}"
