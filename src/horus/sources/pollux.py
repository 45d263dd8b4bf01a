"""Loader for Pollux's measured step times (``<model>/placements.csv``, AdaptDL OSDI'21 artifact, Apache-2.0).

``placement, local_bsz, step_time, sync_time``; rows with placement ``1`` are single-GPU (T4) iterations.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from horus.errors import HorusInputError

GPU = "T4"  # AWS g4dn.12xlarge


@dataclass(frozen=True)
class PolluxRow:
    model: str  # the artifact's directory name (bert, cifar10, imagenet, ncf, ...)
    batch_size: int
    iter_time_s: float


def load_pollux(root: str | Path, model: str) -> list[PolluxRow]:
    """Single-GPU rows of ``<root>/<model>/placements.csv``."""
    path = Path(root) / model / "placements.csv"
    try:
        with path.open(newline="") as fh:
            reader = csv.DictReader(fh)
            for column in ("placement", "local_bsz", "step_time"):
                if column not in (reader.fieldnames or []):
                    raise HorusInputError(str(path), f"missing column {column!r}")
            rows = list(reader)
    except OSError as exc:
        raise HorusInputError(str(path), f"cannot read Pollux placements ({exc.strerror})") from None
    out = []
    for line, r in enumerate(rows, start=2):
        if r["placement"].strip() != "1":
            continue
        try:
            out.append(PolluxRow(model, int(float(r["local_bsz"])), float(r["step_time"])))
        except ValueError:
            raise HorusInputError(str(path), f"line {line}: bad number") from None
    return out
