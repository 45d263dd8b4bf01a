"""How close the training step derived from an ONNX export comes to the recorded step of the same zoo network.

    python experiments/onnx_step.py [--models resnet18_cifar,resnet50,mobilenet_v2] [--out FILE.json]

Exports each zoo model with ``torch.onnx.export(..., dynamo=True)`` in training mode at batch 8, derives its
step with ``horus.graph.onnx_ops`` and compares the physical predictor's estimate on both tables (needs torch and
onnx). Writes JSON rows (model, GPU, batch, recorded and derived util / iteration time / peak memory).
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
import warnings
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet18_cifar,resnet50,mobilenet_v2")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    logging.disable(logging.CRITICAL)
    import torch

    from horus.catalog import register_model
    from horus.gpu_types import gpu_spec
    from horus.graph.onnx_features import onnx_file_info
    from horus.graph.onnx_ops import onnx_file_ops
    from horus.predict.physical import estimate, shipped_params
    from horus.predict.workload import catalog_workload
    from horus.zoo import get_entry

    rows = []
    for name in args.models.split(","):
        entry = get_entry(name)
        model = entry.build(entry.default_input_size).train()
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "m.onnx"
            torch.onnx.export(model, entry.example_input(8, entry.default_input_size, "cpu"), str(path),
                              dynamo=True, verbose=False)
            info, _ = onnx_file_info(path, f"onnx-{name}", name)
            register_model(info, onnx_file_ops(path))
        for gpu, batch in (("V100", 32), ("A100-40GB", 128)):
            ref, got = (estimate(catalog_workload(m), batch, gpu_spec(gpu), shipped_params())
                        for m in (name, f"onnx-{name}"))
            rows.append({"model": name, "gpu": gpu, "batch": batch,
                         **{f"{k}_{q}": getattr(e, q) for k, e in (("recorded", ref), ("onnx", got))
                            for q in ("util", "iter_time_s", "mem_mib")}})
            print(f"{name:16s} {gpu:10s} b{batch:<4d} util {ref.util:.2f}->{got.util:.2f}  iter "
                  f"{ref.iter_time_s * 1e3:7.1f}->{got.iter_time_s * 1e3:7.1f} ms  mem {ref.mem_mib:7.0f}->"
                  f"{got.mem_mib:7.0f}")
    if args.out is not None:
        args.out.write_text(json.dumps({"command": "python experiments/onnx_step.py", "torch": torch.__version__,
                                        "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
