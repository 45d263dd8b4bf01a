"""``physical`` predictor: a roofline + dispatch model of one training iteration per GPU type.

For every operator of the exported training step (``horus.predict.workload``, from the catalog's
per-operator table) at batch ``B`` on a GPU with spec ``horus.gpu_types.gpu_spec``:

* GPU time  t_op = max(FLOPs / (compute_eff x matrix peak), bytes / (bw_eff x DRAM bandwidth), min_kernel_s);
  the matrix peak is FP32 -- TF32 tensor cores on Ampere and later, which cuDNN convolutions use by default (and
  matmuls did in PyTorch 1.7-1.11) -- or FP16 tensor cores under AMP; other kernels are bandwidth-bound.
  Pointwise ops inside an RNN get no min_kernel_s floor (cuDNN fuses them into its per-step kernels).
* host time per op = dispatch_s for kernel-launching ops, view_frac x dispatch_s for views/metadata ops,
  rnn_host_frac x dispatch_s for the per-time-step ops cuDNN launches itself inside an RNN.
* optimizer step: per parameter tensor ``OPT_KERNELS`` kernels (each min_kernel_s on the GPU and dispatch_s
  on the host) moving ``OPT_BYTES`` x 4 bytes per parameter.
* host data preparation = data_s x input elements per sample x B (decode / augment / collate, in loader workers)
* iteration = smooth-max(GPU busy, host, data) + step_s   (smooth-max = (a^4 + b^4 + c^4)^(1/4): partial overlap)
* utilization (NVML style) = GPU busy / iteration, at most 1.
* memory = context_mib + (1 + alloc_frac) x (weights + gradients + optimizer state + act_scale x saved
  activations + transient_scale x the largest single operator's tensors) + workspace_mib.

``compute_eff``, ``bw_eff``, ``dispatch_s``, ``step_s``, ``data_s`` and ``context_mib`` are per GPU type (the
host machine's speed shows in ``dispatch_s``, ``step_s`` and ``data_s``); the rest are global. They are
calibrated on public measurements (``horus predictor calibrate``, see ``horus.predict.calibrate``) and shipped
in ``horus/data/physical_params.json``; a GPU type without calibrated values uses the ``default`` set (the
geometric mean over the calibrated types). No per-model constant exists.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from importlib import resources

import numpy as np

from horus.cluster import GPUType
from horus.errors import HorusInputError
from horus.gpu_types import GPUSpec, gpu_spec
from horus.jobs import JobSpec
from horus.predict.base import PREDICTORS, Prediction, Predictor
from horus.predict.workload import HOST, KERNEL, RNN_SUFFIX, Workload, catalog_workload

MIB = 1024.0 * 1024.0
OPT_BYTES: dict[str, float] = {"sgd": 3.0, "momentum": 5.0, "adam": 7.0, "adamw": 7.0, "adadelta": 7.0}
OPT_KERNELS: dict[str, float] = {"sgd": 1.0, "momentum": 2.0, "adam": 5.0, "adamw": 6.0, "adadelta": 6.0}
OPT_STATE_COPIES: dict[str, float] = {"sgd": 0.0, "momentum": 1.0, "adam": 2.0, "adamw": 2.0, "adadelta": 2.0}
SMOOTH_MAX_POWER = 4.0
PER_GPU_FIELDS = ("compute_eff", "bw_eff", "dispatch_s", "step_s", "data_s", "context_mib")


@dataclass(frozen=True)
class GPUParams:
    """Calibrated constants of one GPU type (see module docstring)."""

    compute_eff: float = 0.5
    bw_eff: float = 0.7
    dispatch_s: float = 20e-6
    step_s: float = 2e-3  # fixed per-iteration host cost (data loading hand-off, loss.item() sync, Python loop)
    data_s: float = 2e-9  # host data preparation per input element (decode, augment, collate), overlapped
    context_mib: float = 1000.0


@dataclass(frozen=True)
class GlobalParams:
    min_kernel_s: float = 4e-6
    view_frac: float = 0.3
    rnn_host_frac: float = 0.1
    act_scale: float = 1.0
    transient_scale: float = 1.0
    alloc_frac: float = 0.05
    workspace_mib: float = 100.0


@dataclass(frozen=True)
class PhysicalParams:
    """All constants: globals, per-GPU-type values, and the set used for uncalibrated GPU types."""

    globals: GlobalParams = field(default_factory=GlobalParams)
    per_gpu: dict[str, GPUParams] = field(default_factory=dict)
    default: GPUParams = field(default_factory=GPUParams)
    provenance: dict[str, object] = field(default_factory=dict)

    def for_gpu(self, spec_name: str) -> GPUParams:
        return self.per_gpu.get(spec_name, self.default)

    def to_json(self) -> dict[str, object]:
        return {"globals": asdict(self.globals), "default": asdict(self.default),
                "per_gpu": {k: asdict(v) for k, v in sorted(self.per_gpu.items())}, "provenance": self.provenance}

    @classmethod
    def from_json(cls, data: dict[str, object], source: str = "physical params") -> PhysicalParams:
        try:
            return cls(globals=GlobalParams(**data["globals"]),  # type: ignore[arg-type]
                       default=GPUParams(**data["default"]),  # type: ignore[arg-type]
                       per_gpu={k: GPUParams(**v) for k, v in data["per_gpu"].items()},  # type: ignore[union-attr]
                       provenance=dict(data.get("provenance", {})))  # type: ignore[arg-type]
        except (KeyError, TypeError) as exc:
            raise HorusInputError(source, f"bad physical-parameter file ({exc})") from None


@lru_cache(maxsize=1)
def shipped_params() -> PhysicalParams:
    """The calibrated constants shipped in ``horus/data/physical_params.json`` (uncalibrated defaults if absent)."""
    ref = resources.files("horus.data").joinpath("physical_params.json")
    if not ref.is_file():
        return PhysicalParams(provenance={"calibrated": False})
    return PhysicalParams.from_json(json.loads(ref.read_text()), "horus/data/physical_params.json")


@dataclass(frozen=True)
class Estimate:
    busy_s: float
    host_s: float
    iter_time_s: float
    util: float
    mem_mib: float
    compute_s: float = 0.0  # part of busy_s in compute-bound operators
    memory_s: float = 0.0  # part of busy_s in bandwidth-bound operators (incl. the optimizer step)
    step_s: float = 0.0  # the fixed per-iteration host cost included in iter_time_s


def matrix_peak_flops(spec: GPUSpec, amp: bool) -> float:
    """Peak FLOP/s of matrix ops: FP16 tensor cores under AMP, else TF32 where the GPU has it, else FP32."""
    return (spec.fp16_tflops if amp else max(spec.fp32_tflops, spec.tf32_tflops)) * 1e12


def _check_optimizer(optimizer: str) -> None:
    if optimizer not in OPT_BYTES:
        raise HorusInputError("optimizer", f"expected one of {', '.join(sorted(OPT_BYTES))}, got {optimizer!r}")


def op_times(w: Workload, batch: float, spec: GPUSpec, g: GPUParams, p: GlobalParams, amp: bool = False,
             bound: list[np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(GPU seconds, host seconds) of each merged operator, times its count.

    With ``bound`` (a list), appends the compute-bound and the bandwidth-bound GPU seconds of each operator.
    """
    flops, byts = w.at_batch(batch)
    if amp:  # activations in fp16: per-sample traffic halves
        byts = w.bytes[:, 0] + 0.5 * w.bytes[:, 1] * batch
    peak = matrix_peak_flops(spec, amp) * g.compute_eff
    bw = spec.mem_bw_gbs * 1e9 * g.bw_eff
    is_host = w.mask(HOST, HOST + RNN_SUFFIX)
    floor = np.where(w.mask(KERNEL + RNN_SUFFIX), 0.0, p.min_kernel_s)  # cuDNN fuses an RNN's pointwise gate ops
    t_compute, t_memory = flops / peak, byts / bw
    gpu = np.maximum(np.maximum(t_compute, t_memory), floor)
    gpu = np.where(is_host, 0.0, gpu) * w.count
    if bound is not None:
        compute_bound = (t_compute >= t_memory) & (t_compute >= floor)
        memory_bound = (t_memory > t_compute) & (t_memory >= floor)
        bound += [np.where(compute_bound, gpu, 0.0), np.where(memory_bound, gpu, 0.0)]
    host_weight = np.where(is_host, p.view_frac, 1.0) * np.where(
        np.char.endswith(w.kind.astype(str), RNN_SUFFIX), p.rnn_host_frac, 1.0)
    return gpu, host_weight * g.dispatch_s * w.count


