"""Per-operator description of one training step, as the physical predictor reads it (no torch).

A ``Workload`` holds, for one model at one input size, arrays over merged operators: kind, count, and FLOPs /
bytes as ``fixed + per_sample x batch``. Zoo models come from the shipped ``horus/data/model_ops.csv`` (written
by ``python -m horus.graph.build_catalog``), which records each model at several input sizes (image models at
32/64/128/224 px and their default; sequence models at 32-512 tokens; recommendation and RL models at their
default only); plain MLPs (GPUMemNet's measured nets) are described analytically by ``mlp_workload``.

``catalog_workload(model, input_size)``:

* a recorded size (or None: the catalog's size) gives that table exactly;
* between recorded sizes, each op kind's totals (op count, fixed and per-sample FLOPs, fixed and per-sample bytes)
  and the step's saved activations and train FLOPs are interpolated in input elements (pixels for image models,
  tokens otherwise) on the parabola through the two neighbouring tables and the next nearest one -- exact for work
  that is fixed (a VGG's 4096-wide classifier, weight reads), per element (convolutions, per-token layers, a
  recurrent net's per-step kernels) or per element squared (attention) -- and the nearer table's ops are
  rescaled to those totals (per kind: counts by the count ratio, each op's cost by the rest);
* outside the recorded range each total follows the power law through the end segment (its log-log exponent);
* a model recorded at one size only (Inception v3 at 299, the RL nets) scales its per-sample work with the input's
  elements (pixels, or sequence length), an over-estimate for fixed-size heads;
* recommendation models (NCF, DLRM, Recoder) have no input size a job could change (ids, feature counts fixed by
  the data set): a stated size is ignored and the catalog's table is used;
* image models refuse sizes below ``horus.graph.input_sizes.MIN_INPUT_SIZE`` (one-line ``HorusInputError``).

Error, measured with ``python scripts/input_size_error.py`` (total FLOPs / bytes / saved activations at batch 32
and the physical predictor's A100 iteration time, against exact tables): at 11 unrecorded interior sizes
extracted with torch (resnet50 96 and 160, bert_base 200, vgg11 48 and 96, gpt2 768, ...) worst 1.1 / 0.6 / 0.6 /
0.9 %; extrapolated 1.3-2x (resnet50 320, bert_base 16, lstm_lm 256, ...) worst 0.3 / 1.5 / 3.4 / 0.0 %; leaving
each recorded size out in turn (gaps twice the shipped ones) worst 8.5 % inside the range, 33 % beyond it
(``docs/predictors.md``, "Input sizes"). Results are cached per (model, size).
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache, lru_cache
from importlib import resources

import numpy as np

from horus.catalog import IMAGE_FAMILIES, load_catalog, registered_ops
from horus.errors import HorusInputError
from horus.graph.input_sizes import MIN_INPUT_SIZE, check_input_size

# Op kinds of horus.graph.opcost (kept as strings here: this module must not import torch).
MATRIX, KERNEL, HOST = "matrix", "kernel", "host"
RNN_SUFFIX = "_rnn"
PARAM_TENSORS = "param_tensors"
SAMPLE_TOTALS = "sample_totals"

SIZELESS_FAMILIES = frozenset({"recommendation"})  # inputs are ids / fixed feature vectors
KINDS = (MATRIX, KERNEL, HOST, MATRIX + RNN_SUFFIX, KERNEL + RNN_SUFFIX, HOST + RNN_SUFFIX)
_OPS_FILE = "horus/data/model_ops.csv"


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


def _from_rows(name: str, family: str, rows: Sequence[Mapping[str, float | str]], params: float,
               activation_bytes: float, train_flops: float) -> Workload:
    ops = [r for r in rows if r["kind"] not in (PARAM_TENSORS, SAMPLE_TOTALS)]
    tensors = sum(int(r["count"]) for r in rows if r["kind"] == PARAM_TENSORS)
    unknown = {r["kind"] for r in ops} - set(KINDS)
    if unknown:
        raise HorusInputError(_OPS_FILE, f"model {name!r}: unknown op kind {min(unknown)!r}")
    return Workload(
        name=name, family=family, kind=np.array([r["kind"] for r in ops], dtype=object),
        count=np.array([float(r["count"]) for r in ops]),
        flops=np.array([[float(r["flops_fixed"]), float(r["flops_per_sample"])] for r in ops]).reshape(-1, 2),
        bytes=np.array([[float(r["bytes_fixed"]), float(r["bytes_per_sample"])] for r in ops]).reshape(-1, 2),
        params=float(params), param_tensors=tensors, activation_bytes_per_sample=float(activation_bytes),
        train_flops_per_sample=float(train_flops),
    )


@lru_cache(maxsize=1)
def _op_rows() -> dict[str, dict[int, list[dict[str, str]]]]:
    """model -> input size -> rows (a table without the ``input_size`` column: all rows at size 0)."""
    ref = resources.files("horus.data").joinpath("model_ops.csv")
    rows: dict[str, dict[int, list[dict[str, str]]]] = defaultdict(lambda: defaultdict(list))
    with ref.open("r", newline="") as fh:
        for row in csv.DictReader(fh):
            rows[row["name"]][int(row.get("input_size") or 0)].append(row)
    return {name: dict(by_size) for name, by_size in rows.items()}


def table_sizes(model: str) -> list[int]:
    """Input sizes at which the shipped operator table holds ``model`` (empty when it holds none)."""
    default = load_catalog()[model].input_size if model in load_catalog() else 0
    return sorted(s or default for s in _op_rows().get(model, {}))


def catalog_workload(model: str, input_size: int | None = None) -> Workload:
    """The workload of a catalog model at ``input_size`` (None: the catalog's own size); HorusInputError when the
    model or its operator rows are missing, or an image model's size is below its ``MIN_INPUT_SIZE``.

    Recorded sizes are exact, others interpolated / extrapolated per op kind in log-log space (module docstring);
    recommendation models keep their catalog size whatever ``input_size`` says.
    """
    catalog = load_catalog()
    if model not in catalog:
        raise HorusInputError("model", f"unknown model {model!r}; known: {', '.join(sorted(catalog))}")
    info = catalog[model]
    if input_size is None or info.family in SIZELESS_FAMILIES:
        return _workload_at(model, info.input_size)
    check_input_size(model, input_size, "input_size")
    if input_size < 1:
        raise HorusInputError("input_size", f"input size must be at least 1, got {input_size}")
    return _workload_at(model, int(input_size))


@lru_cache(maxsize=512)
def _workload_at(model: str, size: int) -> Workload:
    sizes = table_sizes(model)
    if not sizes:
        registered = registered_ops(model)  # a run-time model (an ONNX graph): its rows at its own size
        if registered:
            info = load_catalog()[model]
            w = _from_rows(model, info.family, registered, info.params, info.activation_bytes_per_sample,
                           info.train_flops_per_sample)
            w = replace(w, input_elements=input_elements(info.family, info.input_size))
            return w if size == info.input_size else _scale_by_elements(w, model, info.input_size, size)
        raise HorusInputError(_OPS_FILE, f"no operator rows for model {model!r}; "
                                         "rebuild with python -m horus.graph.build_catalog")
    if size in sizes:
        return _table(model, size)
    if len(sizes) == 1:
        return _scale_by_elements(_table(model, sizes[0]), model, sizes[0], size)
    return interpolate({s: _table(model, s) for s in sizes}, size)


@cache
def _table(model: str, size: int) -> Workload:
    """The recorded table of ``model`` at ``size`` (one of ``table_sizes``)."""
    by_size = _op_rows()[model]
    return rows_workload(model, size, by_size.get(size) or by_size[0])


def rows_workload(model: str, size: int, rows: Sequence[Mapping[str, float | str]]) -> Workload:
    """The workload of catalog model ``model`` from its operator-table ``rows`` recorded at ``size`` (saved
    activations and train FLOPs from the ``sample_totals`` row; the catalog's own at the catalog's size)."""
    info = load_catalog()[model]
    totals = next((r for r in rows if r["kind"] == SAMPLE_TOTALS), None)
    if size == info.input_size or totals is None:
        acts, train = info.activation_bytes_per_sample, info.train_flops_per_sample
    else:
        acts, train = float(totals["bytes_per_sample"]), float(totals["flops_per_sample"])
    w = _from_rows(model, info.family, rows, info.params, acts, train)
    return replace(w, input_elements=input_elements(info.family, info.input_size)
                   * _elements_ratio(model, size, info.input_size))


def _elements_ratio(model: str, size: int, reference: int) -> float:
    """Input elements at ``size`` over those at ``reference``: pixels for image models, else the size itself."""
    ratio = size / reference
    return ratio**2 if model in MIN_INPUT_SIZE else ratio


def _scale_by_elements(w: Workload, model: str, recorded: int, size: int) -> Workload:
    ratio = _elements_ratio(model, size, recorded)
    flops, byts = w.flops.copy(), w.bytes.copy()
    flops[:, 1] *= ratio
    byts[:, 1] *= ratio
    return replace(w, flops=flops, bytes=byts, activation_bytes_per_sample=w.activation_bytes_per_sample * ratio,
                   train_flops_per_sample=w.train_flops_per_sample * ratio,
                   input_elements=w.input_elements * ratio)


def _kind_totals(w: Workload, kind: str) -> np.ndarray:
    """(op count, fixed FLOPs, per-sample FLOPs, fixed bytes, per-sample bytes) summed over ops of ``kind``."""
    m = w.kind == kind
    c = w.count[m]
    return np.array([c.sum(), c @ w.flops[m, 0], c @ w.flops[m, 1], c @ w.bytes[m, 0], c @ w.bytes[m, 1]])


def _ratios(points: Sequence[tuple[float, np.ndarray]], base: np.ndarray, x_to: float, x_base: float,
            inside: bool) -> np.ndarray:
    """Per quantity: its value at input elements ``x_to`` over ``base``, its value at ``x_base``.

    ``points`` are (elements, values) of the two neighbouring tables, then optionally a third, nearest one.
    Inside the neighbours: the parabola through the points (exact for fixed + per-element + per-element-squared
    parts: convolutions, layers per token, attention), kept between the neighbours' values; with two points the
    straight line. Outside: the power law through the two (never negative). 1 where undefined.
    """
    (x_lo, lo), (x_hi, hi) = points[0], points[1]
    if inside:
        weights = [math.prod((x_to - xj) / (xi - xj) for j, (xj, _) in enumerate(points) if j != i)
                   for i, (xi, _) in enumerate(points)]  # Lagrange basis
        target = np.clip(sum(w * v for w, (_, v) in zip(weights, points)), np.minimum(lo, hi), np.maximum(lo, hi))
        return np.where(base > 0, target / np.where(base > 0, base, 1.0), 1.0)
    ok = (lo > 0) & (hi > 0)
    exponent = np.where(ok, np.log(np.where(ok, hi, 1.0) / np.where(ok, lo, 1.0)), 0.0) / math.log(x_hi / x_lo)
    return np.exp(exponent * math.log(x_to / x_base))


def left_out(model: str) -> Iterator[tuple[int, bool, Workload, Workload]]:
    """Per recorded size of ``model`` (with at least three): (size, inside the other sizes' range, the workload
    ``interpolate`` gives from the other tables, the recorded one) -- the interpolation's own error check."""
    sizes = table_sizes(model)
    if len(sizes) < 3:
        return
    tables = {s: _table(model, s) for s in sizes}
    for s in sizes:
        rest = {k: v for k, v in tables.items() if k != s}
        yield s, sizes[0] < s < sizes[-1], interpolate(rest, s), tables[s]


def interpolate(tables: Mapping[int, Workload], size: int) -> Workload:
    """``tables`` (recorded sizes -> workloads, at least two) at ``size``: the nearer neighbouring table with each
    op kind's totals, saved activations and train FLOPs moved to their values at ``size`` (``_ratios``: a parabola
    in input elements through the neighbouring tables and the next nearest one, or beyond the recorded range the
    end segment's power law)."""
    sizes = sorted(tables)
    i = int(np.searchsorted(sizes, size))
    j = min(max(i, 1), len(sizes) - 1)
    lo, hi = sizes[j - 1], sizes[j]
    base = lo if abs(math.log(size / lo)) <= abs(math.log(hi / size)) else hi
    inside = lo <= size <= hi
    around = [lo, hi]
    if inside:
        third = [s for s in (sizes[j - 2] if j >= 2 else None, sizes[j + 1] if j + 1 < len(sizes) else None) if s]
        around += sorted(third, key=lambda s: abs(math.log(size / s)))[:1]
    wb = tables[base]

    def elements(s: int) -> float:
        return _elements_ratio(wb.name, s, lo)

    def ratios(values: Callable[[Workload], np.ndarray]) -> np.ndarray:
        return _ratios([(elements(s), values(tables[s])) for s in around], values(wb), elements(size),
                       elements(base), inside)

    count, flops, byts = wb.count.copy(), wb.flops.copy(), wb.bytes.copy()
    for kind in set(wb.kind):
        m = wb.kind == kind
        r_count, r_f0, r_f1, r_b0, r_b1 = ratios(lambda w, k=kind: _kind_totals(w, k))
        count[m] *= r_count
        flops[m] *= np.array([r_f0, r_f1]) / r_count
        byts[m] *= np.array([r_b0, r_b1]) / r_count
    r_act, r_train = ratios(lambda w: np.array([w.activation_bytes_per_sample, w.train_flops_per_sample]))
    return replace(wb, count=count, flops=flops, bytes=byts,
                   activation_bytes_per_sample=wb.activation_bytes_per_sample * float(r_act),
                   train_flops_per_sample=wb.train_flops_per_sample * float(r_train),
                   input_elements=wb.input_elements * _elements_ratio(wb.name, size, base))


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
