"""Policy ``sjf-horus``: shortest predicted job first x the paper's ``horus`` placement."""

from __future__ import annotations

from typing import Any

from horus.policies.base import POLICIES, Policy
from horus.policies.parts.compose import make_composed


@POLICIES.register("sjf-horus")
def sjf_horus(**kwargs: Any) -> Policy:
    """Shortest predicted job first with Horus's interference-aware placement (co-locates under the cap)."""
    return make_composed("sjf", "horus", name="sjf-horus", **kwargs)
