"""Feature vector of an ONNX model file from its graph alone (no runtime, no torch).

params = elements of the float initializers; FLOPs (2 x MACs) of Conv, ConvTranspose, Gemm and MatMul from
shapes inferred by ``onnx.shape_inference``; op histogram from node op types; depth = weighted ops on the
longest path. Not derivable from a plain inference graph: ``train_flops`` (reported as 3 x forward, the
usual backward ~ 2 x forward rule) and ``activation_bytes`` (sum of inferred intermediate tensor sizes):
both are listed in the result's ``"estimated"`` extra.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any

from horus.catalog import FEATURE_NAMES, OP_KINDS, ModelInfo
from horus.errors import HorusInputError

_ONNX_KIND: dict[str, str] = {
    **dict.fromkeys(("Conv", "ConvTranspose", "QLinearConv", "ConvInteger"), "conv"),
    **dict.fromkeys(("Gemm", "MatMul", "MatMulInteger", "QLinearMatMul"), "linear"),
    **dict.fromkeys(("Attention", "MultiHeadAttention"), "attention"),
    **dict.fromkeys(("BatchNormalization", "LayerNormalization", "InstanceNormalization", "GroupNormalization",
                     "RMSNormalization", "SimplifiedLayerNormalization", "LRN"), "norm"),
    **dict.fromkeys(("Relu", "Sigmoid", "Tanh", "Gelu", "LeakyRelu", "Elu", "Selu", "HardSigmoid", "HardSwish",
                     "Softmax", "LogSoftmax", "Softplus", "Mish", "PRelu", "Clip"), "activation"),
    **dict.fromkeys(("MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "LpPool"), "pooling"),
    **dict.fromkeys(("Gather",), "embedding"),
    **dict.fromkeys(("LSTM", "GRU", "RNN"), "recurrent"),
    **dict.fromkeys(("Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Reciprocal", "Neg", "Exp", "Log", "Abs", "Erf",
                     "Where", "Max", "Min"), "elementwise"),
}
_WEIGHTED = {"conv", "linear", "recurrent"}
_FLOAT_TYPES = {1, 10, 11, 16}  # FLOAT, FLOAT16, DOUBLE, BFLOAT16


def _shape(value_info: Any) -> list[int] | None:
    dims = value_info.type.tensor_type.shape.dim
    shape = [d.dim_value if d.HasField("dim_value") else -1 for d in dims]
    return None if not shape or min(shape) < 0 else shape


def _node_macs(node: Any, shapes: dict[str, list[int]], init_shapes: dict[str, list[int]]) -> float:
    """Multiply-accumulates of one Conv/ConvTranspose/Gemm/MatMul node (0 when shapes are unknown)."""
    known = {**shapes, **init_shapes}
    ins = [known.get(name) for name in node.input]
    out = shapes.get(node.output[0]) if node.output else None
    if node.op_type in ("Conv", "ConvTranspose") and len(ins) > 1 and ins[0] and ins[1] and out:
        weight = ins[1]  # Conv: (out, in/groups, k...); ConvTranspose: (in, out/groups, k...)
        kernel = math.prod(weight[2:])
        if node.op_type == "Conv":
            return math.prod(out) * weight[1] * kernel
        return math.prod(ins[0]) * weight[1] * kernel
    if node.op_type in ("Gemm", "MatMul") and len(ins) > 1 and ins[0] and ins[1] and out:
        a = ins[0]
        trans_a = any(attr.name == "transA" and attr.i for attr in node.attribute)
        inner = a[-2] if (node.op_type == "Gemm" and trans_a) else a[-1]
        return math.prod(out) * inner
    return 0.0


def load_onnx(path: str | Path) -> tuple[Any, dict[str, list[int]], dict[str, list[int]]]:
    """(shape-inferred graph, activation shapes, initializer shapes) of an ONNX file; HorusInputError naming the
    file when it is not a model that takes data and has an operator Horus counts."""
    import onnx
    from onnx import shape_inference

    from horus.validation import MAX_TABLE_BYTES, read_input_bytes

    path = Path(path)
    source = str(path)
    raw = read_input_bytes(path, "an ONNX model file", MAX_TABLE_BYTES)
    if not raw:
        raise HorusInputError(source, "empty file (expected an ONNX model)")
    try:
        model = onnx.load(str(path))  # from the path: large models keep weights in side files
        onnx.checker.check_model(model)
        model = shape_inference.infer_shapes(model)
    except FileNotFoundError:
        raise HorusInputError(source, "no such ONNX file") from None
    except Exception as exc:  # noqa: BLE001 - any parse/check failure is a malformed file
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise HorusInputError(source, f"not a valid ONNX model ({type(exc).__name__}: {first[:200]})") from None
    graph = model.graph
    init_shapes = {t.name: list(t.dims) for t in graph.initializer}
    shapes: dict[str, list[int]] = {}
    for info in [*graph.input, *graph.value_info, *graph.output]:
        shape = _shape(info)
        if shape is not None:
            shapes[info.name] = shape
    graph_inputs = [i for i in graph.input if i.name not in init_shapes]
    if not graph_inputs:
        raise HorusInputError(source, "the graph has no inputs (only constants); expected a model that takes data")
    if not any(_ONNX_KIND.get(node.op_type) for node in graph.node):
        raise HorusInputError(source, f"the graph has no operator Horus counts ({len(graph.node)} nodes: "
                                      f"{', '.join(sorted({n.op_type for n in graph.node})) or 'none'}); expected a "
                                      "network with e.g. Conv, MatMul/Gemm or LSTM nodes")
    return graph, shapes, init_shapes


def graph_batch(graph: Any, shapes: dict[str, list[int]], init_shapes: dict[str, list[int]]) -> int:
    """The export's batch: the first data input's leading dimension (1 when unknown)."""
    first = next(i for i in graph.input if i.name not in init_shapes)
    shape = shapes.get(first.name)
    return max(int(shape[0]), 1) if shape else 1


def extract_onnx_features(path: str | Path, *, batch_size: int | None = None, input_size: int | None = None) -> dict[str, Any]:
    """FEATURE_NAMES vector of an ONNX file, plus ``"estimated"``: the names not read from the graph."""
    graph, shapes, init_shapes = load_onnx(path)
    params = sum(math.prod(t.dims) for t in graph.initializer if t.data_type in _FLOAT_TYPES)
    graph_inputs = [i for i in graph.input if i.name not in init_shapes]
    first_shape = shapes.get(graph_inputs[0].name) if graph_inputs else None
    if batch_size is None:
        batch_size = first_shape[0] if first_shape else 1
    if input_size is None:
        input_size = first_shape[-1] if first_shape else 0
    counts: Counter[str] = Counter()
    macs = 0.0
    depth_of: dict[str, int] = {}
    max_depth = 0
    for node in graph.node:  # ONNX nodes are topologically sorted
        kind = _ONNX_KIND.get(node.op_type)
        if node.op_type == "Gather" and (not node.input or node.input[0] not in init_shapes):
            kind = None  # a Gather is an embedding lookup only when it indexes a weight table
        if kind:
            counts[kind] += 1
        macs += _node_macs(node, shapes, init_shapes)
        d = max((depth_of.get(i, 0) for i in node.input), default=0) + (1 if kind in _WEIGHTED else 0)
        for out in node.output:
            depth_of[out] = d
        max_depth = max(max_depth, d)
    activation_bytes = sum(4 * math.prod(s) for name, s in shapes.items()
                           if name not in init_shapes and name not in {i.name for i in graph.input})
    values: dict[str, Any] = {
        "params": float(params), "forward_flops": 2 * macs, "train_flops": 6 * macs,
        "activation_bytes": float(activation_bytes), "batch_size": float(batch_size), "input_size": float(input_size),
        "depth": float(max_depth), **{f"n_{k}": float(counts.get(k, 0)) for k in OP_KINDS},
    }
    result = {name: values[name] for name in FEATURE_NAMES}
    result["estimated"] = ["train_flops", "activation_bytes"]
    return result


def onnx_model_name(data: bytes) -> str:
    """The catalog name of an ONNX graph's bytes: the same file is always the same model."""
    import hashlib

    return f"onnx-{hashlib.sha256(data).hexdigest()[:16]}"


