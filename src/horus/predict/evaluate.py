"""Held-out evaluation of solo predictors on the public measurements (``horus predictor evaluate --reference``).

Protocols (every candidate is re-fitted on the training side of each split, then scored on the held-out side):

* ``gpu-out`` (the headline): each GPU type held out in turn; the physical predictor then uses the constants of
  uncalibrated types (its architecture's calibrated types for the device-side constants, the geometric mean
  over the training types for the rest), i.e. a GPU never seen in calibration.
* ``dataset-out``: each dataset (gavel, zeus, pollux, gpumemnet) held out in turn: calibrated on the others.
* ``family-out``: each model family (cnn, transformer, recurrent, recommendation, gan, rl; GPUMemNet MLPs by
  architecture: mlp-pyramid, mlp-uniform, mlp-bottleneck, mlp-gradual) held out in turn.

A fitted candidate is not scored on a target its training side has no measurement of (GPUMemNet is the only
source of memory and utilization, on one GPU type: held out by dataset or by GPU type those are undefined);
``undefined`` lists such (protocol, held-out group, target) cells instead of a number.

Candidates: ``physical`` (calibrated per split, on the measurement's own workload: the Python API),
``physical-cli`` (the same constants through ``PhysicalPredictor.predict`` on the ``JobSpec`` that ``horus
predict`` builds from the row's model, batch, input size, precision and optimizer: the CLI path),
``physical-cli-bare`` (the same, for a job that states nothing: catalog input size, default precision tf32,
default optimizer adam), ``physical-prior`` (the model with its uncalibrated prior constants, no fitting),
``analytic`` (the previous default belief, fixed), ``mean`` (training mean; geometric
for time and memory), ``log-flops`` (least squares of ln target, or utilization, on ln training FLOPs per
iteration) and, for memory, ``horus-formula`` (``horus.truth.memory``: weights + gradients + optimizer state +
saved activations + 750 MiB).

Metrics on the pooled held-out predictions, per dataset and over all: iteration time and memory MAPE (%),
utilization MAE (points); Spearman rank correlation for all three.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from horus.cluster import GPUType
from horus.gpu_types import PRESETS, gpu_spec
from horus.predict.calibrate import calibrate
from horus.predict.measurements import Measurement
from horus.predict.physical import Estimate, PhysicalParams, PhysicalPredictor, estimate
from horus.truth.memory import CUDA_CONTEXT_MIB

TARGETS = ("iter_time", "util", "mem")
PROTOCOLS = ("gpu-out", "dataset-out", "family-out")
CANDIDATES = ("physical", "physical-cli", "physical-cli-bare", "physical-prior", "analytic", "mean", "log-flops",
              "horus-formula")
PHYSICAL = ("physical", "physical-cli", "physical-cli-bare")  # calibrated per split
FIXED = ("physical-prior", "analytic", "horus-formula")  # not fitted: scored wherever they apply
ERROR_METRIC = {"iter_time": "mape_pct", "util": "mae_points", "mem": "mape_pct"}
_ATTR = {"iter_time": "iter_time_s", "util": "util", "mem": "mem_mib"}
_LOG_TARGET = {"iter_time": True, "util": False, "mem": True}
_HORUS_OPT_COPIES = {"sgd": 0.0, "momentum": 1.0, "adam": 2.0, "adamw": 2.0, "adadelta": 2.0}


def target_of(m: Measurement, target: str) -> float | None:
    return getattr(m, _ATTR[target])


def _flops(m: Measurement) -> float:
    return max(1.0, m.workload.train_flops_per_sample * m.batch)


def _analytic(m: Measurement) -> dict[str, float]:
    """The ``analytic`` predictor's formulas (horus.predict.analytic) on a measurement's workload."""
    from horus.predict.analytic import ASSUMED_V100_FLOPS, LAUNCH_OVERHEAD_S, UTIL_MAX, UTIL_MIN, UTIL_WORK_SCALE_S

    speed = PRESETS[m.gpu].speed if m.gpu in PRESETS else 1.0
    busy = _flops(m) / (speed * ASSUMED_V100_FLOPS)
    util = min(UTIL_MAX, max(UTIL_MIN, 1.0 - math.exp(-busy / UTIL_WORK_SCALE_S)))
    return {"iter_time": busy + LAUNCH_OVERHEAD_S, "util": util, "mem": _horus_formula(m, "adam")}


def _horus_formula(m: Measurement, optimizer: str | None = None) -> float:
    w = m.workload
    weights = w.params * 4 / 2**20
    copies = _HORUS_OPT_COPIES[optimizer or m.optimizer]
    return weights * (2 + copies) + w.activation_bytes_per_sample * m.batch / 2**20 + CUDA_CONTEXT_MIB


Fitted = Callable[[Measurement], float]


_MEMO: dict[tuple[int, int], tuple[Measurement, PhysicalParams, Estimate]] = {}


def _estimate(m: Measurement, params: PhysicalParams) -> Estimate:
    """``estimate`` of a measurement's own workload (the API path), memoised per (row, constants)."""
    key = (id(m), id(params))
    hit = _MEMO.get(key)
    if hit is None or hit[0] is not m or hit[1] is not params:
        if len(_MEMO) > 100000:
            _MEMO.clear()
        hit = _MEMO[key] = (m, params, estimate(m.workload, m.batch, gpu_spec(m.gpu), params, m.optimizer,
                                                precision=m.precision))
    return hit[2]


