"""``gavel`` truth: Gavel's measured throughputs (OSDI 2020) as the simulated world.

* solo iteration time = 1 / measured isolated steps/s of the GPU type;
* co-located pairs measured on that GPU type: the measured normalized throughputs, exactly;
* unmeasured pairs (recorded as zeros in the file) and sets of 3+ jobs: the slowdown model of
  ``horus.truth.fit`` fitted to that GPU type's measured pairs; a set of 3+ gets at most the summed
  throughput of its best measured pair (``horus.truth.setcap``);
* solo utilization: the fitted latent per-type utilization (an *interference intensity* inferred
  from the pair matrix, clipped to [0.01, 1]; Gavel has no utilization measurements);
* memory: analytic (``horus.truth.memory``); Gavel has no memory figures.

Horus GPU type names map to Gavel keys by ``GAVEL_GPU_KEYS``; any other GPU type uses the V100 table
with iteration times divided by ``GPUType.speed`` (said so in ``describe()``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

from horus.catalog import model_info
from horus.cluster import GPUType
from horus.errors import HorusInputError
from horus.jobs import parse_job_type
from horus.sources.gavel import GavelThroughputs, load_gavel
from horus.truth.base import TRUTH_MODELS, SoloTruth, TruthModel
from horus.truth.fit import FitResult, fit_slowdown_model, normalized_throughputs
from horus.truth.memory import training_memory_mib
from horus.truth.setcap import PairSumCap

GAVEL_GPU_KEYS: dict[str, str] = {"V100": "v100", "P100": "p100", "K80": "k80"}
FALLBACK_GPU = "v100"
PATH_ENV = "HORUS_GAVEL_THROUGHPUTS"
DEFAULT_RELATIVE_PATH = Path("..") / "shared" / "data" / "gavel" / "simulation_throughputs.json"


@lru_cache(maxsize=32)
def _cached_fit(path: str, gpu: str, seed: int, evaluate: bool) -> FitResult:
    """Fits are pure functions of (file, GPU, seed): share them across truth instances."""
    return fit_slowdown_model(load_gavel(path, gpu), seed, evaluate=evaluate)


def _resolve_path(path: str | Path | None) -> Path:
    if path is not None:
        return Path(path)
    if os.environ.get(PATH_ENV):
        return Path(os.environ[PATH_ENV])
    if DEFAULT_RELATIVE_PATH.exists():
        return DEFAULT_RELATIVE_PATH
    raise HorusInputError("truth 'gavel'", f"needs path= to Gavel's simulation_throughputs.json (or set {PATH_ENV})")


@TRUTH_MODELS.register("gavel")
class GavelTruth(TruthModel):
    """Measured Gavel pairs + fitted slowdown model for what was not measured."""

    name = "gavel"

    def __init__(self, path: str | Path | None = None, gpus: Sequence[str] = ("v100", "p100", "k80"),
                 seed: int = 0) -> None:
        self.path = _resolve_path(path)
        self.seed = seed
        self.tables: dict[str, GavelThroughputs] = {g: load_gavel(self.path, g) for g in gpus}
        if FALLBACK_GPU not in self.tables:
            self.tables[FALLBACK_GPU] = load_gavel(self.path, FALLBACK_GPU)
        self.fits: dict[str, FitResult] = {g: _cached_fit(str(self.path), g, seed, False) for g in self.tables}
        self.caps: dict[str, PairSumCap] = {g: _pair_sum_cap(t) for g, t in self.tables.items()}
        self._solo: dict[tuple[str, str], SoloTruth] = {}
        self._coloc: dict[tuple[str, tuple[str, ...]], dict[str, float]] = {}

    def _gavel_key(self, gpu_type: GPUType) -> tuple[str, float]:
        """(Gavel table key, iteration-time divisor) for a Horus GPU type."""
        key = GAVEL_GPU_KEYS.get(gpu_type.name, gpu_type.name.lower())
        if key in self.tables:
            return key, 1.0
        return FALLBACK_GPU, gpu_type.speed

    def _table(self, job_type: str, gpu_type: GPUType) -> tuple[GavelThroughputs, float]:
        key, divisor = self._gavel_key(gpu_type)
        table = self.tables[key]
        if job_type not in table.solo:
            raise HorusInputError("truth 'gavel'", f"job type {job_type!r} not measured by Gavel; "
                                                   f"known: {', '.join(table.job_types())}")
        return table, divisor

    def solo(self, job_type: str, gpu_type: GPUType) -> SoloTruth:
        cache_key = (job_type, gpu_type.name)
        cached = self._solo.get(cache_key)
        if cached is not None:
            return cached
        table, divisor = self._table(job_type, gpu_type)
        model, batch = parse_job_type(job_type)
        util = min(1.0, max(0.01, self.fits[table.gpu].utils[job_type]))
        steps = table.solo[job_type]
        if steps <= 0:
            raise HorusInputError(str(self.path), f"{table.gpu}/{job_type}: isolated throughput is zero")
        result = SoloTruth(util=util, mem_mib=training_memory_mib(model_info(model), batch),
                           iter_time_s=1.0 / steps / divisor)
        self._solo[cache_key] = result
        return result

    def _set_values(self, ordered: tuple[str, ...], gpu_type: GPUType) -> dict[str, float]:
        table, _ = self._table(ordered[0], gpu_type)
        for t in ordered[1:]:
            self._table(t, gpu_type)
        if len(ordered) == 2:
            a, b = ordered
            measured = table.normalized_pair(a, b)
            if measured is None:
                reverse = table.normalized_pair(b, a)
                measured = None if reverse is None else (reverse[1], reverse[0])
            if measured is not None:
                return {a: measured[0], b: measured[1]} if a != b else {a: measured[0]}
        fit = self.fits[table.gpu]
        utils = [min(1.0, max(0.01, fit.utils[t])) for t in ordered]
        values = self.caps[table.gpu].apply(ordered, normalized_throughputs(utils, fit.params))
        return dict(zip(ordered, values))

    def colocated_throughput(self, job_types: Sequence[str], gpu_type: GPUType) -> list[float]:
        if len(job_types) <= 1:
            for t in job_types:
                self._table(t, gpu_type)
            return [1.0] * len(job_types)
        ordered = tuple(sorted(job_types))
        key = (gpu_type.name, ordered)
        values = self._coloc.get(key)
        if values is None:
            values = self._set_values(ordered, gpu_type)
            self._coloc[key] = values
        return [values[t] for t in job_types]

    def job_types(self) -> list[str]:
        return self.tables[FALLBACK_GPU].job_types()

    def fit_quality(self) -> dict[str, dict[str, object]]:
        """Per GPU: the fit report including held-out quality (runs the seeded 80/20 split fit once)."""
        out = {}
        for g in sorted(self.tables):
            report = _cached_fit(str(self.path), g, self.seed, True).to_dict()
            report.pop("utils")
            out[g] = report
        return out

    def describe(self) -> dict[str, object]:
        return {
            "name": self.name,
            "source": str(self.path),
            "sha256": self.tables[FALLBACK_GPU].sha256,
            "gpus": sorted(self.tables),
            "gpu_type_map": GAVEL_GPU_KEYS,
            "unknown_gpu_types": f"use the {FALLBACK_GPU} table with iteration time / GPUType.speed",
            "quirks": {g: dict(t.quirks) for g, t in self.tables.items()},
            "quirk_handling": "zero pairs: unmeasured, predicted by the fitted model; "
                              "both-at-solo pairs: kept as measured (and kept in the fit)",
            "memory": "analytic (horus.truth.memory.training_memory_mib, adam, fp32): Gavel has no memory figures",
            "utilization": "fitted latent interference intensity per job type (Gavel has no utilization figures)",
            "fit": self.fit_quality(),
            "aggregate_cap": {g: c.describe() for g, c in sorted(self.caps.items())},
        }


def _pair_sum_cap(table: GavelThroughputs) -> PairSumCap:
    """Measured ``x_a + x_b`` of every measured pair of ``table`` (either order)."""
    sums = {}
    for a, b in table.pairs:
        measured = table.normalized_pair(a, b)
        if measured is not None:
            sums[(a, b)] = measured[0] + measured[1]
    return PairSumCap(sums)
