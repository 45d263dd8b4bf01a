"""Which GPUs' residents came or went since a policy last looked (``SchedulerState.gpu_changes``)."""

from __future__ import annotations

import numpy as np

from horus.state import SchedulerState


class GpuChanges:
    """Remembers ``state.gpu_changes`` at each look; ``since_last`` answers with the GPUs that changed since."""

    def __init__(self) -> None:
        self._state: SchedulerState | None = None
        self._changes: np.ndarray | None = None

    def since_last(self, state: SchedulerState) -> list[int] | None:
        """GPUs whose residents came or went since the last call, or None when ``state`` is new to this watcher
        (another state object, or the first look): then every GPU is to be read."""
        changes, known = state.gpu_changes, self._changes
        fresh = state is not self._state or known is None or len(known) != len(changes)
        self._state, self._changes = state, changes.copy()
        return None if fresh else np.flatnonzero(changes != known).tolist()