def _gpu_type(name: str) -> GPUType:
    """The GPU type ``horus predict --gpu NAME`` resolves (a preset, else the data-sheet spec's memory)."""
    return PRESETS[name] if name in PRESETS else GPUType(name, int(gpu_spec(name).memory_gib * 1024), 1.0)


def fit_candidate(name: str, target: str, train: Sequence[Measurement], seed: int = 0,
                  physical: PhysicalParams | None = None) -> Fitted | None:
    """A predictor of ``target`` fitted on ``train``; None when the candidate does not apply."""
    ys = [(m, target_of(m, target)) for m in train if target_of(m, target) is not None]
    if name in (*PHYSICAL, "physical-prior"):
        params = physical if physical is not None else (
            PhysicalParams() if name == "physical-prior" else calibrate(train, seed))
        attr = _ATTR[target]
        if name in ("physical-cli", "physical-cli-bare"):
            predictor = PhysicalPredictor(params)
            stated = name == "physical-cli"
            return lambda m: (getattr(predictor.predict(m.job(stated), _gpu_type(m.gpu)), attr)
                              if m.model is not None else math.nan)
        return lambda m: getattr(_estimate(m, params), attr)
    if name == "analytic":
        return lambda m: _analytic(m)[target]
    if name == "horus-formula":
        return (lambda m: _horus_formula(m)) if target == "mem" else None
    if not ys:
        return None
    y = np.array([v for _, v in ys], dtype=float)
    log = _LOG_TARGET[target]
    yt = np.log(y) if log else y
    if name == "mean":
        c = float(np.mean(yt))
        value = math.exp(c) if log else c
        return lambda m: value
    if name == "log-flops":
        x = np.log([_flops(m) for m, _ in ys])
        slope, icept = np.polyfit(x, yt, 1) if np.ptp(x) > 0 else (0.0, float(np.mean(yt)))
        if log:
            return lambda m: math.exp(icept + slope * math.log(_flops(m)))
        return lambda m: float(np.clip(icept + slope * math.log(_flops(m)), 0.0, 1.0))
    raise ValueError(f"unknown candidate {name!r}")


@dataclass(frozen=True)
class Score:
    dataset: str
    target: str
    protocol: str
    candidate: str
    n: int
    error: float  # ERROR_METRIC[target]
    spearman: float

    def as_dict(self) -> dict[str, object]:
        return {"dataset": self.dataset, "target": self.target, "protocol": self.protocol,
                "candidate": self.candidate, "n": self.n, ERROR_METRIC[self.target]: self.error,
                "spearman": self.spearman}


def error(target: str, y: np.ndarray, p: np.ndarray) -> float:
    if target == "util":
        return float(np.mean(np.abs(p - y)) * 100.0)
    return float(np.mean(np.abs(p / y - 1.0)) * 100.0)


