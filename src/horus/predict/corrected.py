"""Online correction: observed solo behaviour of earlier jobs corrects later predictions (docs/predictors.md,
"Online correction").

An ``Observation`` is what telemetry saw of one job on one GPU type, for one quantity (``util``, ``mem_mib`` or
``iter_time_s``), beside what the *base* predictor said. Its residual is the log ratio
``r = log(observed / predicted)`` (both floored at ``FLOORS``, clipped to +-``MAX_LOG_RATIO``). ``Corrections``
turns residuals into a multiplicative factor ``exp(b)`` per (job type, GPU type, quantity) by three levels of
shrinkage, each level's estimate pulled towards the level above with a fixed prior strength (a pseudo-count):

* global, per quantity:        ``b0 = sum_cells m_c / (C + K_GLOBAL)``           (towards 0: no correction)
* same GPU type, per quantity: ``bg = (sum_{cells on g} m_c + K_GPU b0) / (C_g + K_GPU)``
* the job type on that GPU:    ``bt = (sum_i r_i + K_TYPE bg) / (n + K_TYPE)``

where a *cell* is one (job type, GPU type) with observations of the quantity, ``m_c`` its mean residual (every type
counts once, however often it ran), ``C`` and ``C_g`` the number of cells (all, on ``g``) and ``n`` the type's own
observations on ``g`` (its latest ``WINDOW``). Repeated runs of one job type on one GPU type differ by a few percent
while predictors err by tens of percent, so one observation of the exact type carries most of the weight
(``K_TYPE = 0.25``: 0.8 after one run, 0.94 after four); another type's error on the same GPU says less about a new
type (``K_GPU = 2``: one other type moves a new type's prediction a third of the way, four types two thirds).

Each observation has a ``key`` (the job id): a newer observation with the same key and quantity replaces the older
one, so a running job refines its own observation instead of counting once per sample. Deterministic; no torch.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass

from horus.cluster import GPUType
from horus.jobs import JobSpec
from horus.predict.base import Prediction, Predictor

QUANTITIES = ("util", "mem_mib", "iter_time_s")
FLOORS = {"util": 0.01, "mem_mib": 1.0, "iter_time_s": 1e-6}  # below these a value is taken as the floor
MAX_LOG_RATIO = math.log(100.0)  # a residual counts at most a factor of 100 either way
K_TYPE = 0.25
K_GPU = 2.0
K_GLOBAL = 4.0
WINDOW = 32  # latest observations kept per (job type, GPU type, quantity)


@dataclass(frozen=True)
class Observation:
    """Telemetry of one job (``key``) on one GPU type for one quantity, beside the base prediction."""

    key: str
    job_type: str
    gpu_type: str
    quantity: str
    predicted: float  # the base (uncorrected) predictor's value
    observed: float

    def residual(self) -> float:
        floor = FLOORS[self.quantity]
        r = math.log(max(self.observed, floor) / max(self.predicted, floor))
        return min(MAX_LOG_RATIO, max(-MAX_LOG_RATIO, r))


@dataclass(frozen=True)
class Correction:
    """The factor applied to one quantity, and where it came from: ``type`` (the job type's own observations on
    that GPU type), ``gpu`` (other types on that GPU type), ``global`` (other GPU types) or ``none``."""

    factor: float
    source: str
    observations: int  # observations of the type (source ``type``) or cells (``gpu``, ``global``) behind it

    def as_dict(self) -> dict[str, object]:
        return {"factor": self.factor, "source": self.source, "observations": self.observations}


NO_CORRECTION = Correction(1.0, "none", 0)


class Corrections:
    """Observations in, per (job type, GPU type, quantity) correction factors out (see the module docstring).
    ``version`` grows with every change, so a cache of corrected predictions knows when it is stale."""

    def __init__(self, k_type: float = K_TYPE, k_gpu: float = K_GPU, k_global: float = K_GLOBAL,
                 window: int = WINDOW) -> None:
        if min(k_type, k_gpu, k_global) < 0 or window < 1:
            raise ValueError("prior strengths must be >= 0 and the window >= 1")
        self.k_type, self.k_gpu, self.k_global, self.window = k_type, k_gpu, k_global, window
        self.version = 0
        # (job type, GPU type, quantity) -> key -> residual, oldest first
        self._cells: dict[tuple[str, str, str], OrderedDict[str, float]] = {}
        self._where: dict[tuple[str, str], tuple[str, str, str]] = {}  # (key, quantity) -> its cell
        self._levels: dict[str, tuple[float, dict[str, tuple[float, int]], int]] | None = None
        self._memo: dict[tuple[str, str, str], Correction] = {}

    def __len__(self) -> int:
        return sum(len(c) for c in self._cells.values())

    def observe(self, obs: Observation) -> None:
        """Add ``obs`` (replacing an earlier observation with the same key and quantity)."""
        if obs.quantity not in QUANTITIES:
            raise ValueError(f"quantity: expected one of {', '.join(QUANTITIES)}, got {obs.quantity!r}")
        if not (math.isfinite(obs.predicted) and math.isfinite(obs.observed)):
            return
        old = self._where.get((obs.key, obs.quantity))
        if old is not None:
            self._cells[old].pop(obs.key, None)
            if not self._cells[old]:
                del self._cells[old]
        cell = (obs.job_type, obs.gpu_type, obs.quantity)
        values = self._cells.setdefault(cell, OrderedDict())
        values[obs.key] = obs.residual()
        self._where[(obs.key, obs.quantity)] = cell
        while len(values) > self.window:
            gone, _ = values.popitem(last=False)
            self._where.pop((gone, obs.quantity), None)
        self.version += 1
        self._levels = None
        self._memo.clear()

    def _compute_levels(self) -> dict[str, tuple[float, dict[str, tuple[float, int]], int]]:
        """Per quantity: (global bias, {GPU type: (bias, cells)}, cells)."""
        sums: dict[str, dict[str, list[float]]] = {q: {} for q in QUANTITIES}
        for (_, gpu, q), values in self._cells.items():
            sums[q].setdefault(gpu, []).append(sum(values.values()) / len(values))
        levels = {}
        for q in QUANTITIES:
            means = [m for per_gpu in sums[q].values() for m in per_gpu]
            b0 = sum(means) / (len(means) + self.k_global) if means else 0.0
            per = {g: ((sum(ms) + self.k_gpu * b0) / (len(ms) + self.k_gpu), len(ms)) for g, ms in sums[q].items()}
            levels[q] = (b0, per, len(means))
        return levels

    def correction(self, job_type: str, gpu_type: str, quantity: str) -> Correction:
        """The factor for ``quantity`` of ``job_type`` on ``gpu_type``."""
        memo_key = (job_type, gpu_type, quantity)
        found = self._memo.get(memo_key)
        if found is not None:
            return found
        if self._levels is None:
            self._levels = self._compute_levels()
        b0, per_gpu, cells = self._levels[quantity]
        bg, gpu_cells = per_gpu.get(gpu_type, (b0, 0))
        values = self._cells.get(memo_key)
        if values:
            b = (sum(values.values()) + self.k_type * bg) / (len(values) + self.k_type)
            found = Correction(math.exp(b), "type", len(values))
        elif gpu_cells:
            found = Correction(math.exp(bg), "gpu", gpu_cells)
        elif cells:
            found = Correction(math.exp(b0), "global", cells)
        else:
            found = NO_CORRECTION
        self._memo[memo_key] = found
        return found

    def corrections(self, job_type: str, gpu_type: str) -> dict[str, Correction]:
        return {q: self.correction(job_type, gpu_type, q) for q in QUANTITIES}

    def describe(self) -> dict[str, object]:
        return {"k_type": self.k_type, "k_gpu": self.k_gpu, "k_global": self.k_global, "window": self.window,
                "observations": len(self)}


def apply(raw: Prediction, corrections: dict[str, Correction]) -> Prediction:
    """``raw`` times each quantity's factor (a corrected utilization stays within [``FLOORS["util"]``, 1]); a
    quantity without a correction keeps its raw value exactly."""
    util = raw.util
    if corrections["util"].factor != 1.0:
        util = min(1.0, max(FLOORS["util"], util * corrections["util"].factor))
    return Prediction(util=util, mem_mib=raw.mem_mib * corrections["mem_mib"].factor,
                      iter_time_s=raw.iter_time_s * corrections["iter_time_s"].factor)


class CorrectedPredictor(Predictor):
    """``base``'s prediction times the online corrections (``Corrections``). A job without a model has no type to
    correct: it keeps ``base``'s prediction. ``explain`` gives the corrected and the raw prediction with the
    factors, for views that show both. Base predictions are cached per (job type, GPU type)."""

    def __init__(self, base: Predictor, corrections: Corrections | None = None) -> None:
        self.base = base
        self.corrections = corrections if corrections is not None else Corrections()
        self.name = base.name
        self._raw: dict[tuple[str, str], Prediction] = {}

    def raw(self, job: JobSpec, gpu_type: GPUType) -> Prediction:
        key = (job.job_type, gpu_type.name)
        found = self._raw.get(key)
        if found is None:
            found = self._raw[key] = self.base.predict(job, gpu_type)
        return found

    def explain(self, job: JobSpec, gpu_type: GPUType) -> tuple[Prediction, Prediction, dict[str, Correction]]:
        """(corrected, raw, factor per quantity)."""
        raw = self.raw(job, gpu_type)
        if not job.model:
            return raw, raw, {q: NO_CORRECTION for q in QUANTITIES}
        found = self.corrections.corrections(job.job_type, gpu_type.name)
        return apply(raw, found), raw, found

    def predict(self, job: JobSpec, gpu_type: GPUType) -> Prediction:
        return self.explain(job, gpu_type)[0]

    def describe(self) -> dict[str, object]:
        return {**self.base.describe(), "online_correction": self.corrections.describe()}
