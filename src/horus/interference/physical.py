"""``physical`` interference model: co-located throughput from each job's predicted physical behaviour.

Job identities are never features: every job is described by the ``physical`` solo predictor on the GPU at
hand (``horus.predict.physical``): its GPU busy time per iteration b, host time h, fixed step cost s, iteration
time T = smax(b, h) + s, the compute-bound and bandwidth-bound shares of b (c, m) and its memory footprint as a
fraction of the card f.

Sharing one GPU by time slicing, job i's GPU work is stretched by the other jobs' kernels occupying the GPU:

    b_i' = b_i x (1 + eps_i) x (1 + sum_j kappa_ij x rho_j'),   rho_j' = b_j' / T_j'   (co-located busy fraction)
    kappa_ij = k0 + k1 x (c_i c_j + m_i m_j)        (jobs bound by the same unit collide more)
    eps_i    = e0 + e1 x sum_j f_j                  (context-switch and cache/TLB pressure)
    T_i' = smax(b_i', h_i) + s_i,  normalized throughput x_i = T_i / T_i'

solved by fixed-point iteration (constants fixed at ``DEFAULT_CONSTANTS``). That estimate and the job features
feed a ridge regression fitted on measured pairs (``PhysicalInterference.fit``); no feature names a job type, so
the fit applies unchanged to unseen job types and GPU types.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from horus.cluster import GPUType
from horus.gpu_types import gpu_spec
from horus.interference.base import INTERFERENCE_MODELS, InterferenceModel, clip_throughput
from horus.interference.data import JobFeatures, Observation, gpu_type_of
from horus.jobs import parse_job_key
from horus.predict.physical import SMOOTH_MAX_POWER, PhysicalParams, estimate, shipped_params
from horus.predict.workload import catalog_workload

FIXED_POINT_ITERATIONS = 30
DEFAULT_CONSTANTS = (0.5, 0.5, 0.05, 0.1)  # k0, k1, e0, e1 before fitting


@dataclass(frozen=True)
class JobPhysics:
    busy_s: float
    host_s: float
    step_s: float
    iter_s: float
    compute_share: float
    memory_share: float
    mem_frac: float


def _smax(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    k = SMOOTH_MAX_POWER
    return (a ** k + b ** k) ** (1.0 / k)


def colocated_throughputs(jobs: Sequence[JobPhysics], constants: Sequence[float]) -> np.ndarray:
    """Normalized throughput of every job of a co-located set (see module docstring)."""
    k0, k1, e0, e1 = constants
    b = np.array([j.busy_s for j in jobs])
    h = np.array([j.host_s for j in jobs])
    s = np.array([j.step_s for j in jobs])
    c = np.array([j.compute_share for j in jobs])
    m = np.array([j.memory_share for j in jobs])
    f = np.array([j.mem_frac for j in jobs])
    solo = _smax(b, h) + s
    if len(jobs) < 2:
        return np.ones(len(jobs))
    kappa = np.maximum(0.0, k0 + k1 * (np.outer(c, c) + np.outer(m, m)))
    np.fill_diagonal(kappa, 0.0)
    eps = np.maximum(0.0, e0 + e1 * (f.sum() - f))
    own = b * (1.0 + eps)
    rho = np.minimum(1.0, own / (_smax(own, h) + s))
    t = _smax(own, h) + s
    for _ in range(FIXED_POINT_ITERATIONS):
        busy = own * (1.0 + kappa @ rho)
        t = _smax(busy, h) + s
        new_rho = np.minimum(1.0, busy / t)
        if np.allclose(new_rho, rho, atol=1e-6):
            break
        rho = 0.5 * (rho + new_rho)
    return solo / t


PAIR_FEATURES: tuple[str, ...] = (
    "mechanistic",  # colocated_throughputs with DEFAULT_CONSTANTS (time-slicing prior)
    "util_target", "util_others", "util_product", "util_sum",
    "mem_frac_target", "mem_frac_others", "same_bound",  # c_t c_o + m_t m_o
    "host_share_target", "host_share_others", "log_busy_ratio",
)


@INTERFERENCE_MODELS.register("physical")
class PhysicalInterference(InterferenceModel):
    """Co-located normalized throughput from predicted busy fraction, intensity and memory footprint.

    A ridge regression (``sklearn.linear_model.RidgeCV``, standardised inputs) on ``PAIR_FEATURES``, all computed
    from the ``physical`` solo predictor on the GPU at hand; with no training data it returns the mechanistic
    time-slicing estimate. Co-runners' values are summed (utilization, memory) or busy-weighted (shares).
    """

    name = "physical"

    def __init__(self, features: JobFeatures | None = None, seed: int = 0, params: PhysicalParams | None = None,
                 constants: Sequence[float] = DEFAULT_CONSTANTS) -> None:
        super().__init__(features, seed)
        self.params = params if params is not None else shipped_params()
        self.constants = tuple(float(v) for v in constants)
        self.regressor: object | None = None
        self._physics: dict[tuple[str, str], JobPhysics] = {}

    def physics(self, job_type: str, gpu: GPUType | str) -> JobPhysics:
        gt = gpu_type_of(gpu)
        key = (job_type, gt.name)
        hit = self._physics.get(key)
        if hit is None:
            key = parse_job_key(job_type)
            spec = gpu_spec(gt.name)
            e = estimate(catalog_workload(key.model, key.input_size), key.batch_size, spec, self.params,
                         key.optimizer or "adam", precision=key.precision)
            busy = max(e.busy_s, 1e-12)
            hit = self._physics[key] = JobPhysics(e.busy_s, e.host_s, e.step_s, e.iter_time_s, e.compute_s / busy,
                                                  e.memory_s / busy, e.mem_mib / (spec.memory_gib * 1024.0))
        return hit

    def pair_features(self, target: str, corunners: Sequence[str], gpu: GPUType | str) -> np.ndarray:
        t = self.physics(target, gpu)
        others = [self.physics(c, gpu) for c in corunners]
        busy_o = sum(o.busy_s for o in others) or 1e-12
        ut = t.busy_s / t.iter_s
        uo = sum(o.busy_s / o.iter_s for o in others)
        c_o = sum(o.compute_share * o.busy_s for o in others) / busy_o
        m_o = sum(o.memory_share * o.busy_s for o in others) / busy_o
        return np.array([
            colocated_throughputs([t, *others], self.constants)[0], ut, uo, ut * uo, ut + uo, t.mem_frac,
            sum(o.mem_frac for o in others), t.compute_share * c_o + t.memory_share * m_o,
            t.host_s / t.iter_s, sum(o.host_s / o.iter_s for o in others) / len(others),
            float(np.log(max(t.busy_s, 1e-12) / busy_o)),
        ])

    def fit(self, observations: Sequence[Observation]) -> PhysicalInterference:
        from sklearn.linear_model import RidgeCV
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        obs = [o for o in observations if o.corunners]
        if len(obs) < 3:
            return self
        x = np.vstack([self.pair_features(o.target, o.corunners, o.gpu) for o in obs])
        y = np.array([o.value for o in obs])
        self.regressor = make_pipeline(StandardScaler(), RidgeCV(alphas=np.logspace(-3, 3, 13))).fit(x, y)
        return self

    def predict_one(self, target: str, corunners: Sequence[str], gpu: GPUType | str) -> float:
        if not corunners:
            return 1.0
        x = self.pair_features(target, corunners, gpu)
        if self.regressor is None:
            return clip_throughput(float(x[0]))
        return clip_throughput(float(self.regressor.predict(x[None, :])[0]))  # type: ignore[attr-defined]

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "features": list(PAIR_FEATURES), "fitted": self.regressor is not None,
                "mechanistic_constants": dict(zip(("k0", "k1", "e0", "e1"), self.constants)),
                "solo_model": "horus.predict.physical (shipped constants)"}
