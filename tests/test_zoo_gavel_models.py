"""The zoo models behind Gavel's ResNet-18 (CIFAR-10) and Recommendation (Recoder) jobs.

resnet18_cifar: 11,173,962 parameters, the commonly cited count of the CIFAR-10 ResNet-18
(3x3 stem, no max-pool, 10 classes). recoder: item vector -> 200 tanh -> item vector.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from horus.catalog import FEATURE_NAMES, load_catalog  # noqa: E402
from horus.graph.extract import build_zoo_model, extract_zoo_features  # noqa: E402
from horus.sources.gavel import gavel_to_job_type  # noqa: E402
from horus.zoo import ZOO, get_entry  # noqa: E402


def test_resnet18_cifar_parameter_count() -> None:
    model, _, size = build_zoo_model("resnet18_cifar", 1)
    assert sum(p.numel() for p in model.parameters()) == 11_173_962
    assert size == 32 and get_entry("resnet18_cifar").family == "cnn"


def test_resnet18_cifar_keeps_resolution_in_first_stage() -> None:
    model = get_entry("resnet18_cifar").build(None).eval()
    with torch.no_grad():
        first_stage = model.stages[0](model.stem(torch.randn(1, 3, 32, 32)))
        logits = model(torch.randn(2, 3, 32, 32))
    assert first_stage.shape == (1, 64, 32, 32)  # no stride-2 stem, no max-pool
    assert logits.shape == (2, 10)


def test_resnet18_cifar_shares_blocks_with_imagenet_resnet18() -> None:
    cifar = get_entry("resnet18_cifar").build(None)
    imagenet = get_entry("resnet18").build(None)
    assert type(cifar) is type(imagenet)
    stage_params = [sum(p.numel() for p in m.stages.parameters()) for m in (cifar, imagenet)]
    assert stage_params[0] == stage_params[1]


def test_recoder_builds_and_trains_one_step_on_cpu() -> None:
    entry = get_entry("recoder")
    assert entry.family == "recommendation"
    items, hidden = 300, 200
    torch.manual_seed(0)
    model = entry.build(items)
    assert sum(p.numel() for p in model.parameters()) == 2 * items * hidden + hidden + items
    inputs = entry.example_input(8, items, "cpu")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    before = [p.detach().clone() for p in model.parameters()]
    loss = entry.loss_fn(model(*inputs), inputs)
    loss.backward()
    optimizer.step()
    assert torch.isfinite(loss) and loss.item() > 0
    assert all(not torch.equal(a, b.detach()) for a, b in zip(before, model.parameters()))
    with torch.no_grad():
        assert entry.loss_fn(model(*inputs), inputs).item() < loss.item()


def test_recoder_default_matches_gavel_assumptions() -> None:
    entry = get_entry("recoder")
    items = entry.default_input_size
    model = entry.build(None)
    assert sum(p.numel() for p in model.parameters()) == 2 * items * 200 + 200 + items


@pytest.mark.parametrize(("name", "size"), [("resnet18_cifar", None), ("recoder", 500)])
def test_features_extract(name: str, size: int | None) -> None:
    features = extract_zoo_features(name, 2, size)
    assert tuple(features) == FEATURE_NAMES
    model, _, used = build_zoo_model(name, 2, size)
    assert features["params"] == sum(p.numel() for p in model.parameters())
    assert features["input_size"] == used
    assert 1.5 * features["forward_flops"] < features["train_flops"] < 3.5 * features["forward_flops"]


def test_recoder_forward_flops_are_the_two_dense_layers() -> None:
    items, batch = 500, 2
    features = extract_zoo_features("recoder", batch, items)
    dense_macs = batch * 2 * items * 200
    assert dense_macs * 2 <= features["forward_flops"] <= dense_macs * 2 * 1.05


def test_every_gavel_job_type_is_a_zoo_model_in_the_catalog() -> None:
    catalog = load_catalog()
    for gavel_name in ("ResNet-18 (batch size 32)", "ResNet-50 (batch size 32)", "Transformer (batch size 32)",
                       "LM (batch size 20)", "Recommendation (batch size 512)", "CycleGAN", "A3C"):
        model = gavel_to_job_type(gavel_name).split("/")[0]
        assert model in ZOO and model in catalog
        assert catalog[model].source.startswith("horus.graph"), f"{model}: catalog row not computed by code"


def test_resnet18_cifar_gmacs_match_commonly_cited_figure() -> None:
    from horus.graph.extract import count_flops_and_activations

    model, inputs, _ = build_zoo_model("resnet18_cifar", 1)
    model.eval()
    forward, _, _ = count_flops_and_activations(model, inputs, backward=False)
    assert abs(forward / 2 / 1e9 - 0.556) <= 0.03 * 0.556  # ~0.56 GMACs at 32x32 (pytorch-cifar ResNet18)


def test_cyclegan_step_runs_six_generator_and_six_discriminator_passes() -> None:
    entry = get_entry("cyclegan")
    model = entry.build(None)
    calls: dict[str, int] = {}
    for name in ("g_ab", "g_ba", "d_a", "d_b"):
        calls[name] = 0
        getattr(model, name).register_forward_hook(lambda *_, n=name: calls.__setitem__(n, calls[n] + 1))
    inputs = entry.example_input(1, 32, "cpu")
    entry.loss_fn(model(*inputs), inputs).backward()
    assert calls == {"g_ab": 3, "g_ba": 3, "d_a": 3, "d_b": 3}
    generator = sum(p.numel() for p in model.g_ab.parameters())
    discriminator = sum(p.numel() for p in model.d_a.parameters())
    assert sum(p.numel() for p in model.parameters()) == 2 * generator + 2 * discriminator


def test_a3c_sample_is_a_rollout_of_frames() -> None:
    from horus.graph.extract import count_flops_and_activations
    from horus.zoo.models.rl import ROLLOUT_STEPS

    entry = get_entry("a3c")
    model = entry.build(None)
    inputs = entry.example_input(2, 42, "cpu")
    logits, value = model(*inputs)
    assert inputs[0].shape[:2] == (2, ROLLOUT_STEPS)
    assert logits.shape[0] == value.shape[0] == 2 * ROLLOUT_STEPS
    # per-sample forward FLOPs = ROLLOUT_STEPS x (torso on one frame + one LSTM step + heads)
    torso, _, _ = count_flops_and_activations(model.torso, (torch.randn(1, 1, 42, 42),), backward=False)
    recurrent_and_heads = 2 * sum(p.numel() for m in (model.lstm, model.actor, model.critic) for p in m.parameters())
    per_sample = extract_zoo_features("a3c", 2)["forward_flops"] / 2
    assert ROLLOUT_STEPS * torso < per_sample <= 1.1 * ROLLOUT_STEPS * (torso + recurrent_and_heads)


def test_transformer_uses_separate_source_and_target_vocabularies() -> None:
    from horus.zoo.models.translation import SRC_VOCAB, TGT_VOCAB

    entry = get_entry("transformer")
    model, (src, tgt), _ = build_zoo_model("transformer", 2)
    assert model.src_embed.num_embeddings == SRC_VOCAB and model.tgt_embed.num_embeddings == TGT_VOCAB
    assert model.generator.out_features == TGT_VOCAB
    real_src, real_tgt = entry.example_input(2, 8, "cpu")
    assert int(real_src.max()) < SRC_VOCAB and int(real_tgt.max()) < TGT_VOCAB
