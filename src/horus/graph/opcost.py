"""Per-operator cost records of one training step (needs torch), for the physical predictor.

Every ATen op that one forward + backward pass dispatches is recorded under ``FakeTensorMode`` (no
memory, no compute) by a ``TorchDispatchMode``:

* ``flops``: ``torch.utils.flop_counter``'s formula for the op (2 x MACs; 0 for ops it does not count,
  e.g. elementwise), with the project's grouped-convolution backward fix;
* ``bytes``: bytes of every tensor the op reads plus every tensor it writes, a broadcast view counted at its
  storage size (caches are ignored);
* ``kind``: ``matrix`` (matmuls, convolutions, attention: tensor-core eligible), ``kernel`` (any other op
  that launches GPU work) or ``host`` (views, metadata and allocation ops: host work, no kernel).
  Ops inside an ``nn.LSTM``/``nn.GRU``/``nn.RNN`` (forward, and their backward, found through the autograd
  sequence numbers of the module's forward ops) get the suffix ``_rnn``: on a GPU, cuDNN launches those
  per-time-step kernels itself, so they cost GPU time but no per-op framework dispatch on the host.

Recording at two batch sizes gives each op's cost as ``fixed + per_sample x batch``; identical ops are
merged with a count. Each model is recorded at several input sizes (``input_size`` column); two pseudo-kind rows
per size carry the trainable parameter tensors (``param_tensors``) and the step's per-sample totals
(``sample_totals``: train FLOPs and saved-activation bytes, as the catalog counts them). The result is the shipped
table ``horus/data/model_ops.csv`` (see ``horus.graph.build_catalog``) so the simulator needs no torch.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import flop_registry, shape_wrapper

from horus.graph.extract import _conv_backward_flops, _fake_mode_for, default_loss
from horus.graph.ops import MATMUL_OPS, op_name

OPS_COLUMNS: tuple[str, ...] = ("name", "input_size", "kind", "count", "flops_fixed", "flops_per_sample", "bytes_fixed",
                                "bytes_per_sample")
_MATRIX_OPS = MATMUL_OPS | {"addmm", "convolution", "convolution_backward", "_convolution", "linear",
                            "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_efficient_attention",
                            "_scaled_dot_product_flash_attention", "_scaled_dot_product_cudnn_attention",
                            "_scaled_dot_product_flash_attention_for_cpu_backward",
                            "_scaled_dot_product_efficient_attention_backward",
                            "_scaled_dot_product_flash_attention_backward"}
_HOST_OPS = frozenset({"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "lift_fresh",
                       "_local_scalar_dense", "sym_size", "sym_stride", "sym_numel", "_unsafe_view", "is_same_size",
                       "detach", "alias", "set_", "resize_"})
_CONV_BACKWARD = shape_wrapper(_conv_backward_flops)
# Pseudo-kind of one row per model: ``count`` = trainable parameter tensors (optimizer-step kernels).
PARAM_TENSORS = "param_tensors"
# Pseudo-kind of one row per model and size: flops_per_sample = train FLOPs, bytes_per_sample = saved activations.
SAMPLE_TOTALS = "sample_totals"


@dataclass(frozen=True)
class OpRecord:
    name: str
    kind: str  # matrix | kernel | host
    flops: float
    bytes: float


def _tensor_bytes(values: Any) -> float:
    """Bytes of the tensors in ``values``; a broadcast (expanded) view counts its storage, not its logical size."""
    leaves, _ = tree_flatten(values)
    total = 0
    for t in leaves:
        if isinstance(t, torch.Tensor):
            logical = t.numel() * t.element_size()
            try:
                total += min(logical, t.untyped_storage().nbytes())
            except (RuntimeError, NotImplementedError):
                total += logical
    return float(total)


_RNN_MODULES = (torch.nn.LSTM, torch.nn.GRU, torch.nn.RNN)


class _Recorder(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[OpRecord] = []
        self.muted = False
        self.rnn_depth = 0
        self.rnn_ranges: list[tuple[int, int]] = []
        self._start = 0

    def _probe(self) -> int:
        """The next autograd sequence number (consumes one)."""
        self.muted = True
        try:
            return torch.zeros(1, requires_grad=True).clone().grad_fn._sequence_nr()  # type: ignore[union-attr]
        finally:
            self.muted = False

    def enter_rnn(self, *_: Any) -> None:
        if self.rnn_depth == 0:
            self._start = self._probe()
        self.rnn_depth += 1

    def exit_rnn(self, *_: Any) -> None:
        self.rnn_depth -= 1
        if self.rnn_depth == 0:
            self.rnn_ranges.append((self._start, self._probe()))

    def _in_rnn(self) -> bool:
        if self.rnn_depth > 0:
            return True
        node = torch._C._current_autograd_node()
        if node is None:
            return False
        seq = node._sequence_nr()
        return any(lo < seq < hi for lo, hi in self.rnn_ranges)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if self.muted or func.namespace == "prim":  # prim.device & co: metadata queries, no work
            return out
        name = op_name(func)
        packet = func._overloadpacket
        suffix = "_rnn" if self._in_rnn() else ""
        if name in _HOST_OPS or getattr(func, "is_view", False):
            self.records.append(OpRecord(name, "host" + suffix, 0.0, 0.0))
            return out
        if packet is torch.ops.aten.convolution_backward:
            flops = _CONV_BACKWARD(*args, **kwargs, out_val=out)
        elif packet in flop_registry:
            flops = flop_registry[packet](*args, **kwargs, out_val=out)
        else:
            flops = 0
        kind = ("matrix" if (name in _MATRIX_OPS or flops > 0) else "kernel") + suffix
        self.records.append(OpRecord(name, kind, float(flops), _tensor_bytes((args, kwargs)) + _tensor_bytes(out)))
        return out


def record_ops(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...], loss_fn: Any = None) -> list[OpRecord]:
    """Every op of one forward + loss + backward pass (gradients w.r.t. trainable parameters)."""
    params = [p for p in model.parameters() if p.requires_grad]
    model.train()
    recorder = _Recorder()
    hooks = [h for m in model.modules() if isinstance(m, _RNN_MODULES)
             for h in (m.register_forward_pre_hook(recorder.enter_rnn), m.register_forward_hook(recorder.exit_rnn))]
    try:
        with _fake_mode_for(inputs), recorder:
            output = model(*inputs)
            loss = (loss_fn or default_loss)(output, inputs)
            if params:
                torch.autograd.grad(loss, params, allow_unused=True)
    finally:
        for h in hooks:
            h.remove()
    return recorder.records


def _linear(a: float, b: float, batch_a: int, batch_b: int) -> tuple[float, float]:
    """(fixed, per_sample) of the line through (batch_a, a) and (batch_b, b), clipped to be non-negative."""
    slope = max(0.0, (b - a) / (batch_b - batch_a))
    return max(0.0, a - slope * batch_a), slope


def op_table(small: list[OpRecord], large: list[OpRecord], batch_small: int, batch_large: int) -> list[dict[str, Any]]:
    """Merge two recordings of the same step at two batch sizes into linear per-op costs with counts.

    When the op sequences differ (data-dependent control flow), every op of the larger recording is
    taken as proportional to the batch (fixed part 0).
    """
    same = len(small) == len(large) and all(s.name == g.name for s, g in zip(small, large))
    merged: Counter[tuple[str, float, float, float, float]] = Counter()
    for i, big in enumerate(large):
        if same:
            f0, f1 = _linear(small[i].flops, big.flops, batch_small, batch_large)
            b0, b1 = _linear(small[i].bytes, big.bytes, batch_small, batch_large)
        else:
            f0, f1, b0, b1 = 0.0, big.flops / batch_large, 0.0, big.bytes / batch_large
        key = (big.kind, *(float(f"{v:.4g}") for v in (f0, f1, b0, b1)))
        merged[key] += 1
    return [{"kind": k[0], "count": n, "flops_fixed": k[1], "flops_per_sample": k[2], "bytes_fixed": k[3],
             "bytes_per_sample": k[4]} for k, n in sorted(merged.items())]


def zoo_op_table(name: str, batches: tuple[int, int] = (2, 4), input_size: int | None = None) -> list[dict[str, Any]]:
    """``op_table`` rows (with ``name`` and ``input_size``) for zoo model ``name`` (None: its default size).

    The ``sample_totals`` row holds the catalog's per-sample train FLOPs and saved-activation bytes
    (``count_flops_and_activations`` at batch ``batches[0]``, divided by it and truncated, as
    ``build_catalog.catalog_row``).
    """
    from horus.graph.extract import build_zoo_model, count_flops_and_activations
    from horus.zoo import get_entry

    entry = get_entry(name)
    recs = []
    for batch in batches:
        model, inputs, size = build_zoo_model(name, batch, input_size)
        recs.append(record_ops(model, inputs, entry.loss_fn))
    tensors = sum(1 for p in model.parameters() if p.requires_grad)
    rows = op_table(recs[0], recs[1], *batches)
    rows.append({"kind": PARAM_TENSORS, "count": tensors, "flops_fixed": 0.0, "flops_per_sample": 0.0,
                 "bytes_fixed": 0.0, "bytes_per_sample": 0.0})
    model, inputs, _ = build_zoo_model(name, batches[0], input_size)
    _, train, saved = count_flops_and_activations(model, inputs, entry.loss_fn)
    rows.append({"kind": SAMPLE_TOTALS, "count": 1, "flops_fixed": 0.0,
                 "flops_per_sample": float(int(train / batches[0])), "bytes_fixed": 0.0,
                 "bytes_per_sample": float(int(saved / batches[0]))})
    return [{"name": name, "input_size": size, **row} for row in rows]
