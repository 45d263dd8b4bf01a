"""Calibrate the physical predictor's few constants on public measurements (``horus.predict.measurements``).

* Time and utilization: per GPU type present in the data, ``compute_eff``, ``bw_eff``, ``dispatch_s``,
  ``step_s`` and ``data_s``; globally ``min_kernel_s`` and ``min_matrix_s`` (GPU-side kernel floors, bounded
  by ``GLOBAL_BOUNDS``). Bounded least squares (``scipy.optimize.least_squares``) on
  ln(predicted / measured iteration time) and 3 x (predicted - measured utilization), each dataset x GPU group
  weighted equally, with a weak pull (0.1 per unit of ln) of every constant towards its prior.
* Memory: ``context_mib`` per GPU type with memory data, globally ``act_scale`` and ``transient_scale``, on
  ln(predicted / measured peak memory).
* Hierarchical: the per-GPU values are pulled (``HIER_WEIGHT``) towards shared values fitted at the same
  time; GPU types without data get those shared values (``PhysicalParams.default``), and ``context_mib`` the
  geometric mean over the types with memory data. Residuals use a soft-L1 loss (``ROBUST_SCALE``).

Everything is deterministic (GPUMemNet rows are subsampled with a seed for the fit only).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from horus.gpu_types import gpu_spec
from horus.predict.measurements import Measurement
from horus.predict.physical import (
    HALF_PRECISIONS,
    OPT_BYTES,
    OPT_KERNELS,
    PER_GPU_FIELDS,
    GlobalParams,
    GPUParams,
    PhysicalParams,
    matrix_peak_flops,
    memory_mib,
    precision_step,
)
from horus.predict.workload import HOST, KERNEL, MATRIX, RNN_SUFFIX

UTIL_WEIGHT = 3.0
PRIOR_WEIGHT = 0.1
def TIME_RESIDUAL(ratio: np.ndarray) -> np.ndarray:
    """Residual of a predicted / measured iteration-time ratio: the relative error (the reported MAPE's terms)."""
    return ratio - 1.0


HIER_WEIGHT = 1.0  # pull of each GPU type's device constants towards the shared values (per unit of ln)
# The host-side constants (dispatch_s, step_s, data_s) belong to the machine around the GPU, which differs more
# between datasets than GPUs of one kind do (GPUMemNet's DGX A100 dispatches an op in ~14 us when fitted alone;
# the Gavel/Zeus/Pollux hosts in ~30 us): a weaker pull, so that one host's speed is not forced into the kernel
# floors of all.
HOST_HIER_WEIGHT = 0.3
HOST_FIELDS = ("dispatch_s", "step_s", "data_s")
ROBUST_SCALE = 0.3  # soft-L1 scale of the residuals: a workload the model cannot see (e.g. A3C's CPU-side
                    # environment) counts linearly, not quadratically
MAX_ROWS_PER_GROUP = 300
# (name, lower, upper) of fitted constants; priors are the GPUParams / GlobalParams defaults.
GPU_BOUNDS = {"compute_eff": (0.02, 1.0), "bw_eff": (0.05, 1.0), "dispatch_s": (1e-6, 3e-4), "step_s": (1e-5, 0.1),
              "data_s": (1e-12, 1e-6)}
# min_kernel_s is the GPU-side minimum of one kernel: 1-4 us (module docstring of horus.predict.physical); the
# host-side launch cost is dispatch_s. Left free (the old bound, 0.5-50 us) it settled at 13.8 us and absorbed
# host time into GPU busy time, over-predicting the utilization of launch-bound jobs (NCF, A3C).
GLOBAL_BOUNDS = {"min_kernel_s": (1e-6, 4e-6), "min_matrix_s": (2e-6, 10e-6)}


@dataclass
class _TimeRows:
    """Flattened operators of every fitted measurement (vectorised residuals)."""

    row: np.ndarray  # op -> measurement index
    flops: np.ndarray
    bytes: np.ndarray
    count: np.ndarray
    host_w: np.ndarray  # host-time weight (1, view_frac, rnn_host_frac) x count
    is_gpu: np.ndarray
    floor: np.ndarray  # 1 where the min-kernel-time floor applies
    is_matrix: np.ndarray  # GEMM / convolution (the min_matrix_s floor)
    peak: np.ndarray  # per measurement, FLOP/s
    bw: np.ndarray  # per measurement, B/s
    gpu_idx: np.ndarray  # per measurement
    opt_bytes: np.ndarray
    opt_kernels: np.ndarray
    data_elements: np.ndarray  # input elements per iteration
    iter_time: np.ndarray  # nan where not measured
    util: np.ndarray
    weight: np.ndarray


def _flatten(rows: Sequence[Measurement], gpus: list[str], p: GlobalParams) -> _TimeRows:
    keys = ("row", "flops", "bytes", "count", "host_w", "is_gpu", "floor", "is_matrix")
    parts: dict[str, list[np.ndarray]] = {k: [] for k in keys}
    groups: dict[tuple[str, str], int] = {}
    for m in rows:
        groups[(m.dataset, m.gpu)] = groups.get((m.dataset, m.gpu), 0) + 1
    for i, m in enumerate(rows):
        w = m.workload
        f, b = w.at_batch(m.batch)
        if m.precision in HALF_PRECISIONS:
            b = w.bytes[:, 0] + 0.5 * w.bytes[:, 1] * m.batch
        is_host = w.mask(HOST, HOST + RNN_SUFFIX)
        rnn = np.char.endswith(w.kind.astype(str), RNN_SUFFIX)
        parts["row"].append(np.full(len(f), i))
        parts["flops"].append(f)
        parts["bytes"].append(b)
        parts["count"].append(w.count)
        parts["host_w"].append(np.where(is_host, p.view_frac, 1.0) * np.where(rnn, p.rnn_host_frac, 1.0) * w.count)
        parts["is_gpu"].append(~is_host)
        parts["floor"].append(np.where(w.mask(KERNEL + RNN_SUFFIX), 0.0, 1.0))
        parts["is_matrix"].append(w.mask(MATRIX, MATRIX + RNN_SUFFIX))
    specs = [gpu_spec(m.gpu) for m in rows]
    return _TimeRows(
        **{k: np.concatenate(v) for k, v in parts.items()},
        peak=np.array([matrix_peak_flops(s, m.precision) for s, m in zip(specs, rows)]),
        bw=np.array([s.mem_bw_gbs * 1e9 for s in specs]),
        gpu_idx=np.array([gpus.index(m.gpu) for m in rows]),
        opt_bytes=np.array([m.workload.params * 4 * OPT_BYTES[m.optimizer] + precision_step(m.workload, m.precision)[1]
                            for m in rows]),
        opt_kernels=np.array([m.workload.param_tensors * OPT_KERNELS[m.optimizer]
                              + precision_step(m.workload, m.precision)[0] for m in rows]),
        data_elements=np.array([m.workload.input_elements * m.batch for m in rows]),
        iter_time=np.array([m.iter_time_s if m.iter_time_s is not None else np.nan for m in rows]),
        util=np.array([m.util if m.util is not None else np.nan for m in rows]),
        weight=np.array([1.0 / math.sqrt(groups[(m.dataset, m.gpu)]) for m in rows]),
    )


def _predict_time(t: _TimeRows, ce: np.ndarray, be: np.ndarray, disp: np.ndarray, tmin: float, step: np.ndarray,
                  data_s: np.ndarray, tmat: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(iteration time, utilization) of every fitted measurement; the same formulas as ``physical.estimate``."""
    n = len(t.peak)
    peak, bw = (t.peak * ce[t.gpu_idx])[t.row], (t.bw * be[t.gpu_idx])[t.row]
    floor = np.where(t.is_matrix, tmin if tmat is None else tmat, tmin) * t.floor
    gpu = np.maximum(np.maximum(t.flops / peak, t.bytes / bw), floor) * t.count * t.is_gpu
    m_bw = t.bw * be[t.gpu_idx]
    busy = np.bincount(t.row, gpu, minlength=n) + np.maximum(t.opt_bytes / m_bw, t.opt_kernels * tmin)
    host = (np.bincount(t.row, t.host_w, minlength=n) + t.opt_kernels) * disp[t.gpu_idx]
    from horus.predict.physical import SMOOTH_MAX_POWER as k

    data = data_s[t.gpu_idx] * t.data_elements
    it = (busy ** k + host ** k + data ** k) ** (1.0 / k) + step[t.gpu_idx]
    return it, np.minimum(1.0, busy / it)


def _subsample(rows: Sequence[Measurement], seed: int) -> list[Measurement]:
    rng = np.random.default_rng(seed)
    by_group: dict[tuple[str, str], list[Measurement]] = {}
    for m in rows:
        by_group.setdefault((m.dataset, m.gpu), []).append(m)
    out: list[Measurement] = []
    for key in sorted(by_group):
        group = by_group[key]
        if len(group) > MAX_ROWS_PER_GROUP:
            group = [group[i] for i in sorted(rng.choice(len(group), MAX_ROWS_PER_GROUP, replace=False))]
        out += group
    return out


def fit_time(rows: Sequence[Measurement], base: PhysicalParams, seed: int = 0) -> PhysicalParams:
    """Fit the time/utilization constants on ``rows`` with iteration time or utilization (see module docstring)."""
    rows = _subsample([m for m in rows if m.iter_time_s is not None or m.util is not None], seed)
    if not rows:
        return base
    gpus = sorted({m.gpu for m in rows})
    t = _flatten(rows, gpus, base.globals)
    prior_gpu, prior_glob = GPUParams(), GlobalParams()
    fields = list(GPU_BOUNDS)
    nf, ng = len(fields), len(gpus)
    # x = [shared values of the per-GPU fields, per-GPU values (ng x nf), global-only constants], all in ln
    lo = np.log([GPU_BOUNDS[f][0] for f in fields] * (ng + 1) + [GLOBAL_BOUNDS[f][0] for f in GLOBAL_BOUNDS])
    hi = np.log([GPU_BOUNDS[f][1] for f in fields] * (ng + 1) + [GLOBAL_BOUNDS[f][1] for f in GLOBAL_BOUNDS])
    prior_shared = np.log([getattr(prior_gpu, f) for f in fields])
    prior_glob_v = np.log([getattr(prior_glob, f) for f in GLOBAL_BOUNDS])
    x0 = np.concatenate([prior_shared, np.tile(prior_shared, ng), prior_glob_v])
    has_t, has_u = ~np.isnan(t.iter_time), ~np.isnan(t.util)
    hier = np.array([HOST_HIER_WEIGHT if f in HOST_FIELDS else HIER_WEIGHT for f in fields])

    def residuals(x: np.ndarray) -> np.ndarray:
        shared, per, glob = x[:nf], x[nf: nf * (ng + 1)].reshape(ng, nf), x[nf * (ng + 1):]
        v, g = np.exp(per), np.exp(glob)
        it, util = _predict_time(t, v[:, 0], v[:, 1], v[:, 2], g[0], v[:, 3], v[:, 4], g[1])
        r_t = TIME_RESIDUAL(it[has_t] / t.iter_time[has_t]) * t.weight[has_t]
        r_u = UTIL_WEIGHT * (util[has_u] - t.util[has_u]) * t.weight[has_u]
        pulls = [(hier * (per - shared)).ravel(), PRIOR_WEIGHT * (shared - prior_shared),
                 PRIOR_WEIGHT * (glob - prior_glob_v)]
        return np.concatenate([r_t, r_u, *pulls])

    from scipy.optimize import least_squares  # imported when fitting: loading predictors does not need it

    sol = least_squares(residuals, np.clip(x0, lo + 1e-9, hi - 1e-9), bounds=(lo, hi), loss="soft_l1",
                        f_scale=ROBUST_SCALE, max_nfev=300)
    x = sol.x
    shared, per, glob = np.exp(x[:nf]), np.exp(x[nf: nf * (ng + 1)].reshape(ng, nf)), np.exp(x[nf * (ng + 1):])
    per_gpu = dict(base.per_gpu)
    for i, g in enumerate(gpus):
        per_gpu[g] = replace(base.per_gpu.get(g, base.default), **{f: float(per[i, j]) for j, f in enumerate(fields)})
    glob_p = replace(base.globals, **{f: float(glob[j]) for j, f in enumerate(GLOBAL_BOUNDS)})
    default = replace(base.default, **{f: float(shared[j]) for j, f in enumerate(fields)})
    return replace(base, globals=glob_p, per_gpu=per_gpu, default=default)


def fit_memory(rows: Sequence[Measurement], base: PhysicalParams, seed: int = 0) -> PhysicalParams:
    """Fit ``context_mib`` per GPU type and ``act_scale`` / ``transient_scale`` on rows with peak memory."""
    rows = _subsample([m for m in rows if m.mem_mib is not None], seed)
    if not rows:
        return base
    gpus = sorted({m.gpu for m in rows})
    meas = np.array([m.mem_mib for m in rows])

    def params_of(x: np.ndarray) -> PhysicalParams:
        v = np.exp(x)
        per_gpu = dict(base.per_gpu)
        for i, g in enumerate(gpus):
            per_gpu[g] = replace(base.per_gpu.get(g, base.default), context_mib=float(v[i]))
        glob = replace(base.globals, act_scale=float(v[-2]), transient_scale=float(v[-1]))
        return replace(base, per_gpu=per_gpu, globals=glob)

    def residuals(x: np.ndarray) -> np.ndarray:
        p = params_of(x)
        pred = np.array([memory_mib(m.workload, m.batch, p.for_gpu(m.gpu), p.globals, m.optimizer,
                                    precision=m.precision, spec=gpu_spec(m.gpu)) for m in rows])
        prior = np.log([GPUParams().context_mib] * len(gpus) + [1.0, 1.0])
        return np.concatenate([np.log(pred / meas), PRIOR_WEIGHT * (x - prior)])

    x0 = np.log([base.for_gpu(g).context_mib for g in gpus] + [base.globals.act_scale, base.globals.transient_scale])
    lo = np.log([100.0] * len(gpus) + [0.2, 0.01])
    hi = np.log([6000.0] * len(gpus) + [10.0, 10.0])
    from scipy.optimize import least_squares  # imported when fitting: loading predictors does not need it

    sol = least_squares(residuals, np.clip(x0, lo + 1e-9, hi - 1e-9), bounds=(lo, hi), max_nfev=200)
    return params_of(sol.x)


def calibrate(rows: Sequence[Measurement], seed: int = 0, base: PhysicalParams | None = None) -> PhysicalParams:
    """Time, utilization and memory constants fitted on ``rows``; ``default`` = geometric mean over fitted types."""
    params = base if base is not None else PhysicalParams()
    params = fit_time(rows, params, seed)
    params = fit_memory(rows, params, seed)
    with_mem = sorted({m.gpu for m in rows if m.mem_mib is not None})
    context = (float(np.exp(np.mean([np.log(params.per_gpu[g].context_mib) for g in with_mem]))) if with_mem
               else GPUParams().context_mib)
    per_gpu = {g: v if g in with_mem else replace(v, context_mib=context) for g, v in params.per_gpu.items()}
    return replace(params, per_gpu=per_gpu, default=replace(params.default, context_mib=context))


__all__ = ["PER_GPU_FIELDS", "calibrate", "fit_memory", "fit_time"]
