"""The ``measured`` truth model: our own solo and co-location measurements as the simulated world.

Solo behaviour comes straight from the solo dataset (mean over ok repeats). A co-located set that
was measured returns its measured normalized throughputs; any other set uses a hinge curve fitted
on the measured members (member slowdown vs summed solo utilization of its set), whose grouped
K-fold held-out error is reported in :meth:`MeasuredTruth.describe`; an unmeasured set of 3+ gets at most
the summed throughput of its best measured pair (``horus.truth.setcap``). Iteration times are scaled to
other GPU types by ``measured_speed / gpu_type.speed`` (both relative to a V100).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from horus.cluster import GPUType
from horus.colocation.analysis import KneeFit, fit_knee
from horus.errors import HorusInputError
from horus.hashing import sha256_file
from horus.jobs import job_type_key
from horus.truth.base import TRUTH_MODELS, SoloTruth, TruthModel
from horus.truth.setcap import PairSumCap

MIN_NORMALIZED = 0.02  # floor of the fitted curve: a co-located job always makes some progress




class MeasuredTruth(TruthModel):
    name = "measured"
    memory_measured = True

    def __init__(self, solo_path: str | Path, coloc_path: str | Path | None = None, precision: str = "fp32",
                 measured_speed: float = 1.0, folds: int = 5, seed: int = 0) -> None:
        from horus.colocation.datasets import load_coloc
        from horus.profiling.store import read_table

        self.solo_path, self.coloc_path = Path(solo_path), Path(coloc_path) if coloc_path else None
        self.precision, self.measured_speed = precision, measured_speed
        solo = read_table(self.solo_path, ["model", "batch_size", "precision", "status", "gpu_util_mean",
                                           "torch_max_reserved_mib", "iter_time_s_mean"])
        ok = solo[(solo["status"] == "ok") & (solo["precision"] == precision)]
        means = ok.groupby(["model", "batch_size"])[["gpu_util_mean", "torch_max_reserved_mib",
                                                      "iter_time_s_mean"]].mean()
        incomplete = means[~np.isfinite(means.to_numpy(dtype=float)).all(axis=1)]
        if len(incomplete):
            (m, b), row = next(incomplete.iterrows())
            missing = ", ".join(c for c in means.columns if not np.isfinite(float(row[c])))
            raise HorusInputError(str(self.solo_path), f"{m} batch {int(b)} ({precision}): no finite {missing} in "
                                                       f"its ok rows")
        self._solo = {job_type_key(m, int(b)): SoloTruth(r.gpu_util_mean / 100.0, r.torch_max_reserved_mib,
                                                         r.iter_time_s_mean) for (m, b), r in means.iterrows()}
        if not self._solo:
            raise HorusInputError(str(self.solo_path), f"no ok {precision} solo rows")
        self._sets: dict[tuple[str, ...], dict[str, float]] = {}
        self._fit: KneeFit | None = None
        self._heldout: dict[str, float] = {}
        if self.coloc_path is not None:
            self._load_sets(load_coloc(self.coloc_path))
            self._fit_curve(folds, seed)
        self._cap = PairSumCap({key: sum(values[jt] for jt in key)  # (a, a) counts a's value twice
                                for key, values in self._sets.items() if len(key) == 2})

    # -- measured sets -------------------------------------------------------------------------
    def _load_sets(self, coloc: Any) -> None:
        if "precision" in coloc.columns:  # whole sets only: a mixed fp32/AMP pair is not a one-job "set"
            same = coloc.groupby("set_id")["precision"].transform(lambda p: (p == self.precision).all())
            coloc = coloc[same]
        ok_sets = coloc.groupby(["set_id", "repeat"])["status"].transform(lambda s: (s == "ok").all())
        for set_id, group in coloc[ok_sets].groupby("set_id"):
            types = [job_type_key(m, int(b)) for m, b in zip(group["model"], group["batch_size"])]
            unmeasured = sorted({t for t in types if t not in self._solo})
            if unmeasured:  # its normalized throughput would be relative to a solo run the world does not have
                raise HorusInputError(str(self.coloc_path), f"set {set_id!r}: {', '.join(unmeasured)} has no ok "
                                                            f"{self.precision} solo measurement in {self.solo_path}")
            first = group[group["repeat"] == group["repeat"].min()]
            key = tuple(sorted(job_type_key(m, int(b)) for m, b in zip(first["model"], first["batch_size"])))
            per_type: dict[str, list[float]] = {}
            for jt, value in zip(types, group["normalized_throughput"]):
                per_type.setdefault(jt, []).append(float(value))
            self._sets[key] = {jt: float(np.mean(v)) for jt, v in per_type.items()}

    def _member_points(self, keys: Sequence[tuple[str, ...]]) -> tuple[np.ndarray, np.ndarray]:
        x, y = [], []
        for key in keys:
            summed = self._summed_util(key)
            for jt in key:
                x.append(summed)
                y.append(1.0 - self._sets[key][jt])
        return np.array(x), np.array(y)

    def _fit_curve(self, folds: int, seed: int) -> None:
        keys = [k for k in self._sets if all(jt in self._solo for jt in k)]
        if len(keys) < 4:
            return
        x, y = self._member_points(keys)
        self._fit = fit_knee(x, y)
        folds = min(folds, len(keys))
        order = np.random.default_rng(seed).permutation(len(keys))
        errors = []
        for f in range(folds):
            test = [keys[i] for i in order[f::folds]]
            train = [keys[i] for i in order if keys[i] not in test]
            tx, ty = self._member_points(train)
            if len(tx) < 4:
                continue
            fit = fit_knee(tx, ty)
            vx, vy = self._member_points(test)
            errors.extend(np.abs(self._curve(fit, vx) - (1.0 - vy)))
        if errors:
            self._heldout = {"heldout_mae_normalized_throughput": float(np.mean(errors)), "folds": folds,
                             "heldout_points": len(errors)}

    @staticmethod
    def _curve(fit: KneeFit, summed: np.ndarray) -> np.ndarray:
        return np.clip(1.0 - fit.predict(summed), MIN_NORMALIZED, 1.0)

    def _summed_util(self, job_types: Sequence[str]) -> float:
        return float(sum(self._solo_of(jt).util for jt in job_types))

    def _solo_of(self, job_type: str) -> SoloTruth:
        try:
            return self._solo[job_type]
        except KeyError:
            raise HorusInputError(str(self.solo_path), f"no ok {self.precision} solo measurement of {job_type!r}") \
                from None

    # -- TruthModel ----------------------------------------------------------------------------
    def solo(self, job_type: str, gpu_type: GPUType) -> SoloTruth:
        s = self._solo_of(job_type)
        return SoloTruth(s.util, s.mem_mib, s.iter_time_s * self.measured_speed / gpu_type.speed)

    def colocated_throughput(self, job_types: Sequence[str], gpu_type: GPUType) -> list[float]:
        if len(job_types) == 1:
            return [1.0]
        measured = self._sets.get(tuple(sorted(job_types)))
        if measured is not None:
            return [measured[jt] for jt in job_types]
        if self._fit is None:
            raise HorusInputError(str(self.coloc_path or self.solo_path),
                                  f"set {list(job_types)} was not measured and too few sets to fit a curve")
        value = float(self._curve(self._fit, np.array([self._summed_util(job_types)]))[0])
        return self._cap.apply(job_types, [value] * len(job_types))

    def job_types(self) -> list[str]:
        return sorted(self._solo)

    def describe(self) -> dict[str, object]:
        return {
            "name": self.name, "solo_path": str(self.solo_path), "solo_sha256": sha256_file(self.solo_path),
            "coloc_path": str(self.coloc_path) if self.coloc_path else None,
            "coloc_sha256": sha256_file(self.coloc_path) if self.coloc_path else None,
            "precision": self.precision, "measured_speed": self.measured_speed,
            "n_job_types": len(self._solo), "n_measured_sets": len(self._sets),
            "fit": None if self._fit is None else {k: getattr(self._fit, k) for k in (
                "knee", "intercept", "slope_below", "slope_above", "r2", "rmse", "n")},
            **self._heldout,
            "aggregate_cap": self._cap.describe(),
        }


@TRUTH_MODELS.register("measured")
def measured_truth(solo_path: str | Path, coloc_path: str | Path | None = None, **kwargs: Any) -> MeasuredTruth:
    """Factory for ``TRUTH_MODELS.create("measured", solo_path=..., coloc_path=...)``."""
    return MeasuredTruth(solo_path, coloc_path, **kwargs)
