"""``contention`` interference model: properties, fitting, the leave-one-GPU-out protocol and its CLI."""

from __future__ import annotations

import numpy as np
import pytest
from cli_helpers import assert_clear, run

from horus.interference.contention import (
    ZERO_SHOT,
    ContentionInterference,
    SoloPhases,
    ZeroShotContention,
    stretched,
)
from horus.interference.data import Observation, gavel_observations
from horus.interference.evaluation import PROTOCOLS, default_factory
from horus.interference.models import INTERFERENCE_MODELS
from horus.sources.gavel import load_gavel

TYPES = ["resnet50/b32", "transformer/b64", "lstm_lm/b20", "recoder/b1024", "a3c/b4", "resnet18_cifar/b128"]


def test_two_tiny_jobs_barely_slow_each_other() -> None:
    tiny = SoloPhases(iter_s=0.1, busy_s=0.002, compute_share=0.8, memory_share=0.2)  # 2 % utilization
    assert stretched(tiny, [tiny], ZERO_SHOT) > 0.97


def test_two_compute_saturated_jobs_get_half_each() -> None:
    for busy in (0.01, 0.5):
        full = SoloPhases(iter_s=busy, busy_s=busy, compute_share=1.0, memory_share=0.0)
        assert stretched(full, [full], ZERO_SHOT) == pytest.approx(0.5)


def test_slowdown_grows_with_the_partners_utilization() -> None:
    job = SoloPhases(0.1, 0.08, 0.6, 0.4)
    light, heavy = SoloPhases(0.1, 0.02, 0.6, 0.4), SoloPhases(0.1, 0.09, 0.6, 0.4)
    assert 0 < stretched(job, [heavy], ZERO_SHOT) < stretched(job, [light], ZERO_SHOT) < 1
    # a third job slows it further
    assert stretched(job, [heavy, light], ZERO_SHOT) < stretched(job, [heavy], ZERO_SHOT)


def test_catalog_jobs_symmetric_in_range_and_deterministic() -> None:
    a, b = ContentionInterference(), ZeroShotContention()
    for gpu in ("k80", "v100", "A100-80GB"):
        for x in TYPES:
            for y in TYPES:
                values = a.predict([x, y], gpu)
                assert values == pytest.approx(list(reversed(a.predict([y, x], gpu))))
                assert all(0.0 < v <= 1.0 for v in values)
                assert values == b.predict([x, y], gpu)  # same constants before any fit
            assert a.predict_one(x, [], gpu) == 1.0
            same = a.predict([x, x], gpu)
            assert same[0] == pytest.approx(same[1])


def _synthetic(constants: tuple[float, ...]) -> list[Observation]:
    """Pairs whose value is the model itself at ``constants`` (a world the model can represent)."""
    truth = ContentionInterference(constants=constants)
    return [Observation(x, (y,), gpu, truth.predict_one(x, [y], gpu)) for gpu in ("k80", "v100")
            for x in TYPES for y in TYPES]


def test_fit_recovers_a_world_it_can_represent_and_is_deterministic() -> None:
    obs = _synthetic((1.5, 0.3, 0.05, 0.5))
    zero = ZeroShotContention().fit(obs)
    assert zero.constants == ZERO_SHOT and not zero.fitted
    m1, m2 = ContentionInterference().fit(obs), ContentionInterference().fit(obs)
    assert m1.constants == m2.constants and m1.fitted
    truth = np.array([o.value for o in obs])
    fitted_mae = np.mean(np.abs(m1.predict_observations(obs) - truth))
    zero_mae = np.mean(np.abs(zero.predict_observations(obs) - truth))
    assert fitted_mae < 0.01 < zero_mae


def test_registered_beside_the_others() -> None:
    for name in ("contention", "contention-zeroshot", "summed-util-zeroshot", "physical", "iasp"):
        assert name in INTERFERENCE_MODELS
    model = INTERFERENCE_MODELS.create("summed-util-zeroshot", features=None)
    assert model.fit([]) is model and (model.theta, model.gamma) == (1.0, 1.0)


def test_leave_one_gpu_out_on_gavel(gavel_path) -> None:
    data = {g: gavel_observations(load_gavel(gavel_path, g)) for g in ("k80", "p100", "v100")}
    out = PROTOCOLS["leave-one-gpu-out"](data, ["contention", "contention-zeroshot"], default_factory(None))
    assert sorted(out) == ["others->k80", "others->p100", "others->v100"]
    for gpu, obs in data.items():
        for m in out[f"others->{gpu}"].values():
            assert m["n"] == len(obs) and 0.0 <= m["mae"] <= 1.0 and 0.0 <= m["pairwise_acc"] <= 1.0
    # constants fitted on two GPU types transfer to the third better than the a-priori ones, on average
    mean = {name: np.mean([out[k][name]["mae"] for k in out]) for name in ("contention", "contention-zeroshot")}
    assert mean["contention"] < mean["contention-zeroshot"]


def test_cli_reports_leave_one_gpu_out(gavel_path) -> None:
    rc, out, err = run(["interference", "evaluate", "--gavel", str(gavel_path), "--protocol", "leave-one-gpu-out",
                        "--models", "contention,summed-util-zeroshot", "--solo-predictor", "physical"])
    assert rc == 0, err
    rows = [line for line in out.splitlines() if line.startswith("| leave-one-gpu-out")]
    assert len(rows) == 6 and {r.split("|")[3].strip() for r in rows} == {"contention", "summed-util-zeroshot"}


@pytest.mark.parametrize(("argv", "needle"), [
    (["--protocol", "leave-one-out"], "--protocol"),
    (["--models", "contention,nope"], "--models"),
    (["--solo-predictor", "nope"], "--solo-predictor"),
])
def test_cli_bad_options_are_one_line(gavel_path, argv: list[str], needle: str) -> None:
    rc, _, err = run(["interference", "evaluate", "--gavel", str(gavel_path), *argv])
    assert_clear(rc, err, needle)


def test_cli_bad_train_model_is_one_line(gavel_path, tmp_path) -> None:
    rc, _, err = run(["interference", "train", "--gavel", str(gavel_path), "--model", "contention-x",
                      "--out", str(tmp_path / "m")])
    assert_clear(rc, err, "--model")
