"""Save/load a trained interference model: ``model.pkl`` plus a ``model.json`` sidecar.

The sidecar records the model name, feature schema, training-data sha256, metrics, library
versions and the pickle's own sha256; ``load_model`` refuses a pickle whose hash differs (a
model file is trusted code: only load your own).
"""

from __future__ import annotations

import hashlib
import json
import pickle
import platform
from pathlib import Path

import numpy as np
import scipy
import sklearn

from horus import __version__
from horus.errors import HorusInputError
from horus.interference.base import InterferenceModel

MODEL_FILE = "model.pkl"
SIDECAR_FILE = "model.json"
FORMAT_VERSION = 1


def save_model(model: InterferenceModel, out_dir: str | Path, *, data_sha256: str = "",
               metrics: dict[str, object] | None = None, extra: dict[str, object] | None = None) -> Path:
    """Write the model and its sidecar into ``out_dir``; returns the sidecar path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    blob = pickle.dumps(model, protocol=pickle.HIGHEST_PROTOCOL)
    (out / MODEL_FILE).write_bytes(blob)
    sidecar = {
        "format_version": FORMAT_VERSION,
        "model": model.name,
        "feature_names": list(model.features.names),
        "solo_predictor": model.features.predictor_name,
        "data_sha256": data_sha256,
        "model_sha256": hashlib.sha256(blob).hexdigest(),
        "metrics": metrics or {},
        "params": model.describe(),
        "versions": {"horus": __version__, "python": platform.python_version(), "numpy": np.__version__,
                     "scipy": scipy.__version__, "sklearn": sklearn.__version__},
        **(extra or {}),
    }
    path = out / SIDECAR_FILE
    path.write_text(json.dumps(sidecar, indent=2, sort_keys=True) + "\n")
    return path


def read_sidecar(model_dir: str | Path) -> dict[str, object]:
    from horus.validation import load_json

    path = Path(model_dir) / SIDECAR_FILE
    data, _ = load_json(path, "an interference model sidecar (model.json)")
    if not isinstance(data, dict) or data.get("format_version") != FORMAT_VERSION:
        raise HorusInputError(str(path), f"field 'format_version': expected {FORMAT_VERSION}")
    return data


def load_model(model_dir: str | Path) -> InterferenceModel:
    """Load a model saved by ``save_model``; checks the pickle against the sidecar's hash."""
    sidecar = read_sidecar(model_dir)
    path = Path(model_dir) / MODEL_FILE
    try:
        blob = path.read_bytes()
    except OSError as exc:
        raise HorusInputError(str(path), f"cannot read model ({exc.strerror})") from None
    if hashlib.sha256(blob).hexdigest() != sidecar.get("model_sha256"):
        raise HorusInputError(str(path), "sha256 differs from model.json field 'model_sha256'")
    model = pickle.loads(blob)
    if not isinstance(model, InterferenceModel):
        raise HorusInputError(str(path), "expected a pickled InterferenceModel")
    return model
