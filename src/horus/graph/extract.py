"""Feature vector of a PyTorch training workload without running it on real data.

* FLOPs: ``torch.utils.flop_counter.FlopCounterMode`` over one forward pass and one backward pass
  (``torch.autograd.grad`` of the loss w.r.t. the trainable parameters), all under ``FakeTensorMode``
  so no tensor memory is allocated (FLOPs = 2 x multiply-accumulates; elementwise ops are not counted).
* activation_bytes: bytes of the distinct non-parameter tensors autograd saves for backward during that
  forward pass (``torch.autograd.graph.saved_tensors_hooks``).
* op histogram and depth: the ATen graph of ``torch.export.export`` (training IR), see ``graph_stats``.
"""

from __future__ import annotations

import contextlib
import logging
import math
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils.flop_counter import FlopCounterMode

from horus.catalog import FEATURE_NAMES, OP_KINDS
from horus.errors import HorusInputError
from horus.graph.ops import MATMUL_OPS, VIEW_OPS, WEIGHTED_KINDS, kind_of, op_name

LossFn = Callable[[Any, tuple[torch.Tensor, ...]], torch.Tensor]


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def _flat_tensors(output: Any) -> list[torch.Tensor]:
    if isinstance(output, torch.Tensor):
        return [output]
    if isinstance(output, dict):
        output = list(output.values())
    if isinstance(output, (tuple, list)):
        return [t for item in output for t in _flat_tensors(item)]
    return []


def default_loss(output: Any, inputs: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """Sum of the means of every floating-point output tensor."""
    tensors = [t for t in _flat_tensors(output) if t.is_floating_point()]
    if not tensors:
        raise ValueError("model output has no floating-point tensor to take a loss of")
    return sum(t.float().mean() for t in tensors)  # type: ignore[return-value]


def _conv_backward_flops(
    grad_out_shape: Any, x_shape: Any, w_shape: Any, _bias: Any, _stride: Any, _padding: Any, _dilation: Any,
    transposed: bool, _output_padding: Any, _groups: Any, output_mask: Any, **_: Any,
) -> int:
    """FLOPs of ``convolution_backward``: one forward conv's MACs x 2 per requested gradient (input, weight).

    Replaces torch's formula, which ignores ``groups`` when transposing the weight and so overcounts
    depthwise convolutions (MobileNet, EfficientNet) by the channel count.
    """
    # weight: (out, in/groups, k...) or, transposed, (in, out/groups, k...); each MAC pairs one "output-side"
    # element with in/groups x kernel weights
    outputs = x_shape if transposed else grad_out_shape
    macs = math.prod(outputs) * math.prod(w_shape[1:])
    return 2 * macs * (int(bool(output_mask[0])) + int(bool(output_mask[1])))


@contextlib.contextmanager
def _fake_mode_for(inputs: tuple[torch.Tensor, ...]) -> Iterator[FakeTensorMode]:
    """The fake mode of already-fake inputs, or a fresh one that fakes real/meta tensors on first use."""
    from torch._guards import detect_fake_mode

    mode = detect_fake_mode(inputs)
    if mode is not None:
        with mode:
            yield mode
        return
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    with mode:
        yield mode


def count_flops_and_activations(
    model: nn.Module, inputs: tuple[torch.Tensor, ...], loss_fn: LossFn | None = None, *, backward: bool = True,
) -> tuple[float, float, float]:
    """(forward FLOPs, forward+backward FLOPs, saved-activation bytes) of one training step.

    With ``backward=False`` only the forward pass runs (the second value then equals the first).
    """
    params = [p for p in model.parameters() if p.requires_grad]
    with _fake_mode_for(inputs) as mode:
        fake_params = [mode.from_tensor(p) if not isinstance(p, torch._subclasses.FakeTensor) else p for p in params]
        param_storages = {StorageWeakRef(p.untyped_storage()) for p in fake_params}
        saved: dict[StorageWeakRef, int] = {}

        def pack(t: torch.Tensor) -> torch.Tensor:
            ref = StorageWeakRef(t.untyped_storage())
            if ref not in param_storages and not (t.is_leaf and t.requires_grad):
                saved[ref] = t.untyped_storage().nbytes()
            return t

        custom = {torch.ops.aten.convolution_backward: _conv_backward_flops}
        with FlopCounterMode(display=False, custom_mapping=custom) as counter:
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                output = model(*inputs)
            forward = counter.get_total_flops()
            if backward and params:
                loss = (loss_fn or default_loss)(output, inputs)
                torch.autograd.grad(loss, params, allow_unused=True)
            total = counter.get_total_flops()
    return float(forward), float(total), float(sum(saved.values()))


def _weight_sources(ep: torch.export.ExportedProgram) -> set[str]:
    signature = ep.graph_signature
    return set(signature.inputs_to_parameters) | set(getattr(signature, "inputs_to_lifted_tensor_constants", {}))


def _traces_to(node: Any, names: set[str]) -> bool:
    """Whether ``node`` is one of ``names`` seen through view-like ops."""
    while True:
        if getattr(node, "op", None) == "placeholder":
            return node.name in names
        if getattr(node, "op", None) != "call_function" or op_name(node.target) not in VIEW_OPS or not node.args:
            return False
        node = node.args[0]


def graph_stats(ep: torch.export.ExportedProgram) -> tuple[dict[str, int], int]:
    """Op-kind histogram and depth (weighted layers on the longest path) of an exported graph.

    Matrix products with a weight operand count as ``linear``; products of two activations as half an
    ``attention`` (scores and values), a fused attention op as one. In-place updates of buffers (batch-norm
    step counters) are ignored. Norm modules built from primitive ops (e.g. T5's RMS norm) count by module.
    """
    weights = _weight_sources(ep)
    buffers = set(ep.graph_signature.inputs_to_buffers)
    counts: Counter[str] = Counter()
    activation_matmuls = 0
    norm_modules: set[str] = set()
    modules_with_norm_op: set[str] = set()
    depth: dict[Any, int] = {}
    for node in ep.graph.nodes:
        longest = max((depth.get(arg, 0) for arg in node.all_input_nodes), default=0)
        if node.op != "call_function":
            depth[node] = longest
            continue
        name = op_name(node.target)
        kind = kind_of(name)
        if kind == "elementwise" and node.args and getattr(node.args[0], "name", None) in buffers:
            kind = None
        if name in MATMUL_OPS:
            operands = [a for a in node.args if hasattr(a, "op")]
            if any(_traces_to(a, weights) for a in operands):
                kind = "linear"
            else:
                activation_matmuls += 1
        weight = 0
        if kind is not None:
            counts[kind] += 1
            if kind in WEIGHTED_KINDS:
                weight = int(node.args[4]) if kind == "recurrent" and len(node.args) > 4 and isinstance(node.args[4], int) else 1
        depth[node] = longest + weight
        stack = node.meta.get("nn_module_stack") or {}
        for path, (_, cls) in stack.items():
            if str(getattr(cls, "__name__", cls)).endswith("Norm"):
                norm_modules.add(path)
                if kind == "norm":
                    modules_with_norm_op.add(path)
    counts["attention"] += (activation_matmuls + 1) // 2
    counts["norm"] += len(norm_modules - modules_with_norm_op)
    return {k: int(counts.get(k, 0)) for k in OP_KINDS}, max(depth.values(), default=0)


@contextlib.contextmanager
def _quiet_export() -> Iterator[None]:
    """Silence torch.export's graph dumps, attribute warnings and FakeTensor's logged tracebacks (failures are
    re-raised as one line)."""
    loggers = [logging.getLogger(n) for n in ("torch.fx.experimental.symbolic_shapes", "torch.export", "torch._export",
                                                "torch._subclasses.fake_tensor")]  # its meta failures: tracebacks
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR + 10)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def export_graph(model: nn.Module, inputs: tuple[torch.Tensor, ...], source: str) -> torch.export.ExportedProgram:
    """``torch.export.export`` (non-strict); any failure becomes a one-line HorusInputError."""
    try:
        with _quiet_export():
            return torch.export.export(model, inputs, strict=False)
    except Exception as exc:  # noqa: BLE001 - every export failure is bad input here
        raise HorusInputError(source, f"torch.export failed, cannot read the graph ({_one_line(exc)})") from None


