"""``horus features MODEL --batch N``: print the graph feature vector of a zoo model, ``module:factory`` or .onnx file."""

from __future__ import annotations

import argparse
import json
from typing import Any

from horus.catalog import FEATURE_NAMES
from horus.validation import NumberArg


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("features", help="graph features of a model (needs torch)",
                                   description=__doc__.splitlines()[0])
    parser.add_argument("model", help="zoo name (e.g. resnet50), package.module:factory, or path/to/model.onnx")
    parser.add_argument("--batch", type=NumberArg("batch_size"), required=True, help="batch size")
    parser.add_argument("--input-size", type=NumberArg("input_size"), default=None,
                        help="image side / sequence length (zoo default; image models have a minimum, "
                             "horus.graph.input_sizes)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(func=run_features)


def features_for(model: str, batch: int, input_size: int | None) -> dict[str, Any]:
    """Feature vector of ``model`` (zoo name, ``module:factory`` or ``.onnx`` path) at ``batch``."""
    from horus.errors import HorusInputError

    from horus.validation import check_option

    check_option("--batch", batch, "batch_size", allow_none=False)
    check_option("--input-size", input_size, "input_size")
    if not model.strip():
        raise HorusInputError("MODEL", "expected a zoo name, package.module:factory or path/to/model.onnx, got ''")
    if model.endswith(".onnx"):
        from horus.graph.onnx_features import extract_onnx_features

        return extract_onnx_features(model, batch_size=batch, input_size=input_size)
    if ":" in model:
        from horus.zoo.custom import load_factory

        load_factory(model)  # the trust check comes before torch is even imported
        from horus.graph.extract import extract_features
        from horus.zoo.custom import load_model

        module, inputs = load_model(model, batch)
        size = input_size if input_size is not None else int(inputs[0].shape[-1]) if inputs[0].dim() else 0
        return extract_features(module, inputs, batch_size=batch, input_size=size, source=model)
    from horus.graph.extract import extract_zoo_features
    from horus.graph.input_sizes import check_input_size

    check_input_size(model, input_size, "--input-size")
    return extract_zoo_features(model, batch, input_size)


def _format(name: str, value: float) -> str:
    if "flops" in name:
        return f"{value / 1e9:,.2f} G"
    if name == "activation_bytes":
        return f"{value / 2**20:,.1f} MiB"
    return f"{value:,.0f}"


def run_features(args: argparse.Namespace) -> int:
    from horus.extras import require

    require("onnx" if args.model.endswith(".onnx") else "torch", "horus features")
    features = features_for(args.model, args.batch, args.input_size)
    if args.json:
        print(json.dumps({"model": args.model, **features}, indent=2))
        return 0
    for name in FEATURE_NAMES:
        print(f"{name:<18} {_format(name, float(features[name])):>20}")
    if features.get("estimated"):
        print(f"(estimated, not read from the graph: {', '.join(features['estimated'])})")
    return 0
