"""Campaign specs: which (model, batch, precision) configurations to profile, solo and co-located.

A campaign file is YAML or JSON. Either a list of solo configurations, or a mapping::

    solo:
      - {model: resnet50, batch: 64, precision: fp32, repeats: 2}
      - {model: bert_base, batch: 8, precision: amp, input_size: 128}
    colocate:
      - {set: "resnet50:64,bert_base:8", repeats: 1}        # member = model:batch[:precision]
      - {set: "resnet18:32:amp,lstm_lm:20", precision: fp32}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from horus.errors import HorusInputError

PRECISIONS: tuple[str, ...] = ("fp32", "amp")


@dataclass(frozen=True)
class JobConfig:
    """One training job to profile (a member of a set when co-located)."""

    model: str
    batch: int
    precision: str = "fp32"
    input_size: int | None = None  # None: the zoo entry's default

    def config_id(self, repeat: int = 0) -> str:
        """``<model>-b<batch>-<precision>[-i<input>]-r<repeat>`` (the schema's ``config_id``)."""
        size = f"-i{self.input_size}" if self.input_size is not None else ""
        return f"{self.model}-b{self.batch}-{self.precision}{size}-r{repeat}"

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "batch": self.batch, "precision": self.precision, "input_size": self.input_size}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> JobConfig:
        return cls(str(raw["model"]), int(raw["batch"]), str(raw.get("precision", "fp32")), raw.get("input_size"))


@dataclass(frozen=True)
class SoloEntry:
    job: JobConfig
    repeats: int = 1


@dataclass(frozen=True)
class ColocEntry:
    members: tuple[JobConfig, ...]
    repeats: int = 1

    @property
    def set_id(self) -> str:
        """Order-independent id, e.g. ``bert_base-b8-fp32+resnet50-b64-fp32``."""
        return "+".join(sorted(m.config_id()[: -len("-r0")] for m in self.members))


@dataclass
class Campaign:
    solo: list[SoloEntry] = field(default_factory=list)
    colocate: list[ColocEntry] = field(default_factory=list)


def _check_precision(value: str, where: str) -> str:
    if value not in PRECISIONS:
        raise HorusInputError(where, f"precision: expected one of {', '.join(PRECISIONS)}, got {value!r}")
    return value


_UPPER = {"batch": 2**26, "input_size": 65_536, "repeats": 1000}  # docs/inputs.md


def _positive_int(value: Any, where: str, name: str) -> int:
    high = _UPPER.get(name, 2**31)
    expected = f"{name}: expected an integer in [1, {high:,}], got {str(value)[:40]!r}"
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise HorusInputError(where, expected)
    try:
        number = int(value) if not isinstance(value, str) or (len(value) < 20 and value.strip().isascii()) else 0
    except ValueError:
        raise HorusInputError(where, expected) from None
    if not 1 <= number <= high:
        raise HorusInputError(where, expected)
    return number


def parse_member(text: str, where: str, precision: str = "fp32") -> JobConfig:
    """``'resnet50:64'`` or ``'resnet50:64:amp'`` -> JobConfig."""
    parts = text.strip().split(":")
    if len(parts) not in (2, 3) or not parts[0]:
        raise HorusInputError(where, f"expected model:batch[:precision], got {text!r}")
    prec = _check_precision(parts[2], where) if len(parts) == 3 else precision
    return JobConfig(parts[0], _positive_int(parts[1], where, "batch"), prec)


def parse_set(text: str, where: str = "--set", precision: str = "fp32") -> tuple[JobConfig, ...]:
    """``'resnet50:64,bert_base:8'`` -> members (at least two)."""
    members = tuple(parse_member(part, where, precision) for part in text.split(",") if part.strip())
    if len(members) < 2:
        raise HorusInputError(where, f"a co-located set needs at least two members, got {text!r}")
    return members


def _solo_entry(raw: Any, where: str) -> SoloEntry:
    if not isinstance(raw, dict) or "model" not in raw or "batch" not in raw:
        raise HorusInputError(where, f"expected a mapping with 'model' and 'batch', got {raw!r}")
    precision = _check_precision(str(raw.get("precision", "fp32")), where)
    size = raw.get("input_size")
    job = JobConfig(str(raw["model"]), _positive_int(raw["batch"], where, "batch"), precision,
                    None if size is None else _positive_int(size, where, "input_size"))
    return SoloEntry(job, _positive_int(raw.get("repeats", 1), where, "repeats"))


def _coloc_entry(raw: Any, where: str) -> ColocEntry:
    if not isinstance(raw, dict) or "set" not in raw:
        raise HorusInputError(where, f"expected a mapping with 'set', got {raw!r}")
    precision = _check_precision(str(raw.get("precision", "fp32")), where)
    members = parse_set(str(raw["set"]), f"{where}/set", precision)
    return ColocEntry(members, _positive_int(raw.get("repeats", 1), where, "repeats"))


def parse_campaign(data: Any, source: str) -> Campaign:
    """Validate a loaded campaign document; raise HorusInputError naming the bad entry."""
    if isinstance(data, list):
        data = {"solo": data}
    if not isinstance(data, dict) or not set(data) <= {"solo", "colocate"}:
        raise HorusInputError(source, "expected a list of solo configs or a mapping with 'solo' and/or 'colocate'")
    campaign = Campaign()
    for key in ("solo", "colocate"):
        if not isinstance(data.get(key) or [], list):
            raise HorusInputError(source, f"{key}: expected a list of entries, got {str(data[key])[:40]!r}")
    for i, raw in enumerate(data.get("solo") or []):
        campaign.solo.append(_solo_entry(raw, f"{source} solo[{i}]"))
    for i, raw in enumerate(data.get("colocate") or []):
        campaign.colocate.append(_coloc_entry(raw, f"{source} colocate[{i}]"))
    return campaign


def load_campaign(path: str | Path) -> Campaign:
    """Read a YAML (``.yaml``/``.yml``) or JSON campaign file."""
    path = Path(path)
    from horus.validation import load_json, load_yaml

    if path.suffix in (".yaml", ".yml"):
        data, _ = load_yaml(path, "a campaign YAML file")
    else:
        data, _ = load_json(path, "a campaign JSON file")
    return parse_campaign(data, str(path))
