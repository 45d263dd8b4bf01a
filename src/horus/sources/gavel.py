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
from dataclasses import dataclass, field
from pathlib import Path

from horus.errors import HorusInputError
from horus.jobs import job_type_key
from horus.validation import LIMITS, load_json

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
        raise ValueError(f"unknown Gavel job type {name!r} (known: {', '.join(_GAVEL_MODELS)})")
    if rest:
        digits = rest[:-1] if rest.endswith(")") else ""
        if not digits.isdigit() or not LIMITS["batch_size"].contains(int(digits)):
            raise ValueError(f"expected '{base} (batch size N)' with N {LIMITS['batch_size'].describe()}, got {name!r}")
        batch = int(digits)
    elif base in _FIXED_BATCH:
        batch = _FIXED_BATCH[base]
    else:
        raise ValueError(f"expected '{base} (batch size N)', got {name!r} (only {', '.join(_FIXED_BATCH)} "
                         "have a fixed batch)")
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


_MAX_KEY_CHARS = 200
_KEY_EXAMPLE = "\"('ResNet-50 (batch size 64)', 1)\""


def _parse_key(raw: str, source: str, where: str) -> tuple[str, int]:
    """``"('<job type>', <scale>)"`` -> (job type name, scale); scale is a GPU count (an integer)."""
    try:
        value = ast.literal_eval(raw) if len(raw) <= _MAX_KEY_CHARS else None
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        value = None
    if (not isinstance(value, tuple) or len(value) != 2 or not isinstance(value[0], str)
            or not LIMITS["job_gpus"].contains(value[1]) or not isinstance(value[1], int)):
        raise HorusInputError(source, f"{where}: expected a key like {_KEY_EXAMPLE} (job type, GPU count as an "
                                      f"integer >= 1), got {raw[:80]!r}")
    return value[0], value[1]


def _job_type(name: str, source: str, where: str) -> str:
    try:
        return gavel_to_job_type(name)
    except ValueError as exc:
        raise HorusInputError(source, f"{where}: {exc}") from None


def _throughput(value: object, source: str, where: str) -> float:
    if not LIMITS["throughput"].contains(value):
        raise HorusInputError(source, f"{where}: expected a throughput, {LIMITS['throughput'].describe()}, "
                                      f"got {value!r}")
    return float(value)  # type: ignore[arg-type]


_WARNED: set[tuple[str, str, str]] = set()


def _warn_once(source: str, gpu: str, message: str) -> None:
    """``horus: warning: ...`` on stderr, once per file, GPU type and message in a process."""
    import sys

    if (source, gpu, message) not in _WARNED:
        _WARNED.add((source, gpu, message))
        print(f"horus: warning: {source}: {gpu}: {message}", file=sys.stderr)


def load_gavel(path: str | Path, gpu: str = "v100") -> GavelThroughputs:
    """Load one GPU type's table from Gavel's JSON. Raises HorusInputError naming the bad field.

    Checked before use (docs/inputs.md): strict UTF-8 JSON, keys ``(job type, integer GPU count)``,
    throughputs finite and >= 0, pairs ``[this, other]`` whose normalized values are at most
    ``LIMITS['normalized_throughput'].high``, partners measured alone. A zero isolated throughput is
    Gavel's mark of an unmeasured job: it and its pairs are left out, counted in ``quirks`` and named in a
    warning on stderr (once per file and GPU type); ``null`` itself (JSON null) is an error.
    """
    source = str(path)
    data, raw_bytes = load_json(path, "Gavel's throughputs JSON (simulation_throughputs.json)")
    if not isinstance(data, dict) or gpu not in data:
        known = ", ".join(sorted(data)) if isinstance(data, dict) else "none"
        raise HorusInputError(source, f"no GPU type {gpu!r} at top level (found: {known or 'none'})")
    table = data[gpu]
    if not isinstance(table, dict) or not table:
        raise HorusInputError(source, f"{gpu}: expected a mapping of job keys to throughputs, got "
                                      f"{type(table).__name__} {str(table)[:60]}")
    solo: dict[str, float] = {}
    multi: dict[tuple[str, int], float] = {}
    raw_pairs: list[tuple[str, str, object, str]] = []
    quirks = {"zero_pairs": 0, "both_at_solo": 0, "zero_solo": 0, "pairs_with_unmeasured_solo": 0}
    unmeasured: set[str] = set()
    zero_keys: list[str] = []
    seen: dict[tuple[str, int], str] = {}
    for raw_key, entries in table.items():
        name, scale = _parse_key(raw_key, source, gpu)
        where = f"{gpu}/{raw_key}"
        jt = _job_type(name, source, where)
        if (jt, scale) in seen:
            raise HorusInputError(source, f"{where}: the same job as {gpu}/{seen[(jt, scale)]}; expected each job once")
        seen[(jt, scale)] = raw_key
        if not isinstance(entries, dict) or "null" not in entries:
            raise HorusInputError(source, f"{where}: expected a mapping with the isolated throughput 'null'")
        isolated = _throughput(entries["null"], source, f"{where}/null")
        if scale != 1:
            if isolated == 0:
                quirks["zero_solo"] += 1
                zero_keys.append(f"{where}/null")
            else:
                multi[(jt, scale)] = isolated
            continue
        if isolated == 0:
            quirks["zero_solo"] += 1
            unmeasured.add(jt)
            zero_keys.append(f"{where}/null")
        else:
            solo[jt] = isolated
        for other_key, value in entries.items():
            if other_key == "null":
                continue
            other, other_scale = _parse_key(other_key, source, where)
            other_jt = _job_type(other, source, f"{where}/{other_key}")
            if other_scale == 1:
                raw_pairs.append((jt, other_jt, value, f"{where}/{other_key}"))
    pairs: dict[tuple[str, str], tuple[float, float]] = {}
    cap = LIMITS["normalized_throughput"].high
    for a, b, value, where in raw_pairs:
        if (not isinstance(value, list) or len(value) != 2
                or not all(LIMITS["throughput"].contains(v) for v in value)):
            raise HorusInputError(source, f"{where}: expected [this, other] throughputs, each "
                                          f"{LIMITS['throughput'].describe()}, got {str(value)[:80]}")
        if a in unmeasured or b in unmeasured:
            quirks["pairs_with_unmeasured_solo"] += 1
            continue
        if b not in solo:
            raise HorusInputError(source, f"{where}: partner has no isolated throughput (no key for it in {gpu})")
        if value[0] == 0 or value[1] == 0:
            quirks["zero_pairs"] += 1
            continue
        if value[0] / solo[a] > cap or value[1] / solo[b] > cap:
            raise HorusInputError(source, f"{where}: co-located throughputs {value} are {value[0] / solo[a]:.3g} and "
                                          f"{value[1] / solo[b]:.3g} x the isolated ones; expected at most {cap}")
        if value[0] == solo[a] and value[1] == solo[b]:
            quirks["both_at_solo"] += 1
        pairs[(a, b)] = (float(value[0]), float(value[1]))
    if not solo:
        raise HorusInputError(source, f"{gpu}: no job with a measured (non-zero) isolated throughput")
    if zero_keys:
        _warn_once(source, gpu, f"{len(zero_keys)} job(s) with isolated throughput 0 (unmeasured) left out with "
                                f"their pairs; first: {zero_keys[0]}")
    return GavelThroughputs(gpu, solo, pairs, multi, hashlib.sha256(raw_bytes).hexdigest(), quirks)
