"""Physical interference model and the pairwise ranking metric."""

from __future__ import annotations

import numpy as np
import pytest

from horus.interference.data import Observation
from horus.interference.evaluation import pairwise_accuracy
from horus.interference.physical import JobPhysics, PhysicalInterference, colocated_throughputs


def test_pairwise_accuracy() -> None:
    y = np.array([0.9, 0.5, 0.7, 0.7])
    assert pairwise_accuracy(y, y) == 1.0
    assert pairwise_accuracy(y, -y) == 0.0
    assert pairwise_accuracy(y, np.zeros(4)) == 0.5


def _job(busy: float, host: float = 1e-3, mem: float = 0.1) -> JobPhysics:
    return JobPhysics(busy, host, 1e-3, max(busy, host) + 1e-3, 0.7, 0.3, mem)


def test_mechanistic_slowdown_grows_with_the_partners_gpu_demand() -> None:
    light, heavy = _job(0.002, host=0.02), _job(0.1)
    alone = colocated_throughputs([light], (0.5, 0.5, 0.05, 0.1))
    assert alone[0] == 1.0
    with_light = colocated_throughputs([heavy, light], (0.5, 0.5, 0.05, 0.1))[0]
    with_heavy = colocated_throughputs([heavy, heavy], (0.5, 0.5, 0.05, 0.1))[0]
    assert 0 < with_heavy < with_light <= 1


def test_physical_model_fits_on_features_not_identities() -> None:
    types = ["resnet50/b32", "transformer/b64", "lstm_lm/b20", "recoder/b1024"]
    model = PhysicalInterference()
    # a synthetic world where throughput falls with the partner's predicted busy fraction
    obs = []
    for a in types:
        for b in types:
            pa, pb = model.physics(a, "v100"), model.physics(b, "v100")
            value = 1.0 - 0.5 * pb.busy_s / pb.iter_s + 0.1 * pa.host_s / pa.iter_s
            obs.append(Observation(a, (b,), "v100", float(np.clip(value, 0.05, 1.0))))
    model.fit(obs)
    pred = model.predict_observations(obs)
    assert np.mean(np.abs(pred - [o.value for o in obs])) < 0.05
    # an unseen job type on an unseen GPU still gets a value in range
    assert 0 < model.predict_one("vgg16/b32", ["gpt2/b4"], "k80") <= 1
    assert model.predict_one("vgg16/b32", [], "k80") == pytest.approx(1.0)
