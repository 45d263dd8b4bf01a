"""``physical`` predictor: a roofline + dispatch model of one training iteration per GPU type.

For every operator of the exported training step (``horus.predict.workload``, from the catalog's
per-operator table) at batch ``B`` on a GPU with spec ``horus.gpu_types.gpu_spec``:

* GPU time  t_op = max(FLOPs / (compute_eff x matrix peak), bytes / (bw_eff x DRAM bandwidth), min_kernel_s);
  the matrix peak follows the job's precision (``matrix_peak_flops``): ``fp32`` the CUDA-core FP32 peak (TF32
  off), ``tf32`` (the default) max(FP32, TF32 tensor) -- PyTorch's default for cuDNN convolutions on Ampere and
  later --, ``amp-fp16`` the FP16 tensor-core peak, ``bf16`` the same figure on GPUs with BF16 tensor cores
  (Ampere and later) and the FP32 rate on Volta, Turing, Pascal and Kepler, which have none (PyTorch runs
  bf16 there but is_bf16_supported() is False, pytorch/pytorch#124996; XLA/JAX fall back to F32 matmuls on T4,
  openxla/xla#12429, jax-ml/jax#21212). Under ``amp-fp16`` / ``bf16`` per-sample (activation) traffic halves.
  Other kernels are bandwidth-bound. Pointwise ops inside an RNN get no min_kernel_s floor (cuDNN fuses them).
* ``min_kernel_s`` is the *GPU-side* minimum duration of an element-wise / reduction kernel (an empty kernel
  occupies the GPU ~1-3 us: the UVA kernel-overhead measurements, cs.virginia.edu/~mwb7w/cuda_support/
  kernel_overhead.html, where about two thirds of an empty call's time is host-side driver work), bounded to
  [1, 4] us in calibration; ``min_matrix_s`` that of a GEMM / convolution kernel (tile prologue, operand
  loads and epilogue even for a tiny problem), bounded to [2, 10] us and fitted on GPUMemNet's utilization of
  small MLPs (20 % mean at < 1e7 FLOPs per iteration: the GEMMs occupy the GPU for several us each). The
  *host-side* cost of launching it is separate: ``dispatch_s`` per kernel-launching op (PyTorch's dispatcher +
  cudaLaunchKernel; NVIDIA's Nsight Systems guide measures ~20 us for one PyTorch element-wise op on a V100),
  view_frac x dispatch_s for views/metadata ops, rnn_host_frac x dispatch_s for the per-time-step ops cuDNN
  launches itself inside an RNN. NVML utilization counts only time a kernel runs, so a launch-bound job
  (NCF, small RL policies) shows low utilization even though its host is saturated.
* optimizer step (always FP32): per parameter tensor ``OPT_KERNELS`` kernels (each min_kernel_s on the GPU
  and dispatch_s on the host) moving ``OPT_BYTES`` x 4 bytes per parameter. Half precision adds one cast
  kernel per parameter tensor (autocast's FP16/BF16 weight copies: read 4, write 2 bytes per parameter);
  ``amp-fp16`` adds GradScaler's unscale/inf-check pass over the gradients (read + write 4 bytes per
  parameter in multi-tensor kernels of up to ``MTA_TENSORS`` tensors, plus the scale update).
* host data preparation = data_s x input elements per sample x B (decode / augment / collate, in loader workers)
* iteration = smooth-max(GPU busy, host, data) + step_s   (smooth-max = (a^4 + b^4 + c^4)^(1/4): partial overlap)
* utilization (NVML style) = GPU busy / iteration, at most 1.
* memory = context_mib + (1 + alloc_frac) x caching-allocator reserve of (weights + gradients + optimizer
  state [+ half weight copies] + act_scale x saved activations + transient_scale x the largest single
  operator's tensors) + the cuBLAS workspace segment + workspace_mib (see ``memory_mib``).

``compute_eff``, ``bw_eff``, ``dispatch_s``, ``step_s``, ``data_s`` and ``context_mib`` are per GPU type (the
host machine's speed shows in ``dispatch_s``, ``step_s`` and ``data_s``; the driver/CUDA/library build in
``context_mib``); the rest are global. They are calibrated on public measurements (``horus predictor
calibrate``, see ``horus.predict.calibrate``) and shipped in ``horus/data/physical_params.json``. A GPU type
without calibrated values uses the calibrated types of its architecture for the device-side constants
(``compute_eff``, ``bw_eff``, ``context_mib``; geometric mean) and the ``default`` set (the geometric mean over
all calibrated types) for the rest. No per-model constant exists.
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
from horus.gpu_types import SPECS, GPUSpec, gpu_spec
from horus.jobs import JobSpec
from horus.predict.base import PREDICTORS, Prediction, Predictor
from horus.predict.workload import HOST, KERNEL, MATRIX, RNN_SUFFIX, Workload, catalog_workload

MIB = 1024.0 * 1024.0
OPT_BYTES: dict[str, float] = {"sgd": 3.0, "momentum": 5.0, "adam": 7.0, "adamw": 7.0, "adadelta": 7.0}
OPT_KERNELS: dict[str, float] = {"sgd": 1.0, "momentum": 2.0, "adam": 5.0, "adamw": 6.0, "adadelta": 6.0}
OPT_STATE_COPIES: dict[str, float] = {"sgd": 0.0, "momentum": 1.0, "adam": 2.0, "adamw": 2.0, "adadelta": 2.0}
SMOOTH_MAX_POWER = 4.0
PER_GPU_FIELDS = ("compute_eff", "bw_eff", "dispatch_s", "step_s", "data_s", "context_mib")
ARCH_FIELDS = ("compute_eff", "bw_eff", "context_mib")  # device-side: an uncalibrated type takes its architecture's
PRECISIONS = ("fp32", "tf32", "amp-fp16", "bf16")  # horus.jobs.PRECISIONS
DEFAULT_PRECISION = "tf32"  # a job that states none: PyTorch defaults (TF32 cuDNN convolutions on Ampere+)
HALF_PRECISIONS = frozenset({"amp-fp16", "bf16"})
BF16_TENSOR_ARCHS = frozenset({"ampere", "ada", "hopper", "blackwell"})  # BF16 tensor cores from Ampere on
MTA_TENSORS = 110  # tensors per multi-tensor-apply launch (PyTorch's MultiTensorApply depth-1 tensor list limit)
# PyTorch caching allocator (c10/cuda/CUDACachingAllocator.cpp; CUDA semantics docs, "Memory management"):
# requests round up to 512 B; requests < 1 MiB are packed into 2 MiB segments, 1-10 MiB requests into 20 MiB
# segments (kLargeBuffer), larger ones get their own segment rounded up to 2 MiB.
MIN_BLOCK = 512.0
SMALL_SIZE, SMALL_BUFFER = 1.0 * MIB, 2.0 * MIB
MIN_LARGE_ALLOC, LARGE_BUFFER, ROUND_LARGE = 10.0 * MIB, 20.0 * MIB, 2.0 * MIB
# cuBLAS workspace, allocated through the caching allocator per handle/stream: ":4096:2:16:8" = 8,519,680 B
# before Hopper (aten/src/ATen/cuda/CublasHandlePool.cpp; a 20 MiB segment in torch.cuda.memory_snapshot(),
# discuss.pytorch.org/t/178671), 32 MiB + 128 KiB on Hopper and later (NVIDIA's cuBLAS recommendation for
# sm90, pytorch/pytorch#120925).
CUBLAS_WORKSPACE_BYTES = {"hopper": 32 * MIB + 128 * 1024, "blackwell": 32 * MIB + 128 * 1024}
CUBLAS_WORKSPACE_DEFAULT = 8519680.0


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
    min_kernel_s: float = 2e-6  # GPU-side minimum kernel duration (the host-side launch cost is dispatch_s)
    min_matrix_s: float = 5e-6  # GPU-side minimum duration of a GEMM / convolution kernel
    view_frac: float = 0.3
    rnn_host_frac: float = 0.1
    act_scale: float = 1.0
    transient_scale: float = 1.0
    alloc_frac: float = 0.05  # caching-allocator reserve over the rounded live blocks (fragmentation, cache)
    workspace_mib: float = 0.0  # other library workspace beyond cuBLAS's (fitted; 0 = none)


@dataclass(frozen=True)
class PhysicalParams:
    """All constants: globals, per-GPU-type values, and the set used for uncalibrated GPU types."""

    globals: GlobalParams = field(default_factory=GlobalParams)
    per_gpu: dict[str, GPUParams] = field(default_factory=dict)
    default: GPUParams = field(default_factory=GPUParams)
    provenance: dict[str, object] = field(default_factory=dict)
    _arch_cache: dict[str, GPUParams] = field(default_factory=dict, init=False, repr=False, compare=False)

    def for_gpu(self, spec_name: str) -> GPUParams:
        """Calibrated values of ``spec_name``; else ``default`` with the device-side values (``ARCH_FIELDS``) of
        the calibrated types of the same architecture (geometric mean), where there are any."""
        hit = self.per_gpu.get(spec_name)
        if hit is not None:
            return hit
        hit = self._arch_cache.get(spec_name)
        if hit is None:
            hit = self._arch_cache[spec_name] = _arch_params(self, spec_name)
        return hit

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


def _arch_params(params: PhysicalParams, spec_name: str) -> GPUParams:
    try:
        arch = SPECS[spec_name].architecture
    except KeyError:
        return params.default
    same = [v for k, v in params.per_gpu.items() if k in SPECS and SPECS[k].architecture == arch]
    if not same:
        return params.default
    return replace(params.default, **{f: math.exp(float(np.mean([math.log(getattr(v, f)) for v in same])))
                                      for f in ARCH_FIELDS})


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


def resolve_precision(precision: str | bool | None, amp: bool = False) -> str:
    """The precision an estimate uses: ``precision`` when given (``True``/``False`` = amp-fp16/tf32, the old
    boolean), else amp-fp16 when ``amp``, else ``DEFAULT_PRECISION``; HorusInputError for other names."""
    if isinstance(precision, bool):
        return "amp-fp16" if precision else DEFAULT_PRECISION
    if precision is None:
        return "amp-fp16" if amp else DEFAULT_PRECISION
    if precision in PRECISIONS:
        return precision
    from horus.jobs import normalize_precision

    return normalize_precision(precision) or DEFAULT_PRECISION


def has_bf16_tensor_cores(spec: GPUSpec) -> bool:
    return spec.architecture in BF16_TENSOR_ARCHS


def matrix_peak_flops(spec: GPUSpec, precision: str | bool = DEFAULT_PRECISION) -> float:
    """Peak FLOP/s of matrix ops at ``precision`` (module docstring; a bool is the old ``amp`` flag)."""
    prec = resolve_precision(precision)
    if prec == "fp32":
        tflops = spec.fp32_tflops
    elif prec == "tf32":
        tflops = max(spec.fp32_tflops, spec.tf32_tflops)
    elif prec == "amp-fp16" or has_bf16_tensor_cores(spec):
        tflops = spec.fp16_tflops  # BF16 tensor peak = FP16's from Ampere on (dense, FP32 accumulate)
    else:
        tflops = spec.fp32_tflops  # bf16 on a GPU without BF16 tensor cores: FP32 rate
    return tflops * 1e12


def precision_step(w: Workload, precision: str) -> tuple[float, float]:
    """(extra kernels, extra bytes) per iteration of mixed precision: autocast's weight casts (half) and
    GradScaler's unscale / inf check over the gradients plus the scale update (amp-fp16 only)."""
    if precision not in HALF_PRECISIONS:
        return 0.0, 0.0
    kernels, byts = float(w.param_tensors), 6.0 * w.params
    if precision == "amp-fp16":
        kernels += math.ceil(w.param_tensors / MTA_TENSORS) + 2.0
        byts += 8.0 * w.params
    return kernels, byts


