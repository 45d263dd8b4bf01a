"""``contention`` interference model: co-located throughput from solo physics only, a handful of global constants.

Each job is described by the ``physical`` solo predictor (``horus.predict.physical.estimate``) at its own batch,
input size, precision and optimizer on the GPU at hand: iteration time T, GPU-busy time b (u = b / T, the
predicted utilization), the compute-bound and bandwidth-bound shares of b (c, m). The rest of the iteration,
z = T - b (host dispatch, data loading, the fixed step cost), leaves the GPU idle and overlaps freely.

Co-located jobs time-share the GPU. Job A's GPU work is stretched by every co-runner j's work that gets in
between (mean-value analysis of a closed network, one job per class, the GPU a shared server, host time a
delay; a co-runner is found holding the GPU with probability its solo utilization u_j):

    T_A' = T_A + b_A x sum_j kappa_Aj x u_j x (g_j / g_A) ** p,     x_A = T_A / T_A'  (normalized throughput)
    kappa_Aj = k_same x (c_A c_j + m_A m_j) + k_mix x (c_A m_j + m_A c_j)     (same bottleneck collides more)
    g = min(b, tau)                                                   (how long a job holds the GPU per turn)

``g`` is the granularity of the alternation: a job enqueues its iteration's kernels asynchronously up to its
next synchronisation, so it holds the GPU for up to its whole busy time b unless the driver's time slice tau
preempts it first. With p = 0 this is processor sharing (two GPU-saturated jobs get 0.5 each whatever their
iteration times); with p = 1 and tau = infinity strict alternation (a job with long iterations gets more).

Constants: ``ZERO_SHOT`` (chosen a priori, no data; see docs/interference.md), or ``fit`` on measured pairs
(least absolute error, deterministic multi-start Nelder-Mead). No job or GPU identity is a feature, so the
constants fitted on one GPU type apply unchanged to others. ``contention-zeroshot`` never fits.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from horus.cluster import GPUType
from horus.gpu_types import gpu_spec
from horus.interference.base import INTERFERENCE_MODELS, MIN_THROUGHPUT, InterferenceModel, clip_throughput
from horus.interference.data import JobFeatures, Observation, gpu_type_of
from horus.jobs import parse_job_key
from horus.predict.physical import PhysicalParams, estimate, shipped_params
from horus.predict.workload import catalog_workload

CONSTANT_NAMES: tuple[str, ...] = ("k_same", "k_mix", "tau_s", "p")
# A priori: CUDA's default between processes is time slicing, so no two jobs' kernels overlap whatever bounds
# them (k_same = k_mix = 1); the driver's time slice is of the order of 2 ms (tau); the turn-length effect
# counts fully (p 1). Two GPU-saturated jobs then get 0.5 each.
ZERO_SHOT: tuple[float, ...] = (1.0, 1.0, 2e-3, 1.0)
# Search box of ``fit`` (tau in log space).
BOUNDS: tuple[tuple[float, float], ...] = ((0.0, 4.0), (0.0, 4.0), (1e-4, 10.0), (0.0, 2.0))


@dataclass(frozen=True)
class SoloPhases:
    """One job's predicted solo iteration on one GPU type (seconds; shares of busy time)."""

    iter_s: float
    busy_s: float
    compute_share: float
    memory_share: float

    @property
    def util(self) -> float:
        return self.busy_s / self.iter_s


SATURATED = SoloPhases(1.0, 1.0, 0.5, 0.5)  # a job given only as a GPU fraction: assume it fills the GPU


def solo_phases(job_type: str, gpu: GPUType | str, params: PhysicalParams | None = None) -> SoloPhases:
    """Solo phases of ``job_type`` (a job-type key) on ``gpu`` from the physical predictor."""
    if job_type.startswith("/b"):
        return SATURATED
    key = parse_job_key(job_type)
    spec = gpu_spec(gpu_type_of(gpu).name)
    e = estimate(catalog_workload(key.model, key.input_size), key.batch_size, spec,
                 params if params is not None else shipped_params(), key.optimizer or "adam",
                 precision=key.precision)
    busy = min(max(e.busy_s, 1e-12), e.iter_time_s)
    return SoloPhases(e.iter_time_s, busy, e.compute_s / max(e.busy_s, 1e-12), e.memory_s / max(e.busy_s, 1e-12))


def stretched(target: SoloPhases, others: Sequence[SoloPhases], constants: Sequence[float]) -> float:
    """Normalized throughput of ``target`` sharing the GPU with ``others`` (see module docstring)."""
    k_same, k_mix, tau, p = constants
    g_t = min(target.busy_s, tau)
    extra = 0.0
    for o in others:
        kappa = (k_same * (target.compute_share * o.compute_share + target.memory_share * o.memory_share)
                 + k_mix * (target.compute_share * o.memory_share + target.memory_share * o.compute_share))
        extra += max(0.0, kappa) * o.util * (min(o.busy_s, tau) / g_t) ** p
    return target.iter_s / (target.iter_s + target.busy_s * extra)


