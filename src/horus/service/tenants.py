"""The live service's tenants: queues and priority classes kept in the store, as a ``horus.tenancy.Tenancy``.

No stored queue: no tenancy, and the service schedules as it did before queues existed. With queues, the
``LiveScheduler`` builds its ``SchedulerCore`` with the tenancy (``horus.core.tenancy``), and builds it again
whenever a queue or a class changes. The priority class ``normal`` (value 0, preemptible) always exists: a stored
class of that name replaces it. The default queue is the one a ``--tenancy`` file named, else the first created;
the default class is the one the file named, else ``normal``. ``horus serve --tenancy FILE`` seeds an unseeded
store only: after the first start the store wins (docs/service.md). A queue with ``users`` takes jobs only from
those user tokens (and admins): ``Tenants.check_user``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from horus.core.tenancy import Admission
from horus.errors import HorusInputError
from horus.service.store import Store
from horus.state import SchedulerState, gpu_share
from horus.tenancy import ANY_TYPE, DEFAULT_HALF_LIFE_S, DEFAULT_PRIORITY, PriorityClass, Queue, Tenancy, parse_tenancy


SHOWN_USERS = 10  # a refusal names at most this many of the queue's users


class NotAQueueUser(Exception):
    """A user token submitting into a queue whose ``users`` do not name it (the API answers 403)."""


@dataclass(frozen=True)
class Tenants:
    """What the store holds: the tenancy (None without queues) and the priority classes (with ``normal``)."""

    tenancy: Tenancy | None
    classes: Mapping[str, PriorityClass] = field(default_factory=lambda: {DEFAULT_PRIORITY.name: DEFAULT_PRIORITY})
    default_priority: str = DEFAULT_PRIORITY.name
    stored_classes: frozenset[str] = frozenset()

    @property
    def default_queue(self) -> str | None:
        return None if self.tenancy is None else self.tenancy.default_queue

    def check(self, queue: str | None, priority: str | None) -> None:
        """HorusInputError naming ``queue`` or ``priority`` unless the names exist (or are absent)."""
        if queue is not None and (self.tenancy is None or queue not in self.tenancy.queues):
            known = ", ".join(self.tenancy.queues) if self.tenancy is not None else "none: an admin creates them " \
                                                                                    "with `horus queue create`"
            raise HorusInputError("queue", f"unknown queue {queue!r} (known: {known})")
        if priority is not None and priority not in self.classes:
            raise HorusInputError("priority", f"unknown priority class {priority!r} (known: "
                                              f"{', '.join(self.classes)})")

    def check_user(self, queue: str | None, user: str) -> None:
        """NotAQueueUser unless user token ``user`` may submit into ``queue`` (None: the default queue). Call
        after ``check``; without a tenancy every user may."""
        if self.tenancy is None:
            return
        q = self.tenancy.queue_of(queue)
        if not q.admits_user(user):
            shown = ", ".join(q.users[:SHOWN_USERS]) + (f" and {len(q.users) - SHOWN_USERS} more"
                                                        if len(q.users) > SHOWN_USERS else "")
            raise NotAQueueUser(f"user {user!r} may not submit into queue {q.name!r} (its users: {shown}); ask an "
                                f"admin (horus queue create {q.name} --user {user})")

    def names(self, queue: str | None, priority: str | None) -> tuple[str | None, str | None]:
        """The queue and class a job with these stored names belongs to (without a tenancy: the stored names)."""
        if self.tenancy is None:
            return queue, priority
        return queue or self.tenancy.default_queue, priority or self.default_priority


def load(store: Store) -> Tenants:
    """The store's tenants (defaults from the settings a ``--tenancy`` file left, where they still exist)."""
    settings = store.tenancy_settings()
    stored = store.priority_classes()
    classes = {DEFAULT_PRIORITY.name: DEFAULT_PRIORITY}
    classes.update({c["name"]: PriorityClass(c["name"], c["value"], c["preemptible"]) for c in stored})
    default_priority = settings.get("default_priority")
    if default_priority not in classes:
        default_priority = DEFAULT_PRIORITY.name
    queues = {q["name"]: Queue(q["name"], q["guaranteed"], q["borrow_limit"], q["weight"], tuple(q["users"]))
              for q in store.queues()}
    tenancy = None
    if queues:
        default_queue = settings.get("default_queue")
        tenancy = Tenancy(queues, classes, default_queue if default_queue in queues else next(iter(queues)),
                          default_priority, settings.get("charge", "equal"),
                          float(settings.get("half_life_s", DEFAULT_HALF_LIFE_S)))
    return Tenants(tenancy, classes, default_priority, frozenset(c["name"] for c in stored))