def _check_optimizer(optimizer: str) -> None:
    if optimizer not in OPT_BYTES:
        raise HorusInputError("optimizer", f"expected one of {', '.join(sorted(OPT_BYTES))}, got {optimizer!r}")


@dataclass(frozen=True)
class OpKinds:
    """Masks over a workload's merged operators (computed once per workload)."""

    host: np.ndarray  # views / metadata ops (no kernel)
    matrix: np.ndarray  # GEMM / convolution (min_matrix_s floor)
    rnn_kernel: np.ndarray  # pointwise ops inside an RNN (no floor: cuDNN fuses them)
    rnn: np.ndarray  # any op inside an RNN
    forward_kernels: float  # kernels of the forward pass: a third of the step's (non-RNN) kernels


_KINDS: dict[int, tuple[np.ndarray, OpKinds]] = {}


def op_kinds(w: Workload) -> OpKinds:
    hit = _KINDS.get(id(w.kind))
    if hit is not None and hit[0] is w.kind:
        return hit[1]
    kinds = OpKinds(host=w.mask(HOST, HOST + RNN_SUFFIX), matrix=w.mask(MATRIX, MATRIX + RNN_SUFFIX),
                    rnn_kernel=w.mask(KERNEL + RNN_SUFFIX), rnn=np.char.endswith(w.kind.astype(str), RNN_SUFFIX),
                    forward_kernels=max(1.0, float(w.count[w.mask(KERNEL, MATRIX)].sum()) / 3.0))
    if len(_KINDS) > 50000:
        _KINDS.clear()
    _KINDS[id(w.kind)] = (w.kind, kinds)  # the array is kept alive, so its id is not reused
    return kinds


