"""Cap on the aggregate throughput of unmeasured sets of 3+ jobs on one GPU (docs/truth.md).

Truths that replay measured pairs predict larger sets with a curve fitted on pairs, which puts no
bound on the summed normalized throughput ``sum x``: nothing was measured there. The cap keeps such a
set no more productive than its best measured pair: ``sum x <= B(S)`` with

* ``B(S)`` = the largest measured ``x_a + x_b`` among the set's own pairs (``(a, a)`` counts when a type
  appears twice);
* if none of them was measured, the largest measured pair sum of a pair with one of the set's types;
* if none, the largest measured pair sum on that GPU.

A set above the cap has every member scaled by ``B(S) / sum x`` (their ratios are kept). Pairs and
measured sets are never changed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

CAP_RULE = ("sets of 3+ jobs that were not measured: sum of normalized throughputs capped at the largest measured "
            "pair sum among the set's pairs (else among pairs with one of its types, else all measured pairs), "
            "members scaled proportionally")


class PairSumCap:
    """Measured pair sums of one GPU type and the cap they give a larger set."""

    def __init__(self, pair_sums: Mapping[tuple[str, str], float]) -> None:
        self.pair_sums: dict[tuple[str, str], float] = {}
        for (a, b), total in pair_sums.items():
            key = (a, b) if a <= b else (b, a)
            self.pair_sums[key] = max(total, self.pair_sums.get(key, -math.inf))
        self.by_type: dict[str, float] = {}
        for (a, b), total in self.pair_sums.items():
            for t in (a, b):
                self.by_type[t] = max(total, self.by_type.get(t, -math.inf))
        self.overall = max(self.pair_sums.values(), default=None)

    def bound(self, job_types: Sequence[str]) -> float | None:
        """``B(S)`` for the set ``job_types``; None when no pair was measured at all."""
        ordered = sorted(job_types)
        own = {(ordered[i], ordered[j]) for i in range(len(ordered)) for j in range(i + 1, len(ordered))}
        measured = [self.pair_sums[p] for p in own if p in self.pair_sums]
        if measured:
            return max(measured)
        members = [self.by_type[t] for t in set(ordered) if t in self.by_type]
        if members:
            return max(members)
        return self.overall

    def apply(self, job_types: Sequence[str], values: Sequence[float]) -> list[float]:
        """``values`` (one per job of ``job_types``) scaled down to the cap when a set of 3+ exceeds it."""
        values = list(values)
        if len(job_types) < 3:
            return values
        cap = self.bound(job_types)
        total = math.fsum(values)
        if cap is None or total <= cap:
            return values
        return [v * cap / total for v in values]

    def describe(self) -> dict[str, object]:
        return {"rule": CAP_RULE, "measured_pairs": len(self.pair_sums),
                "largest_pair_sum": self.overall}
