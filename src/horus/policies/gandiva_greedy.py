"""Policy ``gandiva-greedy``: the strawman packing baseline (FIFO x the ``gandiva`` placement), kept for reference."""

from __future__ import annotations

from typing import Any

from horus.policies.base import POLICIES, Policy
from horus.policies.parts.compose import make_composed


@POLICIES.register("gandiva-greedy")
def gandiva_greedy(**kwargs: Any) -> Policy:
    """The strawman packing baseline kept for reference: FIFO, memory-fit packing with no per-GPU cap, no
    memory margin, gangs packed, never unpacked (the faithful Gandiva is ``gandiva``)."""
    return make_composed("fifo", "gandiva", name="gandiva-greedy", **kwargs)
