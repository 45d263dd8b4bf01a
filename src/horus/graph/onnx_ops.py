"""Per-operator table of one *training* step, estimated from an ONNX inference graph (no runtime, no torch).

The physical predictor reads a model as merged operators with FLOPs and bytes as ``fixed + per_sample x batch``
(``horus.graph.opcost.OPS_COLUMNS``). A zoo model's table is recorded from its real training step; an uploaded
ONNX file holds only the forward graph, so the backward pass is derived node by node (fp32, the export's
batch ``B0`` = the first input's leading dimension):

* a matrix node (Conv, ConvTranspose, Gemm, MatMul with 2 x MACs FLOPs): forward reads its input and weights and
  writes its output; backward is two matrix ops of the same FLOPs -- the input gradient (skipped when the input is
  a graph input, as autograd does) and the weight gradient (only when a weight is a trained initializer);
* a recurrent node (LSTM, GRU, RNN; MACs = steps x batch x directions x gate rows x (input + hidden)): the same
  three ops, kind ``matrix_rnn``, one per time step (cuDNN launches per-step kernels), plus one pointwise
  ``kernel_rnn`` gate op per step each way;
* any other compute node: one kernel reading its inputs and writing its outputs; backward one kernel moving
  1.5 x those bytes (the output gradient and a saved tensor in, the input gradient out);
* shape-only nodes (Reshape, Shape, Flatten, Squeeze, Unsqueeze, Identity, Constant, ...): host-side only
  (a view in PyTorch);
* the loss: a log-softmax + NLL over the graph's outputs, two kernels forward and two backward;
* ``param_tensors``: float initializers with at least one dimension (each gets optimizer-step kernels).

Weights' bytes are the fixed part, activations' bytes and every FLOP the per-sample part (divided by ``B0``).
Compared with the recorded table of the same network (``tests/test_onnx_ops.py`` exports zoo models), the
derived step has the same matrix FLOPs and differs in kernel count and bytes: a fused PyTorch op may be
several ONNX nodes and the reverse.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from horus.graph.onnx_features import _node_macs

F32 = 4.0
_SHAPE_OPS = frozenset({"Reshape", "Shape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Constant",
                        "ConstantOfShape", "Range", "Size", "Expand"})
_MATRIX_OPS = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul"})
_RECURRENT_OPS = frozenset({"LSTM", "GRU", "RNN"})
_FLOAT_TYPES = {1, 10, 11, 16}
PARAM_TENSORS = "param_tensors"


def _numel(shape: list[int] | None) -> float:
    return float(math.prod(shape)) if shape else 0.0


def _recurrent_macs(node: Any, shapes: dict[str, list[int]], init_shapes: dict[str, list[int]]) -> tuple[float, int]:
    """(MACs, time steps) of an LSTM/GRU/RNN node: X (steps, batch, input), W (dirs, gates x hidden, input),
    R (dirs, gates x hidden, hidden); (0, 1) when shapes are unknown."""
    known = {**shapes, **init_shapes}
    x, w, r = (known.get(node.input[i]) if len(node.input) > i else None for i in range(3))
    if not (x and w and r and len(x) == 3 and len(w) == 3 and len(r) == 3):
        return 0.0, 1
    steps, batch = x[0], x[1]
    return float(steps * batch * w[0] * w[1] * (w[2] + r[2])), max(int(steps), 1)


def onnx_op_rows(graph: Any, shapes: dict[str, list[int]], init_shapes: dict[str, list[int]],
                 batch: int) -> list[dict[str, Any]]:
    """Merged training-step operator rows (``OPS_COLUMNS`` without ``name``) of a shape-inferred ONNX graph."""
    batch = max(int(batch), 1)
    float_inits = {t.name for t in graph.initializer if t.data_type in _FLOAT_TYPES and len(t.dims) > 0}
    graph_inputs = {i.name for i in graph.input} - set(init_shapes)
    size = {name: _numel(s) * F32 for name, s in {**shapes, **init_shapes}.items()}
    merged: Counter[tuple[str, float, float, float, float]] = Counter()

    def add(kind: str, flops: float, fixed_bytes: float, sample_bytes: float, count: int = 1) -> None:
        key = (kind, float(f"{flops / batch:.4g}"), float(f"{fixed_bytes:.4g}"), float(f"{sample_bytes / batch:.4g}"))
        merged[(key[0], 0.0, key[1], key[2], key[3])] += count

    for node in graph.node:
        weights = sum(size.get(i, 0.0) for i in node.input if i in init_shapes)
        acts_in = sum(size.get(i, 0.0) for i in node.input if i and i not in init_shapes)
        acts_out = sum(size.get(o, 0.0) for o in node.output)
        trained = any(i in float_inits for i in node.input)
        needs_input_grad = not all(i in graph_inputs or i in init_shapes or not i for i in node.input)
        if node.op_type in _SHAPE_OPS:
            add("host", 0.0, 0.0, 0.0)
        elif node.op_type in _RECURRENT_OPS:
            macs, steps = _recurrent_macs(node, shapes, init_shapes)
            per_step = (2.0 * macs / steps, weights, (acts_in + acts_out) / steps)
            add("matrix_rnn", *per_step, count=steps)
            add("kernel_rnn", 0.0, 0.0, 2.0 * acts_out / steps, count=2 * steps)
            if needs_input_grad:
                add("matrix_rnn", *per_step, count=steps)
            if trained:
                add("matrix_rnn", *per_step, count=steps)
        elif node.op_type in _MATRIX_OPS and (macs := _node_macs(node, shapes, init_shapes)) > 0:
            add("matrix", 2.0 * macs, weights, acts_in + acts_out)
            if needs_input_grad:
                add("matrix", 2.0 * macs, weights, acts_in + acts_out)
            if trained:
                add("matrix", 2.0 * macs, weights, acts_in + acts_out)
                if len(node.input) > 2 and node.input[2] in float_inits:  # bias gradient: a reduction
                    add("kernel", 0.0, size.get(node.input[2], 0.0), acts_out)
        else:
            add("kernel", 0.0, weights, acts_in + acts_out)
            if needs_input_grad or trained:
                add("kernel", 0.0, weights, 1.5 * (acts_in + acts_out))
    outputs = sum(size.get(o.name, 0.0) for o in graph.output)
    for _ in range(4):  # loss: log-softmax + NLL, forward and backward
        add("kernel", 0.0, 0.0, 2.0 * outputs)
    rows = [{"kind": k[0], "count": n, "flops_fixed": k[1], "flops_per_sample": k[2], "bytes_fixed": k[3],
             "bytes_per_sample": k[4]} for k, n in sorted(merged.items())]
    rows.append({"kind": PARAM_TENSORS, "count": len(float_inits), "flops_fixed": 0.0, "flops_per_sample": 0.0,
                 "bytes_fixed": 0.0, "bytes_per_sample": 0.0})
    return rows


def onnx_file_ops(path: Any) -> list[dict[str, Any]]:
    """``onnx_op_rows`` of an ONNX file (HorusInputError naming it when it is not a usable model)."""
    from horus.graph.onnx_features import graph_batch, load_onnx

    graph, shapes, init_shapes = load_onnx(path)
    return onnx_op_rows(graph, shapes, init_shapes, graph_batch(graph, shapes, init_shapes))


def onnx_model_analysis(data: bytes, name: str, source: str) -> tuple[Any, list[dict[str, Any]]]:
    """(catalog ModelInfo, operator rows) of an ONNX file's bytes (``register_model``'s arguments);
    HorusInputError naming ``source`` when it is not a usable model."""
    import tempfile
    from pathlib import Path

    from horus.errors import HorusInputError
    from horus.graph.onnx_features import onnx_file_info

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.onnx"
        path.write_bytes(data)
        info, _ = onnx_file_info(path, name, source)
        try:
            ops = onnx_file_ops(path)
        except HorusInputError as exc:
            raise HorusInputError(source, exc.message) from None
        return info, ops
