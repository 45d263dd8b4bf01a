"""Policy ``sjf-exclusive``: shortest predicted job first x the ``exclusive`` placement."""

from __future__ import annotations

from typing import Any

from horus.policies.base import POLICIES, Policy
from horus.policies.parts.compose import make_composed


@POLICIES.register("sjf-exclusive")
def sjf_exclusive(**kwargs: Any) -> Policy:
    """Shortest predicted job first, one job per GPU."""
    return make_composed("sjf", "exclusive", name="sjf-exclusive", **kwargs)
