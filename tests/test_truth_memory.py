from __future__ import annotations

import pytest

from horus.catalog import OP_KINDS, ModelInfo
from horus.errors import HorusInputError
from horus.truth.memory import CUDA_CONTEXT_MIB, memory_terms, training_memory_mib

MIB = 1024 * 1024


def _model(params: int, act_bytes: float) -> ModelInfo:
    return ModelInfo("toy", "cnn", params, 1e9, 3e9, act_bytes, 32, 4, {k: 0 for k in OP_KINDS}, "test")


def test_terms_on_hand_computed_example() -> None:
    # 1 Mi params fp32 = 4 MiB weights, 4 MiB grads, 8 MiB Adam moments; 2 MiB activations x batch 8 = 16 MiB.
    info = _model(MIB, 2 * MIB)
    terms = memory_terms(info, 8)
    assert terms.weights == pytest.approx(4.0)
    assert terms.gradients == pytest.approx(4.0)
    assert terms.optimizer == pytest.approx(8.0)
    assert terms.activations == pytest.approx(16.0)
    assert terms.context == CUDA_CONTEXT_MIB
    assert training_memory_mib(info, 8) == pytest.approx(32.0 + CUDA_CONTEXT_MIB)


def test_optimizer_and_dtype_change_the_right_terms() -> None:
    info = _model(MIB, 2 * MIB)
    sgd = memory_terms(info, 8, optimizer="sgd")
    assert sgd.optimizer == 0.0 and sgd.weights == pytest.approx(4.0)
    half = memory_terms(info, 8, dtype_bytes=2)
    assert half.weights == pytest.approx(2.0)
    assert half.activations == pytest.approx(8.0)


def test_memory_grows_with_batch() -> None:
    info = _model(10 * MIB, 5 * MIB)
    assert training_memory_mib(info, 64) > training_memory_mib(info, 32) > training_memory_mib(info, 1)


def test_bad_input_raises_one_line_error() -> None:
    info = _model(MIB, MIB)
    with pytest.raises(HorusInputError, match="optimizer"):
        memory_terms(info, 8, optimizer="lion")
    with pytest.raises(HorusInputError, match="batch_size"):
        memory_terms(info, 0)