def _groups(m: Measurement, protocol: str) -> str:
    return {"family-out": m.family, "gpu-out": m.gpu, "dataset-out": m.dataset}[protocol]


def undefined(rows: Sequence[Measurement], protocol: str) -> list[tuple[str, str]]:
    """(held-out group, target) of ``protocol`` where the held-out side has measurements of the target and the
    training side has none: fitted candidates are not scored there."""
    out = []
    for group in sorted({_groups(m, protocol) for m in rows}):
        for t in TARGETS:
            test = any(_groups(m, protocol) == group and target_of(m, t) is not None for m in rows)
            train = any(_groups(m, protocol) != group and target_of(m, t) is not None for m in rows)
            if test and not train:
                out.append((group, t))
    return out


def held_out_predictions(rows: Sequence[Measurement], protocol: str, candidates: Sequence[str], seed: int = 0,
                         progress: Callable[[str], None] | None = None) -> dict[tuple[str, str], np.ndarray]:
    """(candidate, target) -> prediction for every row (nan where the candidate does not apply)."""
    out = {(c, t): np.full(len(rows), np.nan) for c in candidates for t in TARGETS}
    for group in sorted({_groups(m, protocol) for m in rows}):
        test = [i for i, m in enumerate(rows) if _groups(m, protocol) == group]
        train = [m for m in rows if _groups(m, protocol) != group]
        if progress:
            progress(f"{protocol}: {group} ({len(test)} held out)")
        physical = calibrate(train, seed) if any(c in PHYSICAL for c in candidates) else None
        for c in candidates:
            for t in TARGETS:
                if not any(target_of(rows[i], t) is not None for i in test):
                    continue
                if c not in FIXED and not any(target_of(m, t) is not None for m in train):
                    continue  # nothing to fit this target on: undefined, not a number from the priors
                f = fit_candidate(c, t, train, seed, physical if c in PHYSICAL else None)
                if f is None:
                    continue
                for i in test:
                    if target_of(rows[i], t) is not None:
                        out[(c, t)][i] = f(rows[i])
    return out


def evaluate(rows: Sequence[Measurement], protocols: Sequence[str] = PROTOCOLS,
             candidates: Sequence[str] = CANDIDATES, seed: int = 0,
             progress: Callable[[str], None] | None = None) -> list[Score]:
    """Scores of every (dataset or ``all``, target, protocol, candidate) with held-out rows."""
    scores: list[Score] = []
    datasets = sorted({m.dataset for m in rows})
    for protocol in protocols:
        preds = held_out_predictions(rows, protocol, candidates, seed, progress)
        for t in TARGETS:
            y_all = np.array([target_of(m, t) if target_of(m, t) is not None else np.nan for m in rows], dtype=float)
            for ds in [*datasets, "all"]:
                sel = ~np.isnan(y_all) & np.array([ds in ("all", m.dataset) for m in rows])
                if ds == "all" and len({m.dataset for m, s in zip(rows, sel) if s}) < 2:
                    continue
                for c in candidates:
                    p = preds[(c, t)]
                    ok = sel & ~np.isnan(p)
                    if ok.sum() == 0:
                        continue
                    rho = _spearman(y_all[ok], p[ok]) if ok.sum() > 2 else float("nan")
                    scores.append(Score(ds, t, protocol, c, int(ok.sum()), error(t, y_all[ok], p[ok]), float(rho)))
    return scores


def format_scores(scores: Sequence[Score]) -> str:
    header = (f"{'dataset':<10}{'target':<10}{'protocol':<12}{'candidate':<18}{'n':>6}{'error':>9}  "
              f"{'metric':<11}{'spearman':>8}")
    lines = [header, "-" * len(header)]
    for s in scores:
        lines.append(f"{s.dataset:<10}{s.target:<10}{s.protocol:<12}{s.candidate:<18}{s.n:>6}{s.error:>9.2f}  "
                     f"{ERROR_METRIC[s.target]:<11}{s.spearman:>8.3f}")
    return "\n".join(lines)


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation (scipy, imported when first needed: predictors are loaded without it)."""
    from scipy.stats import spearmanr

    return float(spearmanr(a, b).statistic)
