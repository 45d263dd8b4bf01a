"""Per-operator description of one training step, as the physical predictor reads it (no torch).

A ``Workload`` holds, for one model at its catalog input size, arrays over merged operators: kind,
count, and FLOPs / bytes as ``fixed + per_sample x batch``. Zoo models come from the shipped
``horus/data/model_ops.csv`` (written by ``python -m horus.graph.build_catalog``); plain MLPs (GPUMemNet's
measured nets) are described analytically by ``mlp_workload``.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from importlib import resources

import numpy as np

from horus.catalog import load_catalog, registered_ops
from horus.errors import HorusInputError

# Op kinds of horus.graph.opcost (kept as strings here: this module must not import torch).
MATRIX, KERNEL, HOST = "matrix", "kernel", "host"
RNN_SUFFIX = "_rnn"
PARAM_TENSORS = "param_tensors"
IMAGE_FAMILIES = frozenset({"cnn", "gan", "detector"})
KINDS = (MATRIX, KERNEL, HOST, MATRIX + RNN_SUFFIX, KERNEL + RNN_SUFFIX, HOST + RNN_SUFFIX)


@dataclass(frozen=True)
class Workload:
    """One model's training step: merged operators plus the quantities of the memory model."""

    name: str
    family: str
    kind: np.ndarray  # str per merged op
    count: np.ndarray
    flops: np.ndarray  # (n, 2): fixed, per sample
    bytes: np.ndarray  # (n, 2): fixed, per sample
    params: float
    param_tensors: int
    activation_bytes_per_sample: float  # saved for backward, fp32
    train_flops_per_sample: float
    input_elements: float = 0.0  # elements of one input sample (host-side data preparation scales with it)

    def at_batch(self, batch: float) -> tuple[np.ndarray, np.ndarray]:
        """(FLOPs, bytes) of each merged op at ``batch``."""
        return self.flops[:, 0] + self.flops[:, 1] * batch, self.bytes[:, 0] + self.bytes[:, 1] * batch

    def mask(self, *kinds: str) -> np.ndarray:
        return np.isin(self.kind, kinds)


def _from_rows(name: str, family: str, rows: Sequence[dict[str, float | str]], params: float,
               activation_bytes: float, train_flops: float) -> Workload:
    ops = [r for r in rows if r["kind"] != PARAM_TENSORS]
    tensors = sum(int(r["count"]) for r in rows if r["kind"] == PARAM_TENSORS)
    unknown = {r["kind"] for r in ops} - set(KINDS)
    if unknown:
        raise HorusInputError("horus/data/model_ops.csv", f"model {name!r}: unknown op kind {sorted(unknown)[0]!r}")
    return Workload(
        name=name, family=family, kind=np.array([r["kind"] for r in ops], dtype=object),
        count=np.array([float(r["count"]) for r in ops]),
        flops=np.array([[float(r["flops_fixed"]), float(r["flops_per_sample"])] for r in ops]).reshape(-1, 2),
        bytes=np.array([[float(r["bytes_fixed"]), float(r["bytes_per_sample"])] for r in ops]).reshape(-1, 2),
        params=float(params), param_tensors=tensors, activation_bytes_per_sample=float(activation_bytes),
        train_flops_per_sample=float(train_flops),
    )


@lru_cache(maxsize=1)
def _op_rows() -> dict[str, list[dict[str, str]]]:
    ref = resources.files("horus.data").joinpath("model_ops.csv")
    rows: dict[str, list[dict[str, str]]] = defaultdict(list)
    with ref.open("r", newline="") as fh:
        for row in csv.DictReader(fh):
            rows[row["name"]].append(row)
    return dict(rows)


def catalog_workload(model: str, input_size: int | None = None) -> Workload:
    """The workload of a catalog model at ``input_size`` (None: the catalog's own size); HorusInputError when the
    model or its operator rows are missing.

    At another input size every per-sample FLOP, byte and saved activation scales with the input's elements
    (pixels for image families, sequence length otherwise) -- exact for convolutions and per-token layers, an
    over-estimate for fixed-size heads.
    """
    w = _catalog_workload(model)
    info = load_catalog()[model]
    if input_size is None or input_size == info.input_size:
        return w
    ratio = input_elements(info.family, input_size) / input_elements(info.family, info.input_size)
    flops, byts = w.flops.copy(), w.bytes.copy()
    flops[:, 1] *= ratio
    byts[:, 1] *= ratio
    return replace(w, flops=flops, bytes=byts, activation_bytes_per_sample=w.activation_bytes_per_sample * ratio,
                   train_flops_per_sample=w.train_flops_per_sample * ratio,
                   input_elements=input_elements(info.family, input_size))


