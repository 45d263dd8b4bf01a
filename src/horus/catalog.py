"""Model catalog: graph features of every model the simulator knows, per sample (batch 1).

The table ``horus/data/model_catalog.csv`` is produced by the project's own feature extractor
(``python -m horus.graph.build_catalog``; needs torch) so the simulator itself needs no torch.
Per-sample quantities scale linearly with batch size (exact for FLOPs and activations of the
models in the zoo). Feature names are shared with the learned predictors: see ``FEATURE_NAMES``.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, replace
from functools import lru_cache
from importlib import resources

from horus.errors import HorusInputError

IMAGE_FAMILIES = frozenset({"cnn", "gan", "detector"})  # fed images: work grows with the side squared

# Op-kind histogram keys, in schema order.
OP_KINDS: tuple[str, ...] = (
    "conv", "linear", "attention", "norm", "activation", "pooling", "embedding", "recurrent", "elementwise",
)

# The feature vector of a (model, batch size) pair, in schema order. Learned predictors, the
# feature extractor and the catalog all use exactly these names.
FEATURE_NAMES: tuple[str, ...] = (
    "params",              # trainable parameters
    "forward_flops",       # FLOPs (2 x MACs) of one forward pass at this batch size
    "train_flops",         # forward + backward FLOPs at this batch size
    "activation_bytes",    # bytes of intermediate tensors kept for backward at this batch size (fp32)
    "batch_size",
    "input_size",          # image side, sequence length, or feature count: the model's main input dim
    "depth",               # number of weight-bearing layers on the longest path (approx.)
    *(f"n_{k}" for k in OP_KINDS),
)


@dataclass(frozen=True)
class ModelInfo:
    """Graph features of one model at batch 1 plus its family and input description."""

    name: str
    family: str  # cnn, recurrent, transformer, recommendation, gan, rl, detector
    params: int
    forward_flops_per_sample: float
    train_flops_per_sample: float
    activation_bytes_per_sample: float
    input_size: int
    depth: int
    op_counts: dict[str, int]
    source: str  # how the row was obtained, e.g. "horus.graph (torch 2.13.0)" or "published: <ref>"

    def at_input_size(self, size: int | None) -> ModelInfo:
        """This model at input size ``size`` (None or its own: itself): per-sample FLOPs and saved activations
        scaled with the input's elements (pixels for image families, else the size). A first-order rule (exact for
        convolutions and per-token layers, high for fixed-size heads); the physical predictor reads recorded
        per-size operator tables instead (``horus.predict.workload``)."""
        if size is None or size == self.input_size or self.input_size <= 0:
            return self
        ratio = size / self.input_size
        if self.family in IMAGE_FAMILIES:
            ratio *= ratio
        return replace(self, forward_flops_per_sample=self.forward_flops_per_sample * ratio,
                       train_flops_per_sample=self.train_flops_per_sample * ratio,
                       activation_bytes_per_sample=self.activation_bytes_per_sample * ratio, input_size=size)

    def features(self, batch_size: int) -> dict[str, float]:
        """The FEATURE_NAMES vector for this model at ``batch_size``."""
        values: dict[str, float] = {
            "params": float(self.params),
            "forward_flops": self.forward_flops_per_sample * batch_size,
            "train_flops": self.train_flops_per_sample * batch_size,
            "activation_bytes": self.activation_bytes_per_sample * batch_size,
            "batch_size": float(batch_size),
            "input_size": float(self.input_size),
            "depth": float(self.depth),
        }
        for kind in OP_KINDS:
            values[f"n_{kind}"] = float(self.op_counts.get(kind, 0))
        return values


CATALOG_COLUMNS: tuple[str, ...] = (
    "name", "family", "params", "forward_flops_per_sample", "train_flops_per_sample",
    "activation_bytes_per_sample", "input_size", "depth", *(f"n_{k}" for k in OP_KINDS), "source",
)


def parse_catalog(rows: list[dict[str, str]], source: str) -> dict[str, ModelInfo]:
    """Parse catalog rows (as from ``csv.DictReader``); raise HorusInputError naming the bad field."""
    models: dict[str, ModelInfo] = {}
    for line, row in enumerate(rows, start=2):
        try:
            info = ModelInfo(
                name=row["name"],
                family=row["family"],
                params=int(float(row["params"])),
                forward_flops_per_sample=float(row["forward_flops_per_sample"]),
                train_flops_per_sample=float(row["train_flops_per_sample"]),
                activation_bytes_per_sample=float(row["activation_bytes_per_sample"]),
                input_size=int(float(row["input_size"])),
                depth=int(float(row["depth"])),
                op_counts={k: int(float(row[f"n_{k}"])) for k in OP_KINDS},
                source=row["source"],
            )
        except KeyError as exc:
            raise HorusInputError(source, f"line {line}: missing column {exc.args[0]!r}") from None
        except (TypeError, ValueError) as exc:
            raise HorusInputError(source, f"line {line}: bad number ({exc})") from None
        models[info.name] = info
    return models


@lru_cache(maxsize=1)
def load_catalog() -> dict[str, ModelInfo]:
    """The catalog shipped in the package, keyed by model name."""
    ref = resources.files("horus.data").joinpath("model_catalog.csv")
    with ref.open("r", newline="") as fh:
        return parse_catalog(list(csv.DictReader(fh)), "horus/data/model_catalog.csv")


_REGISTERED_OPS: dict[str, list[dict[str, object]]] = {}


def register_model(info: ModelInfo, ops: list[dict[str, object]] | None = None) -> ModelInfo:
    """Add a model known only at run time (e.g. an ONNX graph a Kubernetes pod points at) to this process's
    catalog, so every predictor can look it up by ``info.name``; ``ops``: its per-operator rows
    (``horus.graph.opcost.OPS_COLUMNS`` without ``name``) for the physical predictor. Re-registering the same
    name replaces both."""
    load_catalog()[info.name] = info
    if ops is not None:
        _REGISTERED_OPS[info.name] = ops
    else:
        _REGISTERED_OPS.pop(info.name, None)
    return info


def registered_ops(name: str) -> list[dict[str, object]] | None:
    """The per-operator rows a run-time model was registered with (None: none given)."""
    return _REGISTERED_OPS.get(name)


def model_info(name: str) -> ModelInfo:
    catalog = load_catalog()
    try:
        return catalog[name]
    except KeyError:
        raise HorusInputError("model", f"unknown model {name!r}; known: {', '.join(sorted(catalog))}") from None

