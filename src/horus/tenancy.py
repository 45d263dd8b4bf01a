"""Tenants: queues with guaranteed GPU quotas, borrowing limits and fair-share weights, and job priority classes.

A ``Tenancy`` is declared under ``tenancy:`` in the cluster spec YAML (docs/tenancy.md), over the live service's
API (``horus queue create``), or derived from a trace's tenant column (``from_demand``). Jobs name their queue and
priority class in ``JobSpec.queue`` / ``JobSpec.priority``; a job naming neither gets the defaults. How a tenancy
is enforced (admission, reclaim, accounting of shared GPUs) is ``horus.core.tenancy``.

Quotas are in GPUs: ``guaranteed`` maps a GPU type name, or ``ANY_TYPE`` for GPUs of any type, to a number of
GPUs (fractions allowed: a co-located job is charged its share of a GPU). ``users`` binds a queue to the live
service's user tokens that may submit into it (empty: every user); the simulator ignores it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

from horus.errors import HorusInputError
from horus.validation import TOKEN_NAME, Domain

ANY_TYPE = "*"
CHARGE_RULES = ("equal", "util")  # how a shared GPU is split among its residents (horus.core.tenancy)
QUOTA_GPUS = Domain(0, 200_000, False, "GPUs")
WEIGHT = Domain(1e-6, 1e6, False)
PRIORITY_VALUE = Domain(-1_000_000, 1_000_000, True)
HALF_LIFE_S = Domain(1.0, 10 * 365.25 * 86400, False, "s")
NAME_MAX = 63  # a Kubernetes label value's length
MAX_USERS = 1000  # user-token names one queue lists
DEFAULT_HALF_LIFE_S = 7 * 86400.0  # Slurm's PriorityDecayHalfLife default (7 days)


@dataclass(frozen=True)
class Queue:
    """One tenant. ``borrow_limit``: GPUs it may use beyond its guarantee when others leave theirs idle (None:
    no limit but the cluster); borrowed GPUs are reclaimed by preemption when their owners need them. ``users``:
    the user-token names that may submit into it in the live service (empty: every user; admins always may)."""

    name: str
    guaranteed: Mapping[str, float] = field(default_factory=lambda: {ANY_TYPE: 0.0})
    borrow_limit: float | None = None
    weight: float = 1.0
    users: tuple[str, ...] = ()

    def admits_user(self, user: str) -> bool:
        """May user token ``user`` submit into this queue? (No list: every user may.)"""
        return not self.users or user in self.users

    def limit(self, key: str) -> float:
        """Most GPUs (of type ``key``, or ``ANY_TYPE``) this queue may be charged for, borrowing included."""
        g = self.guaranteed.get(key, 0.0)
        return math.inf if self.borrow_limit is None else g + self.borrow_limit

    def describe(self) -> dict[str, object]:
        out: dict[str, object] = {"name": self.name, "guaranteed": dict(self.guaranteed),
                                  "borrow_limit": self.borrow_limit, "weight": self.weight}
        if self.users:
            out["users"] = list(self.users)
        return out


@dataclass(frozen=True)
class PriorityClass:
    """A job priority: larger ``value`` first; a job of a higher class may preempt ``preemptible`` jobs of lower
    classes in its own queue, and only ``preemptible`` jobs are ever reclaimed."""

    name: str
    value: int = 0
    preemptible: bool = True

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "value": self.value, "preemptible": self.preemptible}


DEFAULT_PRIORITY = PriorityClass("normal", 0, True)


@dataclass(frozen=True)
class Tenancy:
    """Queues and priority classes of one cluster, and how shared GPUs are charged."""

    queues: Mapping[str, Queue]
    priority_classes: Mapping[str, PriorityClass] = field(
        default_factory=lambda: {DEFAULT_PRIORITY.name: DEFAULT_PRIORITY})
    default_queue: str = ""
    default_priority: str = DEFAULT_PRIORITY.name
    charge: str = "equal"
    half_life_s: float = DEFAULT_HALF_LIFE_S

    def __post_init__(self) -> None:
        if not self.queues:
            raise HorusInputError("tenancy", "queues: expected at least one queue")
        if not self.default_queue:
            object.__setattr__(self, "default_queue", next(iter(self.queues)))
        if self.default_queue not in self.queues:
            raise HorusInputError("tenancy", f"default_queue: unknown queue {self.default_queue!r}")
        if self.default_priority not in self.priority_classes:
            raise HorusInputError("tenancy", f"default_priority: unknown priority class {self.default_priority!r}")
        if self.charge not in CHARGE_RULES:
            raise HorusInputError("tenancy", f"charge: expected one of {', '.join(CHARGE_RULES)}, got "
                                             f"{self.charge!r}")

    def queue_of(self, name: str | None) -> Queue:
        """The queue a job names (None: the default); HorusInputError for an unknown one."""
        queue = self.queues.get(name or self.default_queue)
        if queue is None:
            raise HorusInputError("queue", f"unknown queue {name!r} (known: {', '.join(self.queues)})")
        return queue

    def priority_of(self, name: str | None) -> PriorityClass:
        """The priority class a job names (None: the default); HorusInputError for an unknown one."""
        cls = self.priority_classes.get(name or self.default_priority)
        if cls is None:
            raise HorusInputError("priority", f"unknown priority class {name!r} (known: "
                                              f"{', '.join(self.priority_classes)})")
        return cls

    def check_job(self, queue: str | None, priority: str | None) -> None:
        """HorusInputError unless both names are known (or absent)."""
        self.queue_of(queue)
        self.priority_of(priority)

    def describe(self) -> dict[str, object]:
        return {"queues": [q.describe() for q in self.queues.values()],
                "priority_classes": [p.describe() for p in self.priority_classes.values()],
                "default_queue": self.default_queue, "default_priority": self.default_priority,
                "charge": self.charge, "half_life_s": self.half_life_s}


# ---- parsing (cluster spec ``tenancy:`` section, API bodies) -------------------------------------------------
_TOP = {"queues", "priority_classes", "default_queue", "default_priority", "charge", "half_life_h"}
_QUEUE = {"name", "guaranteed", "borrow_limit", "weight", "users"}
_CLASS = {"name", "value", "preemptible"}


class _Reader:
    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, where: str, message: str) -> NoReturn:
        raise HorusInputError(self.source, f"{where}: {message}")

    def mapping(self, data: object, where: str, allowed: set[str]) -> Mapping[str, Any]:
        if not isinstance(data, Mapping):
            self.fail(where, f"expected a mapping, got {data!r}")
        unknown = sorted(str(k) for k in data if k not in allowed)
        if unknown:
            self.fail(f"{where}.{unknown[0]}", f"unknown key (allowed: {', '.join(sorted(allowed))})")
        return data

    def number(self, value: object, where: str, domain: Domain) -> float:
        if not domain.contains(value) or (domain.integer and not isinstance(value, int)):
            self.fail(where, f"expected {domain.describe()}, got {value!r}")
        return float(value)  # type: ignore[arg-type]

    def name(self, value: object, where: str) -> str:
        if not isinstance(value, str) or not check_name(value):
            self.fail(where, f"expected a name of 1-{NAME_MAX} letters, digits, '-', '_' or '.', got {value!r}")
        return value


def check_name(name: str) -> bool:
    """Queue and priority-class names: what a Kubernetes label value may hold (so a queue can be a label)."""
    return 0 < len(name) <= NAME_MAX and name.isascii() and all(c.isalnum() or c in "-_." for c in name)


def parse_queue(data: object, source: str, where: str = "queue") -> Queue:
    """One queue from a mapping ``{name, guaranteed, borrow_limit, weight, users}``."""
    r = _Reader(source)
    q = r.mapping(data, where, _QUEUE)
    name = r.name(q.get("name"), f"{where}.name")
    raw = q.get("guaranteed", 0)
    guaranteed: dict[str, float]
    if isinstance(raw, Mapping):
        guaranteed = {}
        for key, value in raw.items():
            if not isinstance(key, str) or not key.strip():
                r.fail(f"{where}.guaranteed", f"expected GPU type names (or {ANY_TYPE!r}) as keys, got {key!r}")
            guaranteed[key] = r.number(value, f"{where}.guaranteed.{key}", QUOTA_GPUS)
        if not guaranteed:
            r.fail(f"{where}.guaranteed", "expected at least one GPU type")
    else:
        guaranteed = {ANY_TYPE: r.number(raw, f"{where}.guaranteed", QUOTA_GPUS)}
    borrow = q.get("borrow_limit")
    borrow_limit = None if borrow is None else r.number(borrow, f"{where}.borrow_limit", QUOTA_GPUS)
    weight = r.number(q.get("weight", 1.0), f"{where}.weight", WEIGHT)
    return Queue(name, guaranteed, borrow_limit, weight, _users(r, q.get("users"), f"{where}.users"))


def _users(r: _Reader, raw: object, where: str) -> tuple[str, ...]:
    """A queue's ``users``: distinct user-token names (horus.validation.TOKEN_NAME); absent or null: none."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or len(raw) > MAX_USERS:
        r.fail(where, f"expected a list of at most {MAX_USERS} user names, got {repr(raw)[:70]}")
    seen: set[str] = set()
    for i, name in enumerate(raw):
        if not isinstance(name, str) or not TOKEN_NAME.fullmatch(name):
            r.fail(f"{where}[{i}]", f"expected a user name of 1-64 letters, digits, '_', '.' or '-', got "
                                   f"{str(name)[:70]!r}")
        if name in seen:
            r.fail(f"{where}[{i}]", f"duplicate user {name!r}")
        seen.add(name)
    return tuple(raw)