@lru_cache(maxsize=None)
def _catalog_workload(model: str) -> Workload:
    catalog = load_catalog()
    if model not in catalog:
        raise HorusInputError("model", f"unknown model {model!r}; known: {', '.join(sorted(catalog))}")
    rows = _op_rows().get(model) or registered_ops(model)
    if not rows:
        raise HorusInputError("horus/data/model_ops.csv", f"no operator rows for model {model!r}; "
                              "rebuild with python -m horus.graph.build_catalog")
    info = catalog[model]
    w = _from_rows(model, info.family, rows, info.params, info.activation_bytes_per_sample,
                   info.train_flops_per_sample)
    return replace(w, input_elements=input_elements(info.family, info.input_size))


def input_elements(family: str, input_size: int) -> float:
    """Elements of one input sample: 3 x side^2 for image families, else the catalog's input size (sequence
    length, item count, features)."""
    return 3.0 * input_size**2 if family in IMAGE_FAMILIES else float(input_size)


def mlp_workload(name: str, inputs: int, layers: Sequence[tuple[str, int, int]]) -> Workload:
    """A fully connected net from ``(layer_type, output elements per sample, parameters)`` per layer
    (GPUMemNet's ``Activations-Params`` layout), fp32, with a softmax cross-entropy loss.

    Per Linear(i -> o) at batch B: forward ``addmm`` (2iB o FLOPs; reads B i + i o + o, writes B o), backward two
    matmuls (input and weight gradients) and a bias-gradient reduction. Other layers (activations, batch norm,
    dropout, softmax) are elementwise: forward reads and writes B o, backward reads two and writes one such tensor
    (batch norm: two passes each way). Saved for backward: each layer's output (4 bytes per element; dropout
    masks 1 byte) and the input.
    """
    f32 = 4.0
    kind: list[str] = []
    flops: list[tuple[float, float]] = []
    byts: list[tuple[float, float]] = []
    host = 0
    width = float(inputs)
    saved = f32 * inputs
    params = 0.0
    tensors = 0
    train_flops = 0.0

    def op(k: str, f: tuple[float, float], b: tuple[float, float]) -> None:
        kind.append(k)
        flops.append(f)
        byts.append(b)

    for layer_type, out, n_params in layers:
        out_f = float(out)
        lt = layer_type.lower()
        if lt == "linear":
            w = n_params - out  # weights (bias = out)
            fin = w / out_f if out_f else 0.0
            mac = fin * out_f
            op(MATRIX, (0.0, 2 * mac), (f32 * (w + out), f32 * (fin + out_f)))
            op(MATRIX, (0.0, 2 * mac), (f32 * w, f32 * (fin + out_f)))  # grad input
            op(MATRIX, (0.0, 2 * mac), (f32 * w, f32 * (fin + out_f)))  # grad weight
            op(KERNEL, (0.0, 0.0), (f32 * out, f32 * out_f))  # grad bias
            train_flops += 6 * mac
            params += n_params
            tensors += 2
            host += 4
            saved += f32 * out_f
        else:
            passes = 2.0 if "batch" in lt else 1.0
            op(KERNEL, (0.0, 0.0), (f32 * 2 * n_params, passes * 2 * f32 * out_f))
            op(KERNEL, (0.0, 0.0), (f32 * 2 * n_params, passes * 3 * f32 * out_f))
            params += n_params
            tensors += 2 if n_params else 0
            host += 1
            saved += (1.0 if "dropout" in lt else f32) * out_f * (2.0 if "batch" in lt else 1.0)
        width = out_f
    # loss: log-softmax + nll forward and backward
    for _ in range(4):
        op(KERNEL, (0.0, 0.0), (0.0, 2 * f32 * width))
    kind.append(HOST)
    flops.append((0.0, 0.0))
    byts.append((0.0, 0.0))
    counts = [1.0] * (len(kind) - 1) + [float(host)]
    return Workload(name=name, family="mlp", kind=np.array(kind, dtype=object), count=np.array(counts),
                    flops=np.array(flops), bytes=np.array(byts), params=params, param_tensors=tensors,
                    activation_bytes_per_sample=saved, train_flops_per_sample=train_flops,
                    input_elements=float(inputs))
