"""Exclusive (YARN-CS-style) placement: one whole-GPU job per GPU, consolidated on few nodes."""

from __future__ import annotations

import numpy as np

from horus.policies.parts.ordered import EPS, PLACEMENTS, Placement, needs_empty_gpu
from horus.state import GPULoad, QueuedJob, SchedulerState, gpu_share


@PLACEMENTS.register("exclusive")
class ExclusivePlacement(Placement):
    """Whole-GPU jobs only on idle GPUs; fractional jobs (``gpu_fraction``) share only with other
    fractional jobs while their shares sum to <= 1 (a whole-GPU job holds share 1.0, so the share
    test alone keeps them apart).

    Choice: fewest nodes, then best fit -- the node with the fewest idle GPUs that still fits, which
    keeps whole nodes free for large jobs. Fractional jobs go where the leftover share is smallest.
    """

    name = "exclusive"
    colocates = False  # only fractional jobs share, and only with each other

    def update(self, load: GPULoad, state: SchedulerState) -> None:
        self.idle = load.alloc_share <= EPS
        self.n_idle = int(np.count_nonzero(self.idle))
        self.max_free_share = float(1.0 - np.minimum.reduce(load.alloc_share)) if len(load.alloc_share) else 0.0
        self._node_idle: np.ndarray | None = None  # from ``idle`` when first read: most calls score no job
        self._gpu_node_idle: np.ndarray | None = None

    @property
    def node_idle(self) -> np.ndarray:
        """Idle GPUs per node (as of the last ``update``)."""
        if self._node_idle is None:
            self._node_idle = np.bincount(self.idx.node_of_gpu, weights=self.idle, minlength=self.idx.num_nodes)
        return self._node_idle

    def _idle_on_node_of_gpu(self) -> np.ndarray:
        """``node_idle`` per GPU (of its node), kept until the next ``update``."""
        if self._gpu_node_idle is None:
            self._gpu_node_idle = self.node_idle[self.idx.node_of_gpu]
        return self._gpu_node_idle

    def any_room(self) -> bool:
        return self.max_free_share > EPS

    def possible_rows(self, r: np.ndarray, load: GPULoad, state: SchedulerState) -> np.ndarray:
        """The two summary tests of ``cost_per_gpu`` for all ``jobs`` at once."""
        k, share, empty = r[:, 0], r[:, 3], r[:, 4] > 0
        need_idle = (share >= 1.0 - EPS) | empty
        return ~((need_idle & (k > self.n_idle)) | (share > self.max_free_share + EPS))

    def cost_per_gpu(self, job: QueuedJob, load: GPULoad, state: SchedulerState) -> np.ndarray | None:
        spec = job.spec
        share = gpu_share(spec)
        whole = share >= 1.0 - EPS
        if (whole or needs_empty_gpu(job)) and spec.num_gpus > self.n_idle:
            return None
        if share > self.max_free_share + EPS:
            return None
        after = load.alloc_share + share
        feasible = self.idle if needs_empty_gpu(job) else after <= 1.0 + EPS
        allowed = self.idx.allowed(spec)
        if allowed is not None:
            feasible = feasible & allowed
        node_idle = self._idle_on_node_of_gpu()
        cost = node_idle if whole else (1.0 - after) + 1e-3 * node_idle
        return np.where(feasible, cost, np.inf)
