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
import threading
import time
from collections.abc import Callable
from typing import Any

from horus.catalog import load_catalog, register_model
from horus.errors import HorusInputError
from horus.graph.onnx_features import onnx_model_name
from horus.graph.onnx_ops import onnx_model_analysis
from horus.k8s.resources import ONNX_CONFIGMAP, PodError

MAX_ONNX_BYTES = 1 << 20  # a ConfigMap holds at most 1 MiB


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
        model = onnx_model_name(data)
        if model not in load_catalog():
            try:
                register_model(*onnx_model_analysis(data, model, f"configmap {namespace}/{ref}"))
            except HorusInputError as exc:
                raise PodError(f"{where}: {exc.message}") from None
        with self._lock:
            self._known[(namespace, ref)] = (self.clock(), model)
        return model
