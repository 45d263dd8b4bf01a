"""Model zoo: >= 30 training workloads buildable offline on CPU with random weights (needs torch).

``ZOO`` maps a model name to a :class:`ZooEntry`; architectures live in ``horus.zoo.models``, one
module per family, each registering its entries with :func:`horus.zoo.base.add` on import.
"""

from __future__ import annotations

from horus.plugins import load_all
from horus.zoo.base import FAMILIES, ZOO, ZooEntry
from horus.zoo.custom import load_model

load_all("horus.zoo.models")

__all__ = ["FAMILIES", "ZOO", "ZooEntry", "get_entry", "load_model"]


def get_entry(name: str) -> ZooEntry:
    """The zoo entry called ``name``; raises HorusInputError listing the known names."""
    from horus.errors import HorusInputError

    try:
        return ZOO[name]
    except KeyError:
        raise HorusInputError("model", f"unknown zoo model {name!r}; known: {', '.join(sorted(ZOO))}") from None
