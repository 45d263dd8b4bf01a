"""Composed policies (queue order x placement) registered by name, and ``make_composed`` for any pair.

``make_composed("sjf", "horus", placement_args={"util_cap": 1.1})`` builds any combination of
``ORDERS`` x ``PLACEMENTS`` (names: ``ORDERS.names()``, ``PLACEMENTS.names()``). Only meaningful
combinations are registered in ``POLICIES`` because the CLI runs every registered policy.
"""

from __future__ import annotations

from typing import Any

from horus.plugins import load_all
from horus.policies.ordered import ORDERS, PLACEMENTS, OrderedPolicy
from horus.policies.base import POLICIES, Policy


def make_composed(order: str, placement: str, *, backfill: bool = True, max_scan: int = 64,
                  placement_args: dict[str, Any] | None = None, name: str | None = None) -> OrderedPolicy:
    """Build ``order`` x ``placement`` from the registries (loading all policy modules first)."""
    load_all("horus.policies")
    return OrderedPolicy(ORDERS.create(order), PLACEMENTS.create(placement, **(placement_args or {})),
                         backfill=backfill, max_scan=max_scan, name=name)


@POLICIES.register("fifo-exclusive")
def fifo_exclusive(**kwargs: Any) -> Policy:
    """YARN-CS-like baseline: FIFO with backfill, one job per GPU, consolidated."""
    return make_composed("fifo", "exclusive", name="fifo-exclusive", **kwargs)


@POLICIES.register("sjf-exclusive")
def sjf_exclusive(**kwargs: Any) -> Policy:
    """Shortest predicted job first, one job per GPU."""
    return make_composed("sjf", "exclusive", name="sjf-exclusive", **kwargs)


@POLICIES.register("gandiva-greedy")
def gandiva_greedy(**kwargs: Any) -> Policy:
    """The strawman packing baseline kept for reference: FIFO, memory-fit packing with no per-GPU cap, no
    memory margin, gangs packed, never unpacked (the faithful Gandiva is ``gandiva``)."""
    return make_composed("fifo", "gandiva", name="gandiva-greedy", **kwargs)


@POLICIES.register("sjf-horus")
def sjf_horus(**kwargs: Any) -> Policy:
    """Shortest predicted job first with Horus's interference-aware placement (co-locates under the cap)."""
    return make_composed("sjf", "horus", name="sjf-horus", **kwargs)
