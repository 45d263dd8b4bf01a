"""Models held as ONNX files in ConfigMaps: a pod annotated ``horus.io/onnx-configmap: <name>/<key>`` (in its
own namespace, with ``horus.io/batch-size``) is predicted from that graph's features.

The ConfigMap's ``binaryData[key]`` (or ``data[key]``, base64 text) is read once per ``ttl_s``; its bytes are
hashed, and the graph's features (``horus.graph.onnx_features``: no torch) become a catalog model named
``onnx-<sha256 prefix>`` (``horus.catalog.register_model``), per sample: export the graph with a static batch
dimension. The same bytes always give the same model, so a restart predicts the same load.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from horus.catalog import OP_KINDS, ModelInfo, load_catalog, register_model
from horus.errors import HorusInputError
from horus.k8s.resources import ONNX_CONFIGMAP, PodError

MAX_ONNX_BYTES = 1 << 20  # a ConfigMap holds at most 1 MiB


def model_info_from_onnx(data: bytes, name: str, source: str) -> ModelInfo:
    """Per-sample catalog features of an ONNX graph (raises HorusInputError for a malformed file)."""
    from horus.graph.onnx_features import extract_onnx_features

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.onnx"
        path.write_bytes(data)
        try:
            feats = extract_onnx_features(path)
        except HorusInputError as exc:
            raise HorusInputError(source, exc.message) from None
    batch = max(feats["batch_size"], 1.0)
    if feats["forward_flops"] <= 0:
        raise HorusInputError(source, "no FLOPs found in the graph (export it with static input shapes)")
    return ModelInfo(name=name, family="onnx", params=int(feats["params"]),
                     forward_flops_per_sample=feats["forward_flops"] / batch,
                     train_flops_per_sample=feats["train_flops"] / batch,
                     activation_bytes_per_sample=feats["activation_bytes"] / batch,
                     input_size=int(feats["input_size"]), depth=int(feats["depth"]),
                     op_counts={k: int(feats[f"n_{k}"]) for k in OP_KINDS}, source=f"onnx: {source}")


class OnnxModels:
    """Resolves ``(namespace, "<configmap>/<key>")`` to a registered catalog model name."""

    def __init__(self, get_configmap: Callable[[str, str], dict[str, Any]], *, ttl_s: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.get_configmap = get_configmap
        self.ttl_s = ttl_s
        self.clock = clock
        self._lock = threading.Lock()
        self._known: dict[tuple[str, str], tuple[float, str]] = {}

    def __call__(self, namespace: str, ref: str) -> str:
        where = f"annotation {ONNX_CONFIGMAP}={ref!r} (namespace {namespace})"
        name, sep, key = ref.partition("/")
        if not (sep and name and key):
            raise PodError(f"{where}: expected '<configmap>/<key>'")
        with self._lock:
            found = self._known.get((namespace, ref))
            if found is not None and self.clock() - found[0] < self.ttl_s:
                return found[1]
        try:
            cm = self.get_configmap(namespace, name)
        except Exception as exc:  # KubeAPIError: not found, forbidden, unreachable
            raise PodError(f"{where}: {exc}") from None
        raw = (cm.get("binaryData") or {}).get(key) or (cm.get("data") or {}).get(key)
        if not isinstance(raw, str):
            raise PodError(f"{where}: ConfigMap {name!r} has no key {key!r}")
        try:
            data = base64.b64decode(raw, validate=True)
        except (binascii.Error, ValueError):
            raise PodError(f"{where}: the value is not base64") from None
        if len(data) > MAX_ONNX_BYTES:
            raise PodError(f"{where}: {len(data)} bytes, more than a ConfigMap holds")
        model = f"onnx-{hashlib.sha256(data).hexdigest()[:16]}"
        if model not in load_catalog():
            try:
                register_model(model_info_from_onnx(data, model, f"configmap {namespace}/{ref}"))
            except HorusInputError as exc:
                raise PodError(f"{where}: {exc.message}") from None
        with self._lock:
            self._known[(namespace, ref)] = (self.clock(), model)
        return model