@INTERFERENCE_MODELS.register("contention")
class ContentionInterference(InterferenceModel):
    """Time-sharing contention of the members' predicted GPU phases; four global constants (``CONSTANT_NAMES``)."""

    name = "contention"
    fits = True

    def __init__(self, features: JobFeatures | None = None, seed: int = 0, params: PhysicalParams | None = None,
                 constants: Sequence[float] = ZERO_SHOT) -> None:
        super().__init__(features, seed)
        self.params = params if params is not None else shipped_params()
        self.constants = tuple(float(v) for v in constants)
        self.fitted = False
        self._phases: dict[tuple[str, str], SoloPhases] = {}

    def phases(self, job_type: str, gpu: GPUType | str) -> SoloPhases:
        key = (job_type, gpu_type_of(gpu).name)
        hit = self._phases.get(key)
        if hit is None:
            hit = self._phases[key] = solo_phases(job_type, gpu, self.params)
        return hit

    def fit(self, observations: Sequence[Observation]) -> ContentionInterference:
        """Least-absolute-error constants on ``observations`` (no-op for ``contention-zeroshot``)."""
        obs = [o for o in observations if o.corunners]
        if not self.fits or len(obs) < len(CONSTANT_NAMES):
            return self
        from scipy.optimize import minimize

        rows = [(i, self.phases(o.target, o.gpu), self.phases(c, o.gpu)) for i, o in enumerate(obs) for c in o.corunners]
        case = np.array([r[0] for r in rows])
        t_arr, o_arr = (np.array([[ph.iter_s, ph.busy_s, ph.compute_share, ph.memory_share] for ph in col]).T
                        for col in ([r[1] for r in rows], [r[2] for r in rows]))
        same = t_arr[2] * o_arr[2] + t_arr[3] * o_arr[3]
        mixed = t_arr[2] * o_arr[3] + t_arr[3] * o_arr[2]
        iters = np.array([self.phases(o.target, o.gpu).iter_s for o in obs])
        busy = np.array([self.phases(o.target, o.gpu).busy_s for o in obs])
        y = np.array([o.value for o in obs])
        low, high = np.array([b[0] for b in BOUNDS]), np.array([b[1] for b in BOUNDS])
        low[2], high[2] = math.log(low[2]), math.log(high[2])

        def unpack(x: np.ndarray) -> tuple[float, ...]:
            x = np.clip(x, low, high)
            return (float(x[0]), float(x[1]), math.exp(float(x[2])), float(x[3]))

        def loss(x: np.ndarray) -> float:  # ``stretched`` over every observation at once
            k_same, k_mix, tau, p = unpack(x)
            kappa = np.maximum(0.0, k_same * same + k_mix * mixed)
            term = kappa * (o_arr[1] / o_arr[0]) * (np.minimum(o_arr[1], tau) / np.minimum(t_arr[1], tau)) ** p
            extra = np.bincount(case, weights=term, minlength=len(obs))
            pred = np.clip(iters / (iters + busy * extra), MIN_THROUGHPUT, 1.0)
            return float(np.mean(np.abs(pred - y)))

        starts = [np.array([ks, km, math.log(tau), p]) for ks in (0.5, 1.0, 2.0) for km in (0.5, 1.0)
                  for tau in (2e-3, 0.1) for p in (0.3, 1.0)]
        best = min((minimize(loss, s, method="Nelder-Mead", options={"maxiter": 600, "xatol": 1e-4, "fatol": 1e-6})
                    for s in starts), key=lambda r: (r.fun, tuple(r.x)))
        self.constants = unpack(best.x)
        self.fitted = True
        return self

    def predict_one(self, target: str, corunners: Sequence[str], gpu: GPUType | str) -> float:
        if not corunners:
            return 1.0
        return clip_throughput(stretched(self.phases(target, gpu), [self.phases(c, gpu) for c in corunners],
                                         self.constants))

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "constants": dict(zip(CONSTANT_NAMES, self.constants)), "fitted": self.fitted,
                "solo_model": "horus.predict.physical.estimate (shipped constants)"}

    def __getstate__(self) -> dict[str, object]:
        state = dict(self.__dict__)
        state["_phases"] = {}
        return state


@INTERFERENCE_MODELS.register("contention-zeroshot")
class ZeroShotContention(ContentionInterference):
    """``contention`` with its a-priori constants ``ZERO_SHOT``: ``fit`` changes nothing."""

    name = "contention-zeroshot"
    fits = False
