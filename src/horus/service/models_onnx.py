"""Models uploaded to the live service as ONNX graphs: features -> a catalog row the predictors read.

The name is ``onnx-<first 12 hex digits of the file's sha256>``, so the same upload twice is one
model. Needs the ``onnx`` package (``pip install -e '.[graph]'``).
"""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path
from typing import Any

from horus.catalog import OP_KINDS, ModelInfo, add_model
from horus.errors import HorusInputError

MAX_ONNX_BYTES = 512 * 1024 * 1024


def catalog_row_from_onnx(data: bytes, family: str = "uploaded") -> tuple[str, dict[str, Any]]:
    """(model name, catalog row) of an ONNX file's bytes; HorusInputError if it is not a valid model."""
    if not data:
        raise HorusInputError("model file", "empty upload")
    if len(data) > MAX_ONNX_BYTES:
        raise HorusInputError("model file", f"larger than {MAX_ONNX_BYTES // 2**20} MiB")
    try:
        from horus.graph.onnx_features import extract_onnx_features
    except ImportError:
        raise HorusInputError("model file", "ONNX uploads need the graph extra: pip install 'horus-scheduler[graph]'") \
            from None
    name = "onnx-" + hashlib.sha256(data).hexdigest()[:12]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{name}.onnx"
        path.write_bytes(data)
        try:
            features = extract_onnx_features(path)
        except HorusInputError as exc:  # name the upload, not the temporary file
            raise HorusInputError("model file", exc.message) from None
    batch = max(1.0, float(features["batch_size"]))
    row = {
        "family": family, "params": int(features["params"]),
        "forward_flops_per_sample": features["forward_flops"] / batch,
        "train_flops_per_sample": features["train_flops"] / batch,
        "activation_bytes_per_sample": features["activation_bytes"] / batch,
        "input_size": int(features["input_size"]), "depth": int(features["depth"]),
        "op_counts": {k: int(features[f"n_{k}"]) for k in OP_KINDS},
        "source": f"uploaded ONNX (horus.graph.onnx_features; estimated: {', '.join(features['estimated'])})",
        "batch_size": int(batch),
    }
    return name, row


def register_catalog_row(name: str, row: dict[str, Any]) -> None:
    """Add a stored upload to this process's catalog."""
    fields = {k: v for k, v in row.items() if k != "batch_size"}
    add_model(ModelInfo(name=name, **fields))