def read_file(path: Path) -> Tenancy:
    """``horus serve --tenancy FILE``: the ``tenancy:`` section of a cluster spec YAML (docs/tenancy.md)."""
    from horus.validation import check_input_path, load_yaml

    check_input_path(path, "--tenancy", "a cluster spec YAML")
    data, _ = load_yaml(path, "a cluster spec YAML with a 'tenancy:' section")
    if not isinstance(data, Mapping) or "tenancy" not in data:
        raise HorusInputError(str(path), "expected a mapping with a 'tenancy:' section (queues, priority_classes; "
                                          "docs/tenancy.md)")
    return parse_tenancy(data["tenancy"], str(path))


def seed(store: Store, tenancy: Tenancy, now: float) -> bool:
    """Store a file's tenancy if no file seeded this store before; True if it did."""
    queues = [{"name": q.name, "guaranteed": dict(q.guaranteed), "borrow_limit": q.borrow_limit, "weight": q.weight,
               "users": list(q.users)} for q in tenancy.queues.values()]
    classes = [c.describe() for c in tenancy.priority_classes.values() if c != DEFAULT_PRIORITY]
    settings = {"default_queue": tenancy.default_queue, "default_priority": tenancy.default_priority,
                "charge": tenancy.charge, "half_life_s": tenancy.half_life_s}
    return store.seed_tenancy(queues, classes, settings, now)


def carry_ledger(old: Admission | None, new: Admission | None) -> None:
    """A rebuilt core's admission keeps what the previous one integrated (fair-share history and deficit, reclaims,
    the jobs the fair-share reclaim helped) for the queues both know; present charges and reservations are derived
    again from the new state."""
    if old is None or new is None:
        return
    for name, acc in new.accounts.items():
        prev = old.accounts.get(name)
        if prev is not None:
            new.accounts[name] = dataclasses.replace(prev, queue=acc.queue, usage={}, reserved={}, held_need=0.0)
    new.reclaims, new.fair_reclaims, new.contended_s = old.reclaims, old.fair_reclaims, old.contended_s
    new.carry_helped(old)  # jobs the fair-share reclaim helped stay protected from it across the rebuild


def queue_views(tenants: Tenants, admission: Admission | None, state: SchedulerState) -> list[dict[str, Any]]:
    """Each queue with its quota, its users (``[]``: every user) and, from the core's ledger, what it is charged
    now (GPUs), what its admitted jobs that wait for placement reserve, its jobs held for quota, admitted and
    running, its reclaims, and how far it is behind its weighted fair share over time (``fair_deficit_gpu_h``,
    GPU-hours, decayed; negative: ahead)."""
    tenancy = tenants.tenancy
    if tenancy is None or admission is None:
        return []
    counts = {name: {"held": 0, "held_gpus": 0.0, "admitted": 0, "running": 0} for name in tenancy.queues}
    for kind, jobs in (("held", state.held), ("admitted", state.queue), ("running", state.running)):
        for job in jobs.values():
            row = counts.get(job.spec.queue or tenancy.default_queue)
            if row is None:
                continue
            row[kind] += 1
            if kind == "held":
                row["held_gpus"] += job.spec.num_gpus * min(1.0, gpu_share(job.spec))
    out = []
    for name, q in tenancy.queues.items():
        acc = admission.accounts[name]
        c = counts[name]
        out.append({
            "name": name, "guaranteed": dict(q.guaranteed), "borrow_limit": q.borrow_limit, "weight": q.weight,
            "users": list(q.users), "default": name == tenancy.default_queue,
            "charged_gpus": _gpus(acc.used()), "reserved_gpus": _gpus(acc.reserved.get(ANY_TYPE, 0.0)),
            "held_jobs": c["held"], "held_gpus": _gpus(c["held_gpus"]), "admitted_jobs": c["admitted"],
            "running_jobs": c["running"], "used_gpu_h": _gpus(acc.used_gpu_s / 3600), "reclaimed": acc.reclaimed,
            "priority_preempted": acc.priority_preempted,
            "fair_deficit_gpu_h": round(acc.fair_deficit_gpu_s / 3600, 6),
        })
    return out


def class_views(tenants: Tenants) -> list[dict[str, Any]]:
    """Every priority class, highest first; ``stored``: false for the built-in ``normal``."""
    return [{**c.describe(), "default": c.name == tenants.default_priority, "stored": c.name in tenants.stored_classes}
            for c in sorted(tenants.classes.values(), key=lambda c: (-c.value, c.name))]


def _gpus(value: float) -> float:
    """A ledger figure as shown: rounded to 1e-6 (sums of charges leave float dust), never negative."""
    return max(0.0, round(value, 6))