def estimate(w: Workload, batch: float, spec: GPUSpec, params: PhysicalParams, optimizer: str = "adam",
             amp: bool = False) -> Estimate:
    """Iteration time, busy time, utilization and peak memory of one worker (see module docstring)."""
    _check_optimizer(optimizer)
    g, p = params.for_gpu(spec.name), params.globals
    bound: list[np.ndarray] = []
    gpu, host = op_times(w, batch, spec, g, p, amp, bound)
    opt_kernels = w.param_tensors * OPT_KERNELS[optimizer] * (2.0 if amp else 1.0)
    opt_gpu = max(w.params * 4 * OPT_BYTES[optimizer] / (spec.mem_bw_gbs * 1e9 * g.bw_eff),
                  opt_kernels * p.min_kernel_s)
    busy = float(gpu.sum()) + opt_gpu
    host_s = float(host.sum()) + opt_kernels * g.dispatch_s
    data = g.data_s * w.input_elements * batch
    k = SMOOTH_MAX_POWER
    overlap = (busy ** k + host_s ** k + data ** k) ** (1.0 / k)
    iter_s = overlap + g.step_s
    opt_memory = w.params * 4 * OPT_BYTES[optimizer] / (spec.mem_bw_gbs * 1e9 * g.bw_eff)
    return Estimate(busy, host_s, iter_s, min(1.0, busy / iter_s), memory_mib(w, batch, g, p, optimizer, amp),
                    compute_s=float(bound[0].sum()), memory_s=float(bound[1].sum()) + min(opt_memory, opt_gpu),
                    step_s=g.step_s)


