"""How many GPUs could take each job of a look-ahead window, carried across policy calls.

``HorusPlacement.possible_rows`` admits a job when at least k GPUs are idle or open with the memory and
utilization headroom its row asks for. A GPU's answer reads only that GPU's load, so the per-job counts of one
call are brought to the next by re-asking only the GPUs whose load differs (``FitCounts.admitted``): a call whose
window jobs are all refused starts none of them, without building the window.
"""

from __future__ import annotations

from operator import is_

import numpy as np

from horus.state import GPULoad, QueuedJob

FULL_ABOVE = 64  # more changed GPUs than this: the counts are taken afresh over every GPU


class FitCounts:
    """Per window job: the GPUs ``possible_rows`` counts for it (idle, or open with its headroom), on the load last
    looked at; the jobs, their rows and that load are kept with the counts."""

    def __init__(self, util_cap: float, mem_margin: float, max_residents: int) -> None:
        self.util_cap, self.mem_margin, self.max_residents = util_cap, mem_margin, max_residents
        self._jobs: list[QueuedJob] = []
        self._rows = np.zeros((0, 5))
        self._counts = np.zeros(0, dtype=np.int64)
        self._util: np.ndarray | None = None  # the load the counts are of (copies)
        self._mem = np.zeros(0)
        self._res = np.zeros(0)
        self._capacity: np.ndarray | None = None  # the cards' memory the counts read (by identity)
        self._limit = np.zeros(0)  # (1 - mem_margin) * capacity, as ``HorusPlacement`` computes it

    def room(self, load: GPULoad, capacity: np.ndarray) -> bool:
        """``HorusPlacement.any_room`` on ``load``: some GPU idle, or open with free memory."""
        res = load.n_residents
        if np.any(res == 0):
            return True
        free = self._limit_of(capacity) - load.pred_mem_mib
        return bool(np.any((res < self.max_residents) & (free > 0.0)))

    def _limit_of(self, capacity: np.ndarray) -> np.ndarray:
        if capacity is not self._capacity:
            self._capacity, self._util = capacity, None  # counts read the old cards: taken afresh
            self._limit = (1.0 - self.mem_margin) * capacity
        return self._limit

    def admitted(self, jobs: list[QueuedJob], rows: np.ndarray, load: GPULoad, capacity: np.ndarray) -> np.ndarray:
        """``possible_rows`` (its same float operations per GPU) of ``jobs`` (their ``requests`` rows given) on
        ``load``, GPUs' memory ``capacity``; the counts are kept for the next look."""
        limit = self._limit_of(capacity)
        util, mem, res = load.pred_util, load.pred_mem_mib, load.n_residents
        same = (self._util is not None and len(jobs) == len(self._jobs) and len(util) == len(self._util)
                and all(map(is_, jobs, self._jobs)) and (rows is self._rows or np.array_equal(rows, self._rows)))
        if same:
            assert self._util is not None
            changed = np.flatnonzero((util != self._util) | (mem != self._mem) | (res != self._res))
            if len(changed) > FULL_ABOVE:
                same = False
            elif len(changed) == 1:  # most looks: one GPU's load changed
                g = int(changed[0])
                lim = float(limit[g])
                self._counts = (self._counts + self._fits_one(rows, float(util[g]), float(mem[g]), int(res[g]), lim)
                                - self._fits_one(rows, float(self._util[g]), float(self._mem[g]), int(self._res[g]),
                                                 lim))
                self._util[g], self._mem[g], self._res[g] = util[g], mem[g], res[g]
            elif len(changed):
                old = self._fits(rows, self._util[changed], self._mem[changed], self._res[changed], limit[changed])
                new = self._fits(rows, util[changed], mem[changed], res[changed], limit[changed])
                self._counts = self._counts + new - old
                self._util[changed], self._mem[changed], self._res[changed] = util[changed], mem[changed], res[changed]
        if not same:
            self._jobs, self._rows = list(jobs), rows
            self._util, self._mem, self._res = util.copy(), mem.copy(), res.copy()
            self._counts = self._fits(rows, util, mem, res, limit)
        return self._counts >= rows[:, 0]

    def _fits_one(self, rows: np.ndarray, util: float, mem: float, res: int, limit: float) -> np.ndarray | int:
        """``_fits`` of one GPU (its load given as Python numbers: the same IEEE operations)."""
        if res == 0:
            return 1
        if res >= self.max_residents:
            return 0
        free = limit - mem
        return (rows[:, 4] <= 0) & (rows[:, 1] <= free) & (rows[:, 2] + util <= self.util_cap)

    def _fits(self, rows: np.ndarray, util: np.ndarray, mem: np.ndarray, res: np.ndarray,
              limit: np.ndarray) -> np.ndarray:
        """Per job of ``rows``: the GPUs of these loads that are idle or open with its memory and utilization
        headroom (an out-of-memory job: idle ones only)."""
        idle = res == 0
        counts = np.full(len(rows), np.count_nonzero(idle), dtype=np.int64)
        shared = (res < self.max_residents) & ~idle
        rest = np.flatnonzero(rows[:, 4] <= 0)  # jobs that may share
        if len(rest) and shared.any():
            r = rows[rest]
            free, used = (limit - mem)[shared], util[shared]
            # a GPU that fits no job's least memory and utilization fits none (as ``possible_rows`` screens them)
            keep = (free >= r[:, 1].min()) & (used + r[:, 2].min() <= self.util_cap)
            if keep.any():
                free, used = free[keep], used[keep]
                fits = (free[None, :] >= r[:, 1:2]) & (used[None, :] + r[:, 2:3] <= self.util_cap)
                counts[rest] += np.count_nonzero(fits, axis=1)
        return counts
