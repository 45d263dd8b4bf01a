"""Policy ``fifo-exclusive``: the YARN-CS-like baseline (FIFO with backfill x the ``exclusive`` placement)."""

from __future__ import annotations

from typing import Any

from horus.policies.base import POLICIES, Policy
from horus.policies.parts.compose import make_composed


@POLICIES.register("fifo-exclusive")
def fifo_exclusive(**kwargs: Any) -> Policy:
    """YARN-CS-like baseline: FIFO with backfill, one job per GPU, consolidated."""
    return make_composed("fifo", "exclusive", name="fifo-exclusive", **kwargs)
