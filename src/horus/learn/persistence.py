"""Save / load a trained predictor directory: ``<target>.joblib`` per target + ``predictor.json``.

The JSON sidecar records the feature schema (names in order), the training data's sha256, the
selection and metrics, library versions and the date. Loading refuses a directory whose schema
differs from this version's ``FEATURE_SCHEMA`` (the models would read the wrong columns).
"""

from __future__ import annotations

import datetime as dt
import json
import platform
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import joblib
from sklearn.base import BaseEstimator

from horus.errors import HorusInputError
from horus.learn.candidates import TARGET_SPECS
from horus.learn.features import FEATURE_SCHEMA
from horus.learn.training import TrainedPredictors

SIDECAR = "predictor.json"
FORMAT_VERSION = 1
VERSIONED_LIBRARIES: tuple[str, ...] = ("horus-scheduler", "scikit-learn", "numpy", "pandas", "joblib",
                                         "lightgbm", "xgboost")


def library_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for lib in VERSIONED_LIBRARIES:
        try:
            versions[lib] = metadata.version(lib)
        except metadata.PackageNotFoundError:
            versions[lib] = None
    return versions


def save_trained(trained: TrainedPredictors, out_dir: str | Path) -> Path:
    """Write the models and sidecar into ``out_dir`` (created); return the sidecar path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files: dict[str, str] = {}
    for target, model in trained.models.items():
        files[target] = f"{target}.joblib"
        joblib.dump(model, out / files[target])
    sidecar = {
        "format_version": FORMAT_VERSION,
        "feature_schema": list(FEATURE_SCHEMA),
        "targets": {t: {"file": files[t], "column": TARGET_SPECS[t].column, "unit": TARGET_SPECS[t].unit,
                        **trained.choices[t]} for t in trained.models},
        "training_data": {"source": trained.data_source, "sha256": trained.data_sha256, "rows": trained.n_rows,
                          "families": trained.families},
        "seed": trained.seed,
        "folds": trained.folds,
        "metrics": [r.as_dict() for r in trained.metrics],
        "library_versions": library_versions(),
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }
    path = out / SIDECAR
    path.write_text(json.dumps(sidecar, indent=2) + "\n")
    return path


@dataclass(frozen=True)
class LoadedPredictors:
    models: dict[str, BaseEstimator]
    sidecar: dict[str, object]
    path: Path


def _schema_mismatch(found: list[object]) -> str:
    expected = list(FEATURE_SCHEMA)
    for i, (a, b) in enumerate(zip(found, expected, strict=False)):
        if a != b:
            return f"position {i}: file has {a!r}, this horus expects {b!r}"
    return f"file has {len(found)} features, this horus expects {len(expected)}"


def load_trained(model_dir: str | Path) -> LoadedPredictors:
    """Load a directory written by ``save_trained``; HorusInputError if missing, corrupt or schema differs."""
    root = Path(model_dir)
    path = root / SIDECAR
    source = str(path)
    if not path.is_file():
        raise HorusInputError(source, "no predictor sidecar here (train one with `horus predictor train DATA --out DIR`)")
    from horus.validation import load_json

    sidecar, _ = load_json(path, "a predictor sidecar JSON")
    if not isinstance(sidecar, dict) or sidecar.get("format_version") != FORMAT_VERSION:
        raise HorusInputError(source, f"field 'format_version': expected {FORMAT_VERSION}")
    schema = sidecar.get("feature_schema")
    if not isinstance(schema, list) or schema != list(FEATURE_SCHEMA):
        detail = _schema_mismatch(schema) if isinstance(schema, list) else "missing"
        raise HorusInputError(source, f"field 'feature_schema' does not match this version ({detail}); retrain")
    targets = sidecar.get("targets")
    if not isinstance(targets, dict) or set(targets) != set(TARGET_SPECS):
        raise HorusInputError(source, f"field 'targets': expected entries for {', '.join(TARGET_SPECS)}")
    models: dict[str, BaseEstimator] = {}
    for target, entry in targets.items():
        if not isinstance(entry, dict):
            raise HorusInputError(source, f"field 'targets.{target}': expected a mapping with 'file'")
        file = root / str(entry.get("file", ""))
        if not file.is_file():
            raise HorusInputError(str(file), f"model file for target {target!r} is missing")
        try:
            models[target] = joblib.load(file)
        except Exception as exc:  # noqa: BLE001 - unpickling failures are bad input
            raise HorusInputError(str(file), f"cannot load model ({type(exc).__name__}: {exc})") from None
    return LoadedPredictors(models, sidecar, root)
