"""What a job joining each GPU meets there, as one small integer per GPU, kept across calls.

A GPU's *signature* is (GPU type id, its residents' job types in arrival order, its multi-GPU residents as
(position, job id), job types planned onto it in the current call). Two GPUs with one signature answer a joining job
alike, so a policy evaluates a join once per signature, not once per GPU. Signatures are interned (``sigs[i]``
is signature ``i``) and ``ids`` holds each GPU's, updated from ``SchedulerState.gpu_changes`` only for the GPUs
whose residents came or went since the last refresh; a new state object (the live service rebuilt it) or an
overgrown table starts afresh.
"""

from __future__ import annotations

import numpy as np

from horus.policies.parts.gpu_changes import GpuChanges
from horus.state import SchedulerState

MAX_SIGNATURES = 1 << 16  # gang ids make signatures unique per gang: start afresh past this many


class GpuSignatures:
    """Interned per-GPU signatures of one scheduler state (see the module docstring)."""

    def __init__(self) -> None:
        self.sigs: list[tuple] = []
        self._ids_of: dict[tuple, int] = {}
        self.with_type: dict[str, set[int]] = {}  # job type -> ids of the signatures naming it
        self.ids = np.zeros(0, dtype=np.int64)
        self._changes = GpuChanges()

    def intern(self, sig: tuple) -> int:
        found = self._ids_of.get(sig)
        if found is None:
            found = self._ids_of[sig] = len(self.sigs)
            self.sigs.append(sig)
            for t in {*sig[1], *sig[3]}:
                self.with_type.setdefault(t, set()).add(found)
        return found

    def refresh(self, state: SchedulerState, type_of_gpu: np.ndarray) -> list[int] | None:
        """Bring ``ids`` (every GPU's signature with nothing planned on it) up to ``state``; returns the GPUs whose
        residents changed since the last refresh, or None when the table started afresh (every id is new)."""
        n = len(state.gpu_changes)
        changed = self._changes.since_last(state)
        if changed is None or len(self.sigs) > MAX_SIGNATURES:
            self.sigs, self._ids_of, self.with_type = [], {}, {}
            self.ids = np.zeros(n, dtype=np.int64)
            changed = None
        running, residents, ids = state.running, state.residents, self.ids
        for g in range(n) if changed is None else changed:
            runs = [running[j] for j in residents[g]]
            gangs = tuple((i, r.spec.job_id) for i, r in enumerate(runs) if r.spec.num_gpus > 1)
            ids[g] = self.intern((int(type_of_gpu[g]), tuple(r.spec.job_type for r in runs), gangs, ()))
        return changed

    def with_planned(self, sig_id: int, planned: tuple[str, ...]) -> int:
        """The id of signature ``sig_id`` with ``planned`` job types started on the GPU in this call."""
        sig = self.sigs[sig_id]
        return self.intern((sig[0], sig[1], sig[2], planned))
