"""Time and peak RSS of graph feature extraction (targets: < 5 s and < 1 GB each on 2 cores).

    python benchmarks/feature_extraction.py   # writes benchmarks/results/feature_extraction.json

Each case runs in a fresh interpreter so its peak RSS is its own; ``import_s`` (torch/transformers/zoo
imports) is reported apart from ``extract_s`` (build on meta + export + fake-mode FLOP counting).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

CASES = (("resnet50", 64, 224), ("gpt2_medium", 8, 1024))

_CHILD = """
import json, resource, sys, time
start = time.perf_counter()
import torch
from horus.graph.extract import extract_zoo_features
from horus.zoo import get_entry
get_entry({name!r}).build  # zoo imported
if {name!r}.startswith(("gpt2", "bert", "t5")):
    # transformers imports lazily: name the model classes so their import is charged to import_s
    from transformers import BertForMaskedLM, GPT2LMHeadModel, T5ForConditionalGeneration  # noqa: F401
imported = time.perf_counter()
features = extract_zoo_features({name!r}, {batch}, {size})
done = time.perf_counter()
print(json.dumps({{"model": {name!r}, "batch": {batch}, "input_size": {size},
    "import_s": round(imported - start, 2), "extract_s": round(done - imported, 2),
    "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    "params": features["params"], "forward_gflops": round(features["forward_flops"] / 1e9, 2),
    "train_gflops": round(features["train_flops"] / 1e9, 2)}}))
"""


def run_case(name: str, batch: int, size: int) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-c", _CHILD.format(name=name, batch=batch, size=size)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    import torch

    results = [run_case(*case) for case in CASES]
    report = {"torch": torch.__version__, "python": platform.python_version(), "cpus": os.cpu_count(),
              "targets": {"extract_s": 5.0, "peak_rss_mb": 1024}, "results": results}
    out = Path(__file__).resolve().parent / "results" / "feature_extraction.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    for r in results:
        print(f"{r['model']:<12} b{r['batch']:<3} import {r['import_s']:>5.1f} s  extract {r['extract_s']:>5.1f} s  "
              f"peak RSS {r['peak_rss_mb']:>7.1f} MB  {r['forward_gflops']} GFLOPs fwd")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
