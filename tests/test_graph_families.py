"""One zoo model per family builds on the meta device and yields a consistent feature vector."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from horus.catalog import FEATURE_NAMES  # noqa: E402
from horus.graph.extract import build_zoo_model, extract_zoo_features  # noqa: E402
from horus.zoo import FAMILIES, ZOO  # noqa: E402

# (family, model, batch, input size): small inputs keep the suite fast where the assertions allow
CASES = [
    ("cnn", "resnet18", 2, 64),
    ("recurrent", "lstm_lm", 2, 12),
    ("transformer", "transformer", 2, 16),
    ("recommendation", "ncf", 4, None),
    ("gan", "dcgan", 2, None),
    ("rl", "a3c", 2, None),
    ("detector", "yolo", 1, 128),
]


def test_zoo_covers_every_family_with_30_models() -> None:
    assert len(ZOO) >= 30
    assert {entry.family for entry in ZOO.values()} == set(FAMILIES)


@pytest.mark.parametrize(("family", "name", "batch", "size"), CASES, ids=[c[0] for c in CASES])
def test_family_extracts(family: str, name: str, batch: int, size: int | None) -> None:
    assert ZOO[name].family == family
    features = extract_zoo_features(name, batch, size)
    assert tuple(features) == FEATURE_NAMES
    model, _, used_size = build_zoo_model(name, batch, size)
    assert features["params"] == sum(p.numel() for p in model.parameters())
    assert features["batch_size"] == batch and features["input_size"] == used_size
    assert features["forward_flops"] > 0 and features["activation_bytes"] > 0
    # backward costs about twice the forward pass (less where inputs/embeddings need no gradient)
    assert 1.5 * features["forward_flops"] < features["train_flops"] < 3.5 * features["forward_flops"]
    assert features["depth"] >= 1
    if not features["n_recurrent"]:  # a recurrent op counts once per stacked layer in depth
        assert features["depth"] <= features["n_conv"] + features["n_linear"]


def test_cnn_op_histogram_counts_layers() -> None:
    features = extract_zoo_features("resnet18", 2, 32)
    model, _, _ = build_zoo_model("resnet18", 2, 32)
    convs = sum(isinstance(m, torch.nn.Conv2d) for m in model.modules())
    norms = sum(isinstance(m, torch.nn.BatchNorm2d) for m in model.modules())
    assert features["n_conv"] == convs == 20
    assert features["n_norm"] == norms
    assert features["n_linear"] == 1 and features["n_recurrent"] == 0
    assert features["depth"] == 18  # the "18" of ResNet-18: weighted layers on the longest path


def test_flops_scale_linearly_with_batch() -> None:
    one = extract_zoo_features("lstm_lm", 1, 8)
    three = extract_zoo_features("lstm_lm", 3, 8)
    for key in ("forward_flops", "train_flops"):
        assert three[key] == pytest.approx(3 * one[key], rel=1e-6)
    assert one["n_recurrent"] == 1 and one["n_embedding"] == 1
    assert one["depth"] == 3  # two LSTM layers + the decoder
