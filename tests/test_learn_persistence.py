"""Saving / loading trained predictors and the ``learned`` Predictor (SYNTHETIC fixture)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from horus.catalog import load_catalog
from horus.errors import HorusInputError
from horus.gpu_types import PRESETS
from horus.jobs import JobSpec
from horus.learn.candidates import TARGET_SPECS, predict_target
from horus.learn.dataset import ProfileDataset, load_profiles
from horus.learn.persistence import SIDECAR, load_trained, save_trained
from horus.learn.predictor import LearnedPredictor, shipped_model_dir
from horus.learn.training import TrainedPredictors, train_predictors
from horus.predict.base import PREDICTORS

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "synthetic_profiles" / "SYNTHETIC_profiles.csv"


@pytest.fixture(scope="module")
def data() -> ProfileDataset:
    return load_profiles(FIXTURE)


@pytest.fixture(scope="module")
def trained(data: ProfileDataset) -> TrainedPredictors:
    return train_predictors(data, seed=3, folds=3, candidate_names=["mean", "analytic_memory", "ridge"])


@pytest.fixture()
def model_dir(trained: TrainedPredictors, tmp_path: Path) -> Path:
    save_trained(trained, tmp_path / "model")
    return tmp_path / "model"


def test_round_trip_gives_identical_predictions(trained, data, model_dir: Path) -> None:
    loaded = load_trained(model_dir)
    for target, spec in TARGET_SPECS.items():
        before = predict_target(trained.models[target], data.features, spec)
        after = predict_target(loaded.models[target], data.features, spec)
        np.testing.assert_array_equal(before, after)
    sidecar = loaded.sidecar
    assert sidecar["training_data"]["sha256"] == data.sha256
    assert all(sidecar["targets"][t]["candidate"] != "mean" for t in TARGET_SPECS)
    assert sidecar["library_versions"]["scikit-learn"]


def test_schema_mismatch_is_refused(model_dir: Path) -> None:
    path = model_dir / SIDECAR
    sidecar = json.loads(path.read_text())
    sidecar["feature_schema"] = ["flops_renamed", *sidecar["feature_schema"][1:]]
    path.write_text(json.dumps(sidecar))
    with pytest.raises(HorusInputError, match="feature_schema.*position 0"):
        load_trained(model_dir)


def test_missing_or_corrupt_files_are_input_errors(model_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(HorusInputError, match="no predictor sidecar"):
        load_trained(tmp_path / "empty")
    (model_dir / "mem.joblib").unlink()
    with pytest.raises(HorusInputError, match="mem"):
        load_trained(model_dir)
    (model_dir / SIDECAR).write_text("{not json")
    with pytest.raises(HorusInputError, match="JSON"):
        load_trained(model_dir)


def test_learned_predictor_matches_models_on_catalog_jobs(model_dir: Path) -> None:
    predictor = PREDICTORS.create("learned", path=model_dir)
    assert isinstance(predictor, LearnedPredictor)
    model = sorted(load_catalog())[0]
    gpu = PRESETS["V100"]
    pred = predictor.predict(JobSpec("j", 0.0, 1, model, 32, 100.0), gpu)
    row = predictor.features(model, 32, gpu)
    util = predict_target(predictor.loaded.models["util"], row, TARGET_SPECS["util"])[0]
    assert pred.util == pytest.approx(util / 100)
    assert 0 <= pred.util <= 1 and pred.mem_mib > 0 and pred.iter_time_s > 0
    bigger = predictor.predict(JobSpec("k", 0.0, 1, model, 32, 100.0), PRESETS["H100"])
    assert bigger != pred  # the GPU type is a feature
    info = predictor.describe()
    assert info["path"] == str(model_dir) and info["training_data"]["sha256"]
    assert info["feature_schema"][0] == "params"


def test_no_default_model_without_real_training_data() -> None:
    if shipped_model_dir() is not None:
        pytest.skip("this build ships a trained model directory")
    with pytest.raises(HorusInputError, match="no model directory"):
        LearnedPredictor()