def parse_priority_class(data: object, source: str, where: str = "priority_class") -> PriorityClass:
    r = _Reader(source)
    p = r.mapping(data, where, _CLASS)
    preemptible = p.get("preemptible", True)
    if not isinstance(preemptible, bool):
        r.fail(f"{where}.preemptible", f"expected true or false, got {preemptible!r}")
    return PriorityClass(r.name(p.get("name"), f"{where}.name"),
                         int(r.number(p.get("value", 0), f"{where}.value", PRIORITY_VALUE)), preemptible)


def parse_tenancy(data: object, source: str) -> Tenancy:
    """A ``Tenancy`` from the cluster spec's ``tenancy:`` mapping; errors name ``source`` and the field."""
    r = _Reader(source)
    top = r.mapping(data, "tenancy", _TOP)
    raw_queues = top.get("queues")
    if not isinstance(raw_queues, list) or not raw_queues:
        r.fail("tenancy.queues", f"expected a non-empty list of queues, got {raw_queues!r}")
    queues = _unique((parse_queue(q, source, f"tenancy.queues[{i}]") for i, q in enumerate(raw_queues)),
                     r, "tenancy.queues")
    raw_classes = top.get("priority_classes")
    if raw_classes is None:
        classes = {DEFAULT_PRIORITY.name: DEFAULT_PRIORITY}
    elif not isinstance(raw_classes, list) or not raw_classes:
        r.fail("tenancy.priority_classes", f"expected a non-empty list of classes, got {raw_classes!r}")
    else:
        classes = _unique((parse_priority_class(p, source, f"tenancy.priority_classes[{i}]")
                           for i, p in enumerate(raw_classes)), r, "tenancy.priority_classes")
    default_queue = top.get("default_queue", next(iter(queues)))
    if default_queue not in queues:
        r.fail("tenancy.default_queue", f"unknown queue {default_queue!r} (known: {', '.join(queues)})")
    default_priority = top.get("default_priority", next(iter(classes)) if raw_classes else DEFAULT_PRIORITY.name)
    if default_priority not in classes:
        r.fail("tenancy.default_priority", f"unknown priority class {default_priority!r} (known: "
                                           f"{', '.join(classes)})")
    charge = top.get("charge", "equal")
    if charge not in CHARGE_RULES:
        r.fail("tenancy.charge", f"expected one of {', '.join(CHARGE_RULES)}, got {charge!r}")
    half_life_s = DEFAULT_HALF_LIFE_S
    if "half_life_h" in top:
        half_life_s = 3600.0 * r.number(top["half_life_h"], "tenancy.half_life_h",
                                        Domain(HALF_LIFE_S.low / 3600, HALF_LIFE_S.high / 3600, False, "h"))
    return Tenancy(queues, classes, default_queue, default_priority, charge, half_life_s)