def onnx_model_info(data: bytes, name: str, source: str) -> tuple[ModelInfo, int]:
    """(per-sample catalog features, batch size of the graph) of an ONNX file's bytes; HorusInputError
    naming ``source`` for a malformed file or a graph without countable FLOPs (export static shapes)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.onnx"
        path.write_bytes(data)
        return onnx_file_info(path, name, source)


def onnx_file_info(path: Path, name: str, source: str) -> tuple[ModelInfo, int]:
    """``onnx_model_info`` of a file already on disk (a large upload is never held in memory twice)."""
    try:
        feats = extract_onnx_features(path)
    except HorusInputError as exc:
        raise HorusInputError(source, exc.message) from None
    batch = max(int(feats["batch_size"]), 1)
    if feats["forward_flops"] <= 0:
        raise HorusInputError(source, "no FLOPs found in the graph (export it with static input shapes)")
    info = ModelInfo(name=name, family="onnx", params=int(feats["params"]),
                     forward_flops_per_sample=feats["forward_flops"] / batch,
                     train_flops_per_sample=feats["train_flops"] / batch,
                     activation_bytes_per_sample=feats["activation_bytes"] / batch,
                     input_size=int(feats["input_size"]), depth=int(feats["depth"]),
                     op_counts={k: int(feats[f"n_{k}"]) for k in OP_KINDS},
                     source=f"onnx: {source} (estimated: {', '.join(feats['estimated'])})")
    return info, batch
