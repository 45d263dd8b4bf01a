"""Loader for Gavel's measured throughputs (``simulation_throughputs.json``, Gavel OSDI 2020, MIT).

Layout: ``{gpu: {"('<job type>', <scale>)": {"null": solo, "('<other>', 1)": [this, other], ...}}}``
with throughputs in steps/s. Only scale-1 jobs carry co-located pair values.

Quirks are kept as data and counted in ``GavelThroughputs.quirks``, never fixed silently:
``zero_pairs`` (a pair recorded as zeros, i.e. unmeasured: treated as missing) and
``both_at_solo`` (both jobs exactly at their isolated throughput: kept as measured).
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from horus.errors import HorusInputError
from horus.jobs import job_type_key

# Gavel job-type names -> (Horus zoo model, batch size). A3C and CycleGAN run at Gavel's fixed batch.
_GAVEL_MODELS: dict[str, str] = {
    "ResNet-18": "resnet18_cifar",  # Gavel trains ResNet-18 on CIFAR-10 (32x32)
    "ResNet-50": "resnet50",
    "Transformer": "transformer",
    "LM": "lstm_lm",
    "Recommendation": "recoder",  # Recoder autoencoder on ML-20M (not NeuMF)
    "CycleGAN": "cyclegan",
    "A3C": "a3c",
}
_FIXED_BATCH: dict[str, int] = {"CycleGAN": 1, "A3C": 4}


def gavel_to_job_type(name: str) -> str:
    """``'ResNet-50 (batch size 64)'`` -> ``'resnet50/b64'``; raises ValueError for unknown names."""
    base, _, rest = name.partition(" (batch size ")
    if base not in _GAVEL_MODELS:
        raise ValueError(f"unknown Gavel job type {name!r}")
    batch = int(rest.rstrip(")")) if rest else _FIXED_BATCH[base]
    return job_type_key(_GAVEL_MODELS[base], batch)


@dataclass
class GavelThroughputs:
    """Measured throughputs of one GPU type, keyed by Horus job-type keys (``resnet50/b64``)."""

    gpu: str
    solo: dict[str, float]  # scale-1 isolated steps/s
    pairs: dict[tuple[str, str], tuple[float, float]]  # (a, b) -> (a's steps/s, b's steps/s) on one GPU
    multi: dict[tuple[str, int], float]  # (job type, GPUs) -> steps/s of the whole data-parallel job
    sha256: str
    quirks: dict[str, int] = field(default_factory=dict)

    def normalized_pair(self, a: str, b: str) -> tuple[float, float] | None:
        """(a's, b's) co-located throughput divided by solo, or None when unmeasured."""
        value = self.pairs.get((a, b))
        if value is None:
            return None
        return value[0] / self.solo[a], value[1] / self.solo[b]

    def job_types(self) -> list[str]:
        return sorted(self.solo)


def _parse_key(raw: str, source: str, where: str) -> tuple[str, int]:
    try:
        name, scale = ast.literal_eval(raw)
        return str(name), int(scale)
    except (ValueError, SyntaxError, TypeError):
        raise HorusInputError(source, f"{where}: expected a key like \"('ResNet-50 (batch size 64)', 1)\", got {raw!r}") from None


def load_gavel(path: str | Path, gpu: str = "v100") -> GavelThroughputs:
    """Load one GPU type's table from Gavel's JSON. Raises HorusInputError naming the bad field."""
    path = Path(path)
    source = str(path)
    try:
        raw_bytes = path.read_bytes()
    except OSError as exc:
        raise HorusInputError(source, f"cannot read Gavel throughputs ({exc.strerror})") from None
    try:
        data = json.loads(raw_bytes)
    except json.JSONDecodeError as exc:
        raise HorusInputError(source, f"line {exc.lineno}: not valid JSON ({exc.msg})") from None
    if not isinstance(data, dict) or gpu not in data:
        known = ", ".join(sorted(data)) if isinstance(data, dict) else "none"
        raise HorusInputError(source, f"no GPU type {gpu!r} at top level (found: {known})")
    solo: dict[str, float] = {}
    multi: dict[tuple[str, int], float] = {}
    raw_pairs: list[tuple[str, str, object, str]] = []
    for raw_key, entries in data[gpu].items():
        name, scale = _parse_key(raw_key, source, f"{gpu}")
        try:
            jt = gavel_to_job_type(name)
        except ValueError as exc:
            raise HorusInputError(source, f"{gpu}/{raw_key}: {exc}") from None
        if not isinstance(entries, dict) or "null" not in entries:
            raise HorusInputError(source, f"{gpu}/{raw_key}: missing isolated throughput 'null'")
        isolated = entries["null"]
        if not isinstance(isolated, (int, float)) or not math.isfinite(isolated) or isolated < 0:
            raise HorusInputError(source, f"{gpu}/{raw_key}/null: expected a non-negative number, got {isolated!r}")
        if scale == 1:
            solo[jt] = float(isolated)
            for other_key, value in entries.items():
                if other_key != "null":
                    other, other_scale = _parse_key(other_key, source, f"{gpu}/{raw_key}")
                    if other_scale == 1:
                        raw_pairs.append((jt, gavel_to_job_type(other), value, f"{gpu}/{raw_key}/{other_key}"))
        else:
            multi[(jt, scale)] = float(isolated)
    pairs: dict[tuple[str, str], tuple[float, float]] = {}
    quirks = {"zero_pairs": 0, "both_at_solo": 0}
    for a, b, value, where in raw_pairs:
        if (not isinstance(value, list) or len(value) != 2
                or not all(isinstance(v, (int, float)) and math.isfinite(v) and v >= 0 for v in value)):
            raise HorusInputError(source, f"{where}: expected [this, other] non-negative throughputs, got {value!r}")
        if b not in solo:
            raise HorusInputError(source, f"{where}: partner has no isolated throughput")
        if value[0] == 0 or value[1] == 0:
            quirks["zero_pairs"] += 1
            continue
        if value[0] == solo[a] and value[1] == solo[b]:
            quirks["both_at_solo"] += 1
        pairs[(a, b)] = (float(value[0]), float(value[1]))
    return GavelThroughputs(gpu, solo, pairs, multi, hashlib.sha256(raw_bytes).hexdigest(), quirks)