def _unique(items: Iterable[Any], r: _Reader, where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        if item.name in out:
            r.fail(where, f"duplicate name {item.name!r}")
        out[item.name] = item
    return out


def from_demand(demand_gpu_s: Mapping[str, float], cluster_gpus: int, *, borrow: bool = True,
                charge: str = "equal") -> Tenancy:
    """Queues from a trace's tenants: each guaranteed its share of the trace's GPU-time demand, of
    ``cluster_gpus`` (whole GPUs, largest remainders; every queue with demand at least... its floor), weight
    equal to its guarantee (at least 1), borrowing up to the whole cluster when ``borrow``."""
    total = sum(demand_gpu_s.values())
    if total <= 0:
        raise HorusInputError("tenancy", "the trace has no GPU-time demand to derive queue quotas from")
    exact = {q: cluster_gpus * d / total for q, d in demand_gpu_s.items()}
    floors = {q: math.floor(x) for q, x in exact.items()}
    left = cluster_gpus - sum(floors.values())
    for q in sorted(exact, key=lambda q: (floors[q] - exact[q], q))[:left]:
        floors[q] += 1
    queues = {q: Queue(q, {ANY_TYPE: float(g)}, None if borrow else 0.0, max(float(g), 1.0))
              for q, g in sorted(floors.items())}
    return Tenancy(queues, charge=charge)
