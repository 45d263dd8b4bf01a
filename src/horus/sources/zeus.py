"""Loader for Zeus's power traces (``summary_power_{gpu}.csv``, ml-energy/zeus NSDI'23, Apache-2.0).

Columns ``dataset, network, batch_size, optimizer, power_limit, time_per_epoch, average_power``. Only rows at
the GPU's default (highest) power limit are returned: iteration time = time_per_epoch / ceil(N / batch)
with N the training-set size (``TRAIN_SAMPLES``; not in the files, see each value's note).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

from horus.errors import HorusInputError

# Training samples per epoch (assumptions named): CIFAR-100 and ImageNet-1k train splits; SQuAD v1.1
# train features at sequence 384 / stride 128 (Hugging Face run_qa with bert-base-uncased, ~88.6k);
# MovieLens-1M leave-one-out train positives (994,169) with 4 sampled negatives each (NCF reference setup).
TRAIN_SAMPLES: dict[str, int] = {"cifar100": 50_000, "imagenet": 1_281_167, "squad": 88_641,
                                 "movielens-1m": 994_169 * 5}
GPU_FILES: dict[str, str] = {"V100": "v100", "A40": "a40", "RTX6000": "rtx6000", "P100": "p100"}
COLUMNS = ("dataset", "network", "batch_size", "optimizer", "power_limit", "time_per_epoch")


@dataclass(frozen=True)
class ZeusRow:
    gpu: str  # horus.gpu_types spec name
    dataset: str
    network: str
    batch_size: int
    optimizer: str
    iter_time_s: float


def load_zeus(root: str | Path, gpu: str) -> list[ZeusRow]:
    """Rows of ``summary_power_<gpu>.csv`` at the default power limit whose dataset size is known."""
    if gpu not in GPU_FILES:
        raise HorusInputError("gpu", f"Zeus traces exist for {', '.join(GPU_FILES)}, got {gpu!r}")
    path = Path(root) / f"summary_power_{GPU_FILES[gpu]}.csv"
    try:
        with path.open(newline="") as fh:
            reader = csv.DictReader(fh)
            missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
            if missing:
                raise HorusInputError(str(path), f"missing column {missing[0]!r}")
            rows = list(reader)
    except OSError as exc:
        raise HorusInputError(str(path), f"cannot read Zeus trace ({exc.strerror})") from None
    try:
        limit = max(float(r["power_limit"]) for r in rows)
        out = []
        for r in rows:
            if float(r["power_limit"]) != limit or r["dataset"] not in TRAIN_SAMPLES:
                continue
            batch = int(r["batch_size"])
            steps = math.ceil(TRAIN_SAMPLES[r["dataset"]] / batch)
            out.append(ZeusRow(gpu, r["dataset"], r["network"], batch, r["optimizer"].lower(),
                               float(r["time_per_epoch"]) / steps))
    except ValueError as exc:
        raise HorusInputError(str(path), f"bad number ({exc})") from None
    return out
