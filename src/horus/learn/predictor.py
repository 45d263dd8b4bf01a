"""The ``learned`` predictor: a trained model directory applied to catalog features of a job."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pandas as pd

from horus.catalog import model_info
from horus.cluster import GPUType
from horus.errors import HorusInputError
from horus.jobs import JobSpec
from horus.learn.candidates import TARGET_SPECS, predict_target
from horus.learn.features import build_features, config_features
from horus.learn.persistence import SIDECAR, load_trained
from horus.predict.base import PREDICTORS, Prediction, Predictor

# A model directory shipped in the package. It exists only once it has been trained on real
# profiling measurements (never on the synthetic test fixture); until then "learned" needs a path.
SHIPPED_MODEL_DIR = "learned_predictor"


def shipped_model_dir() -> Path | None:
    """The packaged model directory, or None when the package ships none."""
    ref = resources.files("horus.data").joinpath(SHIPPED_MODEL_DIR)
    path = Path(str(ref))
    return path if (path / SIDECAR).is_file() else None


@PREDICTORS.register("learned")
class LearnedPredictor(Predictor):
    """Predicts util / memory / iteration time with models trained by ``horus predictor train``."""

    name = "learned"

    def __init__(self, path: str | Path | None = None, precision: str = "fp32") -> None:
        model_dir = Path(path) if path is not None else shipped_model_dir()
        if model_dir is None:
            raise HorusInputError("learned predictor", "no model directory given and none shipped; train one with "
                                                       "`horus predictor train DATA --out DIR` and pass path=DIR")
        if precision not in ("fp32", "amp"):
            raise HorusInputError("learned predictor", f"precision: expected fp32 or amp, got {precision!r}")
        self.loaded = load_trained(model_dir)
        self.precision = precision
        self._cache: dict[tuple[str, int, str, int, float], Prediction] = {}

    def features(self, model: str, batch_size: int, gpu_type: GPUType) -> pd.DataFrame:
        """The FEATURE_SCHEMA row of one (model, batch, GPU type)."""
        base = {**model_info(model).features(batch_size), **config_features(self.precision, gpu_type)}
        return build_features(pd.DataFrame([base]))

    def predict(self, job: JobSpec, gpu_type: GPUType) -> Prediction:
        key = (job.model, job.batch_size, gpu_type.name, gpu_type.memory_mib, gpu_type.speed)
        if key not in self._cache:
            row = self.features(job.model, job.batch_size, gpu_type)
            values = {t: float(predict_target(self.loaded.models[t], row, TARGET_SPECS[t])[0]) for t in TARGET_SPECS}
            self._cache[key] = Prediction(util=min(max(values["util"] / 100.0, 0.0), 1.0), mem_mib=values["mem"],
                                          iter_time_s=values["iter_time"])
        return self._cache[key]

    def describe(self) -> dict[str, object]:
        sidecar = self.loaded.sidecar
        return {
            "name": self.name,
            "path": str(self.loaded.path),
            "precision": self.precision,
            "training_data": sidecar.get("training_data"),
            "feature_schema": sidecar.get("feature_schema"),
            "targets": {t: {k: v for k, v in e.items() if k != "file"} for t, e in sidecar["targets"].items()},
            "created": sidecar.get("created"),
            "library_versions": sidecar.get("library_versions"),
        }