def memory_mib(w: Workload, batch: float, g: GPUParams, p: GlobalParams, optimizer: str = "adam",
               amp: bool = False) -> float:
    """Peak memory (MiB) of one worker (see module docstring)."""
    _check_optimizer(optimizer)
    weights = w.params * 4 * (1.5 if amp else 1.0)  # amp: autocast's fp16 weight copies
    grads = w.params * 4
    state = w.params * 4 * OPT_STATE_COPIES[optimizer]
    act_dtype = 0.5 if amp else 1.0
    acts = p.act_scale * w.activation_bytes_per_sample * batch * act_dtype
    _, byts = w.at_batch(batch)
    biggest = float(byts.max()) * act_dtype if len(byts) else 0.0
    dynamic = weights + grads + state + acts + p.transient_scale * biggest
    return g.context_mib + p.workspace_mib + (1.0 + p.alloc_frac) * dynamic / MIB


@PREDICTORS.register("physical")
class PhysicalPredictor(Predictor):
    """Roofline + dispatch model of one iteration with calibrated per-GPU-type constants."""

    name = "physical"

    def __init__(self, params: PhysicalParams | None = None, optimizer: str = "adam", amp: bool = False) -> None:
        _check_optimizer(optimizer)
        self.params = params if params is not None else shipped_params()
        self.optimizer = optimizer  # for jobs that state none
        self.amp = amp  # for jobs that state no precision
        self._cache: dict[tuple[str, str], Prediction] = {}

    def predict(self, job: JobSpec, gpu_type: GPUType) -> Prediction:
        """The job's own input size, precision and optimizer where it states them, else the defaults."""
        key = (job.job_type, gpu_type.name)
        hit = self._cache.get(key)
        if hit is None:
            spec = gpu_spec(gpu_type.name)
            amp = self.amp if job.precision is None else job.precision in ("amp-fp16", "bf16")
            est = estimate(catalog_workload(job.model, job.input_size), job.batch_size, spec, self.params,
                           job.optimizer or self.optimizer, amp)
            hit = self._cache[key] = Prediction(util=est.util, mem_mib=est.mem_mib, iter_time_s=est.iter_time_s)
        return hit

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "optimizer": self.optimizer, "amp": self.amp,
                "params": self.params.to_json(),
                "ops": "horus/data/model_ops.csv (python -m horus.graph.build_catalog)"}


def with_gpu(params: PhysicalParams, spec_name: str, **values: float) -> PhysicalParams:
    """A copy of ``params`` with some per-GPU values of ``spec_name`` replaced."""
    per_gpu = dict(params.per_gpu)
    per_gpu[spec_name] = replace(params.for_gpu(spec_name), **values)
    return replace(params, per_gpu=per_gpu)


def geometric_default(per_gpu: dict[str, GPUParams]) -> GPUParams:
    """Per-field geometric mean over calibrated GPU types (the values an unseen type gets)."""
    if not per_gpu:
        return GPUParams()
    return GPUParams(**{f: math.exp(float(np.mean([math.log(getattr(v, f)) for v in per_gpu.values()])))
                        for f in PER_GPU_FIELDS})
