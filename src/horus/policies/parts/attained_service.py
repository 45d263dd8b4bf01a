"""Expected remaining run time from attained service alone: for policies that read no job sizes.

``ServiceHistory`` records the run time of every job it sees complete (a job that left ``state.running``
without re-entering the queue: attained GPU-seconds / GPUs at the first call after it left, so the time it
held its GPUs, co-location slowdowns and restart stalls included). A job that has run ``t`` seconds is
expected to need the mean residual ``E[D - t | D > t]`` over the recorded run times ``D`` (the
distribution-based expectation of Tiresias' Gittins-index variant). With fewer than ``min_tail`` recorded
runs longer than ``t`` it falls back to ``max(t, prior_s)``: at least as long again as it has run (heavy
tails), and ``prior_s`` before anything is known. Early on, only short jobs have completed, so the
expectation starts low (survivorship); the fallback covers the ages no completed job reached.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from horus.state import RunningJob, SchedulerState


class ServiceHistory:
    """Run times of completed jobs and the expected remaining time of a job from its attained service."""

    def __init__(self, prior_s: float = 3600.0, min_tail: int = 5, max_samples: int = 4096) -> None:
        if prior_s <= 0 or min_tail < 1 or max_samples < 1:
            raise ValueError("prior_s must be > 0, min_tail and max_samples >= 1")
        self.prior_s, self.min_tail = prior_s, min_tail
        self._samples: deque[float] = deque(maxlen=max_samples)
        self._state: SchedulerState | None = None
        self._version = -1
        self._running: dict[str, RunningJob] = {}
        self._sorted = np.zeros(0)
        self._suffix = np.zeros(1)  # suffix sums of ``_sorted`` (one extra zero)
        self._dirty = False

    def __len__(self) -> int:
        return len(self._samples)

    def observe(self, state: SchedulerState) -> None:
        """Record the jobs that completed since the last call (O(running jobs) when the state changed)."""
        if state is self._state and state.version == self._version:
            return
        if state is self._state:
            for jid, run in self._running.items():
                if jid not in state.running and jid not in state.queue:
                    self._samples.append(run.attained(state.now) / max(len(run.gpus), 1))
                    self._dirty = True
        self._state, self._version = state, state.version
        self._running = dict(state.running)

    def remaining_s(self, attained_gpu_s: float, num_gpus: int) -> float:
        """Expected seconds still to run for a job of ``num_gpus`` GPUs with this attained service."""
        t = attained_gpu_s / max(num_gpus, 1)
        if self._dirty:
            self._sorted = np.sort(np.fromiter(self._samples, dtype=float))
            self._suffix = np.concatenate([np.cumsum(self._sorted[::-1])[::-1], [0.0]])
            self._dirty = False
        i = int(np.searchsorted(self._sorted, t, side="right"))
        longer = len(self._sorted) - i
        if longer < self.min_tail:
            return max(t, self.prior_s)
        return float(self._suffix[i]) / longer - t
