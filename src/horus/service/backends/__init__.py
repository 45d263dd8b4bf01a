"""Execution backends of ``horus serve``: who runs the jobs the scheduler places. One module each.

A backend registers machines with the ``LiveScheduler`` (as agents) and makes their processes match
the desired state it returns; the scheduler core and the policies never know which backend runs.
``local`` (default) is an in-process agent for this machine's GPUs; remote machines join any
backend with ``horus agent``.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Protocol

from horus.registry import Registry

if TYPE_CHECKING:
    from horus.service.scheduler import LiveScheduler
    from horus.service.server import ServeConfig


class Backend(Protocol):
    def prepare(self, config: ServeConfig) -> None:
        """Check that the backend can run (raise HorusInputError with one line if not); write nothing."""

    def start(self, scheduler: LiveScheduler, config: ServeConfig, stop: threading.Event) -> None:
        """Start registering machines and running jobs (in threads); return at once."""

    def close(self) -> None:
        """Release what ``start`` took (the jobs themselves keep running, to be adopted after a restart)."""


BACKENDS: Registry[Backend] = Registry("backend")
