"""What co-location can at best deliver, for lower bounds valid under co-location (docs/metrics.md).

A GPU of type ``T`` may hold any *allowed set*: a multiset of the workload's job types (type ``k`` at most as
often as the workload has jobs of type ``k`` accepting ``T``: a job holds a GPU once) whose true solo memory
fits (``sum mem <= T.memory_mib``, the engine's only limit on co-location; policies' ``max_residents`` are
not a limit of the world). For each job type ``k`` on ``T``:

* ``best_rate``: the largest normalized throughput a ``k`` job gets in any allowed set (1.0 alone);
* ``best_combined``: the largest ``sum_i x_i(S)`` over allowed sets ``S`` containing ``k`` (1.0 alone).

Found by enumerating the allowed sets containing ``k`` (memory-pruned). When there are more than ``budget``
of them, ``best_combined`` falls back to the largest allowed set size containing ``k`` and ``best_rate`` to
``max(1, largest seen)``: valid under ``TruthModel.colocated_throughput``'s contract that every member gets
at most 1.0 (``exact`` is then False).
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from horus.cluster import GPUType
from horus.truth.base import TruthModel

DEFAULT_BUDGET = 3000  # allowed sets evaluated per job type and GPU type before the size fallback
_MEM_SLACK = 1e-9  # relative: a set the engine's float sum might admit is admitted here too (looser = still valid)
_CACHE: weakref.WeakKeyDictionary[TruthModel, dict[tuple[object, ...], dict[str, TypeCapacity]]] = \
    weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class TypeCapacity:
    """The best a job type can get on one GPU type (see the module docstring)."""

    best_rate: float
    best_combined: float
    exact: bool


class _Budget(Exception):
    """The enumeration ran past its budget."""


def type_capacities(truth: TruthModel, gpu_type: GPUType, counts: Mapping[str, int],
                    budget: int = DEFAULT_BUDGET) -> dict[str, TypeCapacity]:
    """``TypeCapacity`` of each type of ``counts`` (job type -> number of jobs) that fits ``gpu_type`` alone."""
    key = (gpu_type.name, float(gpu_type.memory_mib), tuple(sorted(counts.items())), budget)
    cached = _CACHE.setdefault(truth, {})
    if key not in cached:
        cached[key] = _compute(truth, gpu_type, counts, budget)
    return cached[key]


def _compute(truth: TruthModel, gpu_type: GPUType, counts: Mapping[str, int], budget: int) -> dict[str, TypeCapacity]:
    capacity = float(gpu_type.memory_mib) * (1 + _MEM_SLACK)
    mem = {t: float(truth.solo(t, gpu_type).mem_mib) for t in counts}
    types = sorted((t for t in counts if counts[t] > 0 and mem[t] <= capacity), key=lambda t: (mem[t], t))
    out = {}
    for k in types:
        left = dict(counts)
        left[k] -= 1
        best_rate, best_combined, exact = 1.0, 1.0, True
        sets: list[tuple[str, ...]] = []
        try:
            sets.extend(_sets_with(k, types, left, mem, capacity - mem[k], budget))
        except _Budget:
            exact = False
        # one batch per job type (the truth may answer it faster than set by set), the sets in enumeration order
        for members, values in zip(sets, truth.colocated_throughputs(sets, gpu_type)):
            xs = [float(x) for x in values]
            for t, x in zip(members, xs):
                if t == k and x > best_rate:
                    best_rate = x
            combined = math.fsum(xs)
            if combined > best_combined:
                best_combined = combined
        if not exact:
            best_combined = max(best_combined, float(_largest_set(types, left, mem, capacity - mem[k]) + 1))
        out[k] = TypeCapacity(best_rate, best_combined, exact)
    return out


def _sets_with(k: str, types: list[str], left: Mapping[str, int], mem: Mapping[str, float], room: float,
               budget: int) -> Iterator[tuple[str, ...]]:
    """Every allowed set ``(k, *others)`` with at least one other member, others in ``types`` order."""
    seen = 0
    mems = [mem[t] for t in types]
    caps = [left.get(t, 0) for t in types]
    # (first type index still allowed, members so far, free MiB, how often types[start] is among them): others are
    # in ``types`` order, so a type can only repeat at the end of ``others``
    stack: list[tuple[int, tuple[str, ...], float, int]] = [(0, (), room, 0)]
    while stack:
        start, others, free, run = stack.pop()
        for i in range(start, len(types)):
            if mems[i] > free:
                break  # types are sorted by memory: no later one fits either
            count = run if i == start else 0
            if count >= caps[i]:
                continue
            grown = (*others, types[i])
            seen += 1
            if seen > budget:
                raise _Budget
            yield (k, *grown)
            stack.append((i, grown, free - mems[i], count + 1))


def _largest_set(types: list[str], left: Mapping[str, int], mem: Mapping[str, float], room: float) -> int:
    """Most co-runners that fit in ``room`` MiB (the smallest first: exact for a count)."""
    n = 0
    for t in types:
        for _ in range(left.get(t, 0)):
            if mem[t] > room:
                return n
            room -= mem[t]
            n += 1
    return n
