"""A user's own model as a catalog model with its training-step operator table (for ``horus predict``).

* ``package.module:factory`` (needs torch): the factory's model and inputs at batch 2 and 4 (meta-free: what the
  factory builds), every op of one forward + loss + backward recorded (``horus.graph.opcost``) and merged into
  ``fixed + per_sample x batch`` rows; catalog features from the same model (``extract_features``). The input
  size is what the factory's inputs have.
* a ``.onnx`` file (no torch): the training step derived from the inference graph (``horus.graph.onnx_ops``).

The model is registered (``horus.catalog.register_model``) under a name derived from its graph -- ``onnx-`` +
the file's sha256 prefix, or ``module-`` + the sha256 prefix of its operator table -- so the same graph is
the same model, and every predictor reads it like a zoo model. Registered once per process (cached by source).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from horus.catalog import OP_KINDS, ModelInfo, register_model
from horus.errors import HorusInputError

_BATCHES = (2, 4)
_registered: dict[str, str] = {}


def is_user_model(model: str) -> bool:
    """``model`` names a user's graph (``.onnx`` path or ``module:factory``) rather than a catalog model."""
    return model.endswith(".onnx") or ":" in model


def register_user_model(model: str) -> str:
    """Analyse and register a user's model (module docstring); its catalog name. HorusInputError for a file or
    factory that is not a usable model."""
    hit = _registered.get(model)
    if hit is not None:
        return hit
    if model.endswith(".onnx"):
        from horus.graph.onnx_features import onnx_model_name
        from horus.graph.onnx_ops import onnx_model_analysis
        from horus.validation import MAX_TABLE_BYTES, read_input_bytes

        data = read_input_bytes(Path(model), "an ONNX model file", MAX_TABLE_BYTES)
        name = onnx_model_name(data)
        register_model(*onnx_model_analysis(data, name, model))
    else:
        info, ops = module_analysis(model)
        name = info.name
        register_model(info, ops)
    _registered[model] = name
    return name


def module_analysis(spec: str) -> tuple[ModelInfo, list[dict[str, Any]]]:
    """(catalog ModelInfo, operator rows) of a ``module:factory`` model (needs torch)."""
    from horus.zoo.custom import load_factory

    load_factory(spec)  # the trust check comes before torch is imported
    from horus.graph.extract import extract_features
    from horus.graph.opcost import PARAM_TENSORS, op_table, record_ops
    from horus.zoo.custom import load_model

    records, model, inputs = [], None, ()
    for batch in _BATCHES:
        model, inputs = load_model(spec, batch)
        try:
            records.append(record_ops(model, tuple(inputs)))
        except Exception as exc:  # noqa: BLE001 - any failure of the user's code is a bad model
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise HorusInputError(spec, f"cannot record a training step ({type(exc).__name__}: {first[:200]})") \
                from None
    assert model is not None
    rows = op_table(records[0], records[1], *_BATCHES)
    rows.append({"kind": PARAM_TENSORS, "count": sum(1 for p in model.parameters() if p.requires_grad),
                 "flops_fixed": 0.0, "flops_per_sample": 0.0, "bytes_fixed": 0.0, "bytes_per_sample": 0.0})
    first = inputs[0]
    size = int(first.shape[-1]) if getattr(first, "dim", lambda: 0)() else 0
    feats = extract_features(model, tuple(inputs), batch_size=_BATCHES[-1], input_size=size, source=spec)
    digest = hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()[:16]
    batch = float(_BATCHES[-1])
    info = ModelInfo(name=f"module-{digest}", family="custom", params=int(feats["params"]),
                     forward_flops_per_sample=feats["forward_flops"] / batch,
                     train_flops_per_sample=feats["train_flops"] / batch,
                     activation_bytes_per_sample=feats["activation_bytes"] / batch, input_size=size,
                     depth=int(feats["depth"]), op_counts={k: int(feats[f"n_{k}"]) for k in OP_KINDS},
                     source=f"module: {spec}")
    return info, rows
