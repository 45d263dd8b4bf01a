"""``make_composed`` builds a policy from a queue order and a placement, registered by name.

``make_composed("sjf", "horus", placement_args={"util_cap": 1.1})`` builds any combination of
``ORDERS`` x ``PLACEMENTS`` (names: ``ORDERS.names()``, ``PLACEMENTS.names()``). Only meaningful
combinations are registered in ``POLICIES`` (one module each: ``fifo_exclusive``, ``sjf_exclusive``,
``sjf_horus``, ``gandiva_greedy``), because the CLI runs every registered policy.
"""

from __future__ import annotations

from typing import Any

from horus.plugins import load_all
from horus.policies.parts.ordered import ORDERS, PLACEMENTS, OrderedPolicy


def make_composed(order: str, placement: str, *, backfill: bool = True, max_scan: int = 64,
                  placement_args: dict[str, Any] | None = None, name: str | None = None) -> OrderedPolicy:
    """Build ``order`` x ``placement`` from the registries (loading all policy modules first)."""
    load_all("horus.policies")
    return OrderedPolicy(ORDERS.create(order), PLACEMENTS.create(placement, **(placement_args or {})),
                         backfill=backfill, max_scan=max_scan, name=name)