def op_times(w: Workload, batch: float, spec: GPUSpec, g: GPUParams, p: GlobalParams,
             amp: bool | str = False, bound: list[np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(GPU seconds, host seconds) of each merged operator, times its count; ``amp`` is the precision (a name, or
    the old boolean).

    With ``bound`` (a list), appends the compute-bound and the bandwidth-bound GPU seconds of each operator.
    """
    prec = resolve_precision(amp)
    flops, byts = w.at_batch(batch)
    if prec in HALF_PRECISIONS:  # activations in fp16/bf16: per-sample traffic halves
        byts = w.bytes[:, 0] + 0.5 * w.bytes[:, 1] * batch
    peak = matrix_peak_flops(spec, prec) * g.compute_eff
    bw = spec.mem_bw_gbs * 1e9 * g.bw_eff
    k = op_kinds(w)
    is_host = k.host
    floor = np.where(k.rnn_kernel, 0.0,  # cuDNN fuses an RNN's pointwise gate ops
                     np.where(k.matrix, p.min_matrix_s, p.min_kernel_s))
    t_compute, t_memory = flops / peak, byts / bw
    gpu = np.maximum(np.maximum(t_compute, t_memory), floor)
    gpu = np.where(is_host, 0.0, gpu) * w.count
    if bound is not None:
        compute_bound = (t_compute >= t_memory) & (t_compute >= floor)
        memory_bound = (t_memory > t_compute) & (t_memory >= floor)
        bound += [np.where(compute_bound, gpu, 0.0), np.where(memory_bound, gpu, 0.0)]
    host_weight = np.where(is_host, p.view_frac, 1.0) * np.where(
        k.rnn, p.rnn_host_frac, 1.0)
    return gpu, host_weight * g.dispatch_s * w.count


def estimate(w: Workload, batch: float, spec: GPUSpec, params: PhysicalParams, optimizer: str = "adam",
             amp: bool = False, precision: str | None = None) -> Estimate:
    """Iteration time, busy time, utilization and peak memory of one worker (see module docstring).

    ``precision`` is one of ``PRECISIONS`` (None: amp-fp16 when ``amp``, else ``DEFAULT_PRECISION``).
    """
    _check_optimizer(optimizer)
    prec = resolve_precision(precision, amp)
    g, p = params.for_gpu(spec.name), params.globals
    bound: list[np.ndarray] = []
    gpu, host = op_times(w, batch, spec, g, p, prec, bound)
    extra_kernels, extra_bytes = precision_step(w, prec)
    opt_kernels = w.param_tensors * OPT_KERNELS[optimizer] + extra_kernels
    opt_bytes = w.params * 4 * OPT_BYTES[optimizer] + extra_bytes
    opt_gpu = max(opt_bytes / (spec.mem_bw_gbs * 1e9 * g.bw_eff), opt_kernels * p.min_kernel_s)
    busy = float(gpu.sum()) + opt_gpu
    host_s = float(host.sum()) + opt_kernels * g.dispatch_s
    data = g.data_s * w.input_elements * batch
    k = SMOOTH_MAX_POWER
    overlap = (busy ** k + host_s ** k + data ** k) ** (1.0 / k)
    iter_s = overlap + g.step_s
    opt_memory = opt_bytes / (spec.mem_bw_gbs * 1e9 * g.bw_eff)
    return Estimate(busy, host_s, iter_s, min(1.0, busy / iter_s),
                    memory_mib(w, batch, g, p, optimizer, precision=prec, spec=spec),
                    compute_s=float(bound[0].sum()), memory_s=float(bound[1].sum()) + min(opt_memory, opt_gpu),
                    step_s=g.step_s)


def reserved_bytes(blocks: list[tuple[float, float]]) -> float:
    """Bytes the caching allocator reserves for live tensors given as ``(size in bytes, count)`` (see the
    constants): each request rounded up (to 512 B, or to 2 MiB from 10 MiB on), requests under 1 MiB packed into
    2 MiB segments and 1-10 MiB requests into 20 MiB segments. The sizes here are means over many tensors, so
    each rounding costs its expected waste (half the rounding unit per request, half a segment per pool), which
    also keeps the model smooth for calibration."""
    small = mid = large = 0.0
    for size, count in blocks:
        if size <= 0 or count <= 0:
            continue
        if size >= MIN_LARGE_ALLOC:
            large += (size + ROUND_LARGE / 2) * count
        elif size >= SMALL_SIZE:
            mid += (size + MIN_BLOCK / 2) * count
        else:
            small += (size + MIN_BLOCK / 2) * count
    return sum(pool + segment / 2 for pool, segment in ((small, SMALL_BUFFER), (mid, LARGE_BUFFER)) if pool) + large


def cublas_workspace_bytes(spec: GPUSpec | None) -> float:
    """The cuBLAS workspace's reserve: its own 20 MiB segment before Hopper, 34 MiB (2 MiB-rounded) from Hopper."""
    size = CUBLAS_WORKSPACE_BYTES.get(spec.architecture, CUBLAS_WORKSPACE_DEFAULT) if spec else CUBLAS_WORKSPACE_DEFAULT
    return reserved_bytes([(size, 1.0)])


def memory_mib(w: Workload, batch: float, g: GPUParams, p: GlobalParams, optimizer: str = "adam",
               amp: bool = False, precision: str | None = None, spec: GPUSpec | None = None) -> float:
    """Peak memory (MiB) of one worker, as nvidia-smi shows it:

    context_mib (CUDA context + loaded kernels of the driver / framework / libraries, per GPU type)
    + (1 + alloc_frac) x caching-allocator reserve (``reserved_bytes``) of the live tensors at the peak:
    FP32 weights, gradients and optimizer state (per parameter tensor), half weight copies under
    amp-fp16/bf16 (autocast's cast cache), act_scale x the saved activations (halved under half precision,
    one tensor per forward kernel) and transient_scale x the largest operator's tensors
    + the cuBLAS workspace segment (``cublas_workspace_bytes``) + workspace_mib.
    """
    _check_optimizer(optimizer)
    prec = resolve_precision(precision, amp)
    act_dtype = 0.5 if prec in HALF_PRECISIONS else 1.0
    tensors = max(1.0, float(w.param_tensors))
    copies = 2 + int(OPT_STATE_COPIES[optimizer])  # weights, gradients, optimizer state (FP32)
    blocks = [(w.params * 4 / tensors, copies * tensors)]
    if act_dtype < 1.0:
        blocks.append((w.params * 2 / tensors, tensors))  # half weight copies
    n_saved = op_kinds(w).forward_kernels  # one saved tensor per forward kernel
    acts = p.act_scale * w.activation_bytes_per_sample * batch * act_dtype
    blocks.append((acts / n_saved, n_saved))
    _, byts = w.at_batch(batch)
    blocks.append((p.transient_scale * float(byts.max()) * act_dtype if len(byts) else 0.0, 1.0))
    reserve = (1.0 + p.alloc_frac) * reserved_bytes(blocks) + cublas_workspace_bytes(spec)
    return g.context_mib + p.workspace_mib + reserve / MIB


@PREDICTORS.register("physical")
class PhysicalPredictor(Predictor):
    """Roofline + dispatch model of one iteration with calibrated per-GPU-type constants."""

    name = "physical"

    def __init__(self, params: PhysicalParams | None = None, optimizer: str = "adam", amp: bool = False,
                 precision: str | None = None) -> None:
        _check_optimizer(optimizer)
        self.params = params if params is not None else shipped_params()
        self.optimizer = optimizer  # for jobs that state none
        self.precision = resolve_precision(precision, amp)  # for jobs that state none (default tf32)
        self.amp = self.precision in HALF_PRECISIONS
        self._cache: dict[tuple[str, str], Prediction] = {}

    def predict(self, job: JobSpec, gpu_type: GPUType) -> Prediction:
        """The job's own input size, precision and optimizer where it states them, else the defaults."""
        key = (job.job_type, gpu_type.name)
        hit = self._cache.get(key)
        if hit is None:
            spec = gpu_spec(gpu_type.name)
            est = estimate(catalog_workload(job.model, job.input_size), job.batch_size, spec, self.params,
                           job.optimizer or self.optimizer, precision=job.precision or self.precision)
            hit = self._cache[key] = Prediction(util=est.util, mem_mib=est.mem_mib, iter_time_s=est.iter_time_s)
        return hit

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "optimizer": self.optimizer, "precision": self.precision,
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
