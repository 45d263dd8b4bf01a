"""Models uploaded to the live service as ONNX graphs: features -> a catalog model the predictors read.

The name is ``onnx-<sha256 prefix>`` of the file (``horus.graph.onnx_features.onnx_model_name``), so the
same upload twice is one model; the store keeps its catalog row, so a restarted server knows it.
Needs the ``onnx`` package (``pip install -e '.[graph]'``).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from horus.catalog import ModelInfo, register_model
from horus.errors import HorusInputError

MAX_ONNX_BYTES = 512 * 1024 * 1024


def catalog_row_from_onnx(data: bytes) -> tuple[str, dict[str, Any]]:
    """(model name, storable catalog row with the graph's batch size) of an uploaded ONNX file."""
    if not data:
        raise HorusInputError("model file", "empty upload")
    if len(data) > MAX_ONNX_BYTES:
        raise HorusInputError("model file", f"larger than {MAX_ONNX_BYTES // 2**20} MiB")
    try:
        from horus.graph.onnx_features import onnx_model_info, onnx_model_name
    except ImportError:
        raise HorusInputError("model file", "ONNX uploads need the graph extra: pip install 'horus-scheduler[graph]'") \
            from None
    name = onnx_model_name(data)
    info, batch = onnx_model_info(data, name, "model file")
    return name, {**asdict(info), "batch_size": batch}


def register_catalog_row(name: str, row: dict[str, Any]) -> None:
    """Add a stored upload to this process's catalog."""
    fields = {k: v for k, v in row.items() if k not in ("batch_size", "name")}
    register_model(ModelInfo(name=name, **fields))
