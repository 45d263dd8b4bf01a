"""Loader for GPUMemNet's MLP measurements (``mlp_data_step{1,2}.csv``, itu-rad/GPUMemNet, Apache-2.0).

One row per ~1 min training run of a generated MLP on an A100 40 GB: the per-layer
``Activations-Params`` list ``[(layer_type, output elements, parameters), ...]``, batch size, peak whole-device
memory (MiB, including the CUDA context) and mean GPU utilization (%) over non-zero samples.
"""

from __future__ import annotations

import ast
import csv
import re
from dataclasses import dataclass
from pathlib import Path

from horus.errors import HorusInputError

GPU = "A100-40GB"
FILES = ("mlp_data_step1.csv", "mlp_data_step2.csv")
_NAME = re.compile(r"input:(\d+)_output:(\d+)_depth:(\d+)_arch:([a-z]+)_batch:(\d+)")


@dataclass(frozen=True)
class MLPRun:
    run_id: str  # file:line
    inputs: int
    arch: str  # pyramid, uniform, bottleneck, gradual
    layers: tuple[tuple[str, int, int], ...]
    batch_size: int
    max_mem_mib: float
    util_pct: float


def load_gpumemnet(root: str | Path) -> list[MLPRun]:
    """Every run of both step files."""
    out: list[MLPRun] = []
    for name in FILES:
        path = Path(root) / name
        try:
            with path.open(newline="") as fh:
                rows = list(csv.DictReader(fh))
        except OSError as exc:
            raise HorusInputError(str(path), f"cannot read GPUMemNet data ({exc.strerror})") from None
        for line, r in enumerate(rows, start=2):
            where = f"{path}: line {line}"
            try:
                m = _NAME.match(r["Filename"])
                if m is None:
                    raise ValueError(f"unexpected Filename {r['Filename'][:60]!r}")
                layers = tuple((str(t), int(a), int(p)) for t, a, p in ast.literal_eval(r["Activations-Params"]))
                out.append(MLPRun(f"{name}:{line}", int(m.group(1)), m.group(4), layers, int(r["Batch Size"]),
                                  float(r["Max GPU Memory (MiB)"]), float(r["Avg GPUTL"])))
            except KeyError as exc:
                raise HorusInputError(where, f"missing column {exc.args[0]!r}") from None
            except (ValueError, SyntaxError, TypeError) as exc:
                raise HorusInputError(where, f"bad value ({exc})") from None
    return out
