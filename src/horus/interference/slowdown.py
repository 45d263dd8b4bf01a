"""What placement policies need from an interference model: predicted throughput lost by co-location.

``SlowdownEstimator`` wraps any ``InterferenceModel`` with a cache. ``estimator_for`` loads a trained
model directory, or, when none is given, falls back to the *unfitted* summed-utilization rule
(``min(1, 1 / summed predicted util)``, see ``summed_util.py``) on the scheduler's own solo
predictor: no data, no training, works on a fresh machine.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from horus.cluster import GPUType
from horus.interference.base import InterferenceModel
from horus.interference.data import JobFeatures
from horus.predict.base import Predictor


class SlowdownEstimator:
    """Cached co-location predictions of one interference model."""

    def __init__(self, model: InterferenceModel, source: str) -> None:
        self.model = model
        self.source = source
        self._cache: dict[tuple[str, tuple[str, ...]], list[float]] = {}
        self._loss_cache: dict[tuple[str, tuple[str, ...], str], tuple[float, float]] = {}

    def throughputs(self, job_types: Sequence[str], gpu: GPUType) -> list[float]:
        """Predicted normalized throughput of each job of a set on one GPU (cached per sorted set)."""
        if len(job_types) <= 1:
            return [1.0] * len(job_types)
        order = sorted(range(len(job_types)), key=lambda i: job_types[i])
        key = (gpu.name, tuple(job_types[i] for i in order))
        values = self._cache.get(key)
        if values is None:
            values = self.model.predict(list(key[1]), gpu)
            self._cache[key] = values
        out = [0.0] * len(job_types)
        for pos, i in enumerate(order):
            out[i] = values[pos]
        return out

    def added_loss(self, job_type: str, residents: Sequence[str], gpu: GPUType) -> tuple[float, float]:
        """(total normalized throughput lost if ``job_type`` joins ``residents``, the job's own throughput).

        Loss = (1 - own throughput) + the residents' drop; 0 on an empty GPU. Cached per
        (job type, residents in the given order, GPU type name).
        """
        if not residents:
            return 0.0, 1.0
        key = (job_type, tuple(residents), gpu.name)
        found = self._loss_cache.get(key)
        if found is None:
            after = self.throughputs([job_type, *residents], gpu)
            before = self.throughputs(list(residents), gpu)
            found = (1.0 - after[0]) + sum(b - a for b, a in zip(before, after[1:])), after[0]
            if len(self._loss_cache) >= 1_000_000:
                self._loss_cache.clear()
            self._loss_cache[key] = found
        return found

    def describe(self) -> dict[str, object]:
        return {"interference_model": self.model.name, "interference_source": self.source}


FALLBACK_NOTE = "no trained model given: unfitted summed-utilization rule min(1, 1/sum predicted util)"


def estimator_for(model_dir: str | Path | None, predictor: Predictor,
                  model: InterferenceModel | None = None) -> SlowdownEstimator:
    """``model`` if given, else the trained model in ``model_dir``, else the summed-utilization fallback."""
    if model is not None:
        return SlowdownEstimator(model, f"in-memory {model.name} model")
    if model_dir:
        from horus.interference import models  # noqa: F401  (pickled classes must be importable)
        from horus.interference.persistence import load_model

        return SlowdownEstimator(load_model(model_dir), str(model_dir))
    from horus.interference.summed_util import SummedUtilization

    return SlowdownEstimator(SummedUtilization(JobFeatures(predictor=predictor), theta=1.0, gamma=1.0), FALLBACK_NOTE)
