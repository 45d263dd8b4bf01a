"""Loading profile tables for the learned predictors (on the SYNTHETIC fixture)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from horus.catalog import FEATURE_NAMES, load_catalog, model_info
from horus.errors import HorusInputError
from horus.learn.dataset import load_profiles
from horus.learn.features import FEATURE_SCHEMA, analytic_memory_mib
from horus.learn.gpus import resolve_gpu
from horus.truth.memory import training_memory_mib

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "synthetic_profiles" / "SYNTHETIC_profiles.csv"


@pytest.fixture(scope="module")
def raw() -> pd.DataFrame:
    return pd.read_csv(FIXTURE)


def test_fixture_loads_one_row_per_ok_configuration(raw: pd.DataFrame) -> None:
    data = load_profiles(FIXTURE)
    ok = raw[raw["status"] == "ok"]
    n_configs = len(ok.groupby(["model", "batch_size", "precision", "gpu_name"]))
    assert len(data) == n_configs
    assert data.rows_not_ok == int((raw["status"] != "ok").sum()) > 0
    assert list(data.features.columns) == list(FEATURE_SCHEMA)
    assert np.isfinite(data.features.to_numpy()).all()
    assert (data.targets["mem"] > 0).all() and (data.targets["iter_time"] > 0).all()
    # repeats are averaged
    first = ok.iloc[0]
    same = ok[(ok.model == first.model) & (ok.batch_size == first.batch_size) & (ok.precision == first.precision)
              & (ok.gpu_name == first.gpu_name)]
    row = data.keys.index[(data.keys.model == first.model) & (data.keys.batch_size == first.batch_size)
                          & (data.keys.precision == first.precision) & (data.keys.gpu_name == first.gpu_name)][0]
    assert data.targets.loc[row, "mem"] == pytest.approx(same["torch_max_reserved_mib"].mean())


def test_features_come_from_catalog_when_file_has_none(raw: pd.DataFrame, tmp_path: Path) -> None:
    known = raw[raw["model"].isin(list(load_catalog()))]
    if known.empty:
        pytest.skip("no fixture model is in the current catalog")
    drop = [c for c in FEATURE_NAMES if c not in ("batch_size", "input_size")]
    path = tmp_path / "nofeatures.csv"
    known.drop(columns=drop).to_csv(path, index=False)
    data = load_profiles(path)
    rec = data.keys.iloc[0]
    expected = model_info(rec["model"]).features(int(rec["batch_size"]))
    for name in ("params", "train_flops", "activation_bytes"):
        assert data.features.iloc[0][name] == pytest.approx(expected[name])


def test_parquet_and_csv_agree(raw: pd.DataFrame, tmp_path: Path) -> None:
    path = tmp_path / "profiles.parquet"
    raw.to_parquet(path)
    a, b = load_profiles(FIXTURE), load_profiles(path)
    pd.testing.assert_frame_equal(a.features, b.features)
    pd.testing.assert_frame_equal(a.targets, b.targets)


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda d: d.drop(columns=["torch_max_reserved_mib"]), "torch_max_reserved_mib"),
        (lambda d: d.assign(iter_time_s_mean=d["iter_time_s_mean"].astype(object).where(d.index != 0, "fast")),
         "line 2, column 'iter_time_s_mean'"),
        (lambda d: d.assign(gpu_name="Voodoo 3"), "gpu_name"),
        (lambda d: d.assign(precision="fp8"), "precision"),
        (lambda d: d.assign(status="oom"), "status 'ok'"),
        (lambda d: d.assign(torch_max_reserved_mib=-1.0), "torch_max_reserved_mib"),
    ],
)
def test_bad_tables_raise_input_error_naming_file_and_column(raw, tmp_path, edit, needle) -> None:
    path = tmp_path / "bad.csv"
    edit(raw.copy()).to_csv(path, index=False)
    with pytest.raises(HorusInputError) as err:
        load_profiles(path)
    assert str(path) in str(err.value) and needle in str(err.value)


def test_unknown_model_without_features_is_an_input_error(raw: pd.DataFrame, tmp_path: Path) -> None:
    path = tmp_path / "unknown.csv"
    raw.drop(columns=["params"]).assign(model="no_such_net").to_csv(path, index=False)
    with pytest.raises(HorusInputError, match="no_such_net"):
        load_profiles(path)


def test_missing_and_unsupported_files(tmp_path: Path) -> None:
    with pytest.raises(HorusInputError, match="no such file"):
        load_profiles(tmp_path / "absent.csv")
    (tmp_path / "table.xlsx").write_text("x")
    with pytest.raises(HorusInputError, match="unsupported"):
        load_profiles(tmp_path / "table.xlsx")


@pytest.mark.parametrize(
    ("name", "preset"),
    [("Tesla V100-SXM2-16GB", "V100"), ("Tesla V100-SXM2-32GB", "V100-32GB"), ("NVIDIA A100-SXM4-40GB", "A100-40GB"),
     ("NVIDIA A100 80GB PCIe", "A100-80GB"), ("NVIDIA H100 80GB HBM3", "H100"), ("NVIDIA A10", "A10"),
     ("Tesla T4", "T4"), ("H100", "H100")],
)
def test_gpu_names_resolve_to_presets(name: str, preset: str) -> None:
    assert resolve_gpu(name).name == preset


def test_analytic_memory_feature_matches_project_formula() -> None:
    info = model_info(sorted(load_catalog())[0])
    feat = info.features(32)
    fp32 = analytic_memory_mib(np.array([feat["params"]]), np.array([feat["activation_bytes"]]), np.array([0.0]))
    amp = analytic_memory_mib(np.array([feat["params"]]), np.array([feat["activation_bytes"]]), np.array([1.0]))
    assert fp32[0] == pytest.approx(training_memory_mib(info, 32))
    assert amp[0] < fp32[0]