def extract_features(
    model: nn.Module, example_inputs: tuple[torch.Tensor, ...], *, batch_size: int, input_size: int,
    loss_fn: LossFn | None = None, source: str = "model",
) -> dict[str, float]:
    """The ``horus.catalog.FEATURE_NAMES`` vector of one training step of ``model`` on ``example_inputs``.

    The model may hold real, meta or fake tensors; counting always runs under ``FakeTensorMode``.
    Raises HorusInputError (naming ``source``) when the graph cannot be exported or counted.
    """
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    model.train()
    ep = export_graph(model, tuple(example_inputs), source)
    try:
        forward, total, activations = count_flops_and_activations(model, tuple(example_inputs), loss_fn or default_loss)
    except Exception as exc:  # noqa: BLE001
        raise HorusInputError(source, f"cannot count FLOPs under FakeTensorMode ({_one_line(exc)})") from None
    op_counts, depth = graph_stats(ep)
    values: dict[str, float] = {
        "params": float(sum(p.numel() for p in model.parameters() if p.requires_grad)),
        "forward_flops": forward,
        "train_flops": total,
        "activation_bytes": activations,
        "batch_size": float(batch_size),
        "input_size": float(input_size),
        "depth": float(depth),
        **{f"n_{k}": float(v) for k, v in op_counts.items()},
    }
    return {name: values[name] for name in FEATURE_NAMES}


def build_zoo_model(name: str, batch_size: int, input_size: int | None = None) -> tuple[nn.Module, tuple[torch.Tensor, ...], int]:
    """Build a zoo model and its inputs on the meta device (no memory); returns (model, inputs, input size)."""
    from horus.zoo import get_entry

    entry = get_entry(name)
    size = entry.size(input_size)
    with torch.device("meta"):
        model = entry.build(size)
        inputs = entry.example_input(batch_size, size, "meta")
    return model, inputs, size


def extract_zoo_features(name: str, batch_size: int, input_size: int | None = None) -> dict[str, float]:
    """``extract_features`` for a zoo model, built on the meta device."""
    from horus.zoo import get_entry

    model, inputs, size = build_zoo_model(name, batch_size, input_size)
    return extract_features(model, inputs, batch_size=batch_size, input_size=size,
                            loss_fn=get_entry(name).loss_fn, source=f"zoo model {name!r}")
