"""Job types resident on every GPU, tracked incrementally (used by the interference-aware policies)."""

from __future__ import annotations

import numpy as np

from horus.cluster import Cluster
from horus.interference.slowdown import SlowdownEstimator
from horus.policies.parts.cluster_index import ClusterIndex, cluster_index
from horus.state import SchedulerState


class ResidentTypes:
    """Job types resident on every GPU (interned tuples, in arrival order) and per-node co-runner sets.

    Kept in sync with a ``SchedulerState`` incrementally: ``sync`` re-reads only GPUs whose resident
    count or predicted memory differs from the snapshot taken after the last planned start (a
    backend changes residents only by finishing/requeueing jobs, which changes both, or by starting
    what the policy planned, which the snapshot already holds).
    """

    def __init__(self) -> None:
        self.sigs: list[tuple[str, ...]] = [()]
        self._sig_id: dict[tuple[str, ...], int] = {(): 0}
        self.sets: list[frozenset[str]] = [frozenset()]
        self.sorted_sets: list[tuple[str, ...]] = [()]  # each set's types, sorted
        self._set_id: dict[frozenset[str], int] = {frozenset(): 0}
        self._set_of_sigs: dict[frozenset[int], int] = {}  # the signatures of a node's GPUs -> its set id
        self._state: SchedulerState | None = None
        self._cluster: Cluster | None = None
        self._tables: dict[str, np.ndarray] = {}  # job type -> [loss, own] per (signature, GPU type)
        self._tables_for: SlowdownEstimator | None = None
        self._tables_types = 0

    def _intern(self, types: tuple[str, ...]) -> int:
        sid = self._sig_id.get(types)
        if sid is None:
            sid = self._sig_id[types] = len(self.sigs)
            self.sigs.append(types)
        return sid

    def _intern_set(self, types: frozenset[str]) -> int:
        sid = self._set_id.get(types)
        if sid is None:
            sid = self._set_id[types] = len(self.sets)
            self.sets.append(types)
            self.sorted_sets.append(tuple(sorted(types)))
        return sid

    def sync(self, state: SchedulerState) -> None:
        """Bring the per-GPU types in line with ``state`` (residents + nothing planned)."""
        cur = state.load
        if state is not self._state or state.cluster is not self._cluster:
            self._state, self._cluster = state, state.cluster
            self.idx = cluster_index(state.cluster)
            self.sig_of_gpu = np.zeros(state.cluster.num_gpus, dtype=np.int64)
            self.set_of_node = np.zeros(self.idx.num_nodes, dtype=np.int64)
            changed = np.flatnonzero(cur.n_residents)  # GPUs without residents keep signature 0, nodes set 0
        else:
            changed = np.flatnonzero((cur.n_residents != self._n) | (cur.pred_mem_mib != self._mem))
        running, residents, sig_id = state.running, state.residents, self._sig_id
        if len(changed) > len(running):  # many GPUs (a new state): per job, then the GPUs several jobs share
            self.sig_of_gpu[changed] = 0  # those left without residents; the others are set next
            self._sync_by_job(state)
            gpus = np.flatnonzero(cur.n_residents > 1).tolist()
        else:
            gpus = changed.tolist()
        keys = [tuple([running[j].spec.job_type for j in residents[g]]) for g in gpus]
        sids = []
        for key in keys:
            sid = sig_id.get(key)
            sids.append(self._intern(key) if sid is None else sid)
        self.sig_of_gpu[gpus] = sids
        self._n = cur.n_residents.copy()
        self._mem = cur.pred_mem_mib.copy()
        if len(changed):
            self._refresh_nodes(np.unique(self.idx.node_of_gpu[changed]))

    def _sync_by_job(self, state: SchedulerState) -> None:
        """Each running job's one-type signature on all its GPUs (right where it runs alone)."""
        single: dict[str, int] = {}
        gpus: list[int] = []
        sids: list[int] = []
        for run in state.running.values():
            job_type = run.spec.job_type
            sid = single.get(job_type)
            if sid is None:
                sid = single[job_type] = self._intern((job_type,))
            gpus.extend(run.gpus)
            sids.extend([sid] * len(run.gpus))
        self.sig_of_gpu[gpus] = sids

    def add(self, gpus: tuple[int, ...], job_type: str, mem_mib: float) -> None:
        """Record one planned worker of ``job_type`` on each of ``gpus`` (as ``GPULoad.add`` does)."""
        for g in gpus:
            self.sig_of_gpu[g] = self._intern((*self.sigs[self.sig_of_gpu[g]], job_type))
        idx = list(gpus)
        self._n[idx] += 1
        self._mem[idx] += mem_mib
        self._refresh_nodes(np.unique(self.idx.node_of_gpu[idx]))

    def _refresh_nodes(self, nodes: np.ndarray) -> None:
        # padding reads signature 0 (no types), so whole rows can be read at once
        rows = np.where(self.idx.node_pad[nodes], 0, self.sig_of_gpu[self.idx.node_gpus[nodes]]).tolist()
        sigs, by_sigs = self.sigs, self._set_of_sigs
        if len(by_sigs) > 1_000_000:  # bound memory
            by_sigs.clear()
        ids = []
        for row in rows:
            key = frozenset(row)  # signatures are interned for good: the same ones make the same set
            sid = by_sigs.get(key)
            if sid is None:
                sid = by_sigs[key] = self._intern_set(frozenset([t for s in key for t in sigs[s]]))
            ids.append(sid)
        self.set_of_node[nodes] = ids

    def added_losses(self, estimator: SlowdownEstimator, job_type: str, gpus: np.ndarray,
                     idx: ClusterIndex) -> tuple[np.ndarray, np.ndarray]:
        """(loss, own throughput) of ``job_type`` joining the residents of each of ``gpus``.

        Looked up in a per-job-type table indexed by (resident signature, GPU type); only entries
        never needed before call ``estimator.added_loss``.
        """
        n_types = len(idx.types)
        if self._tables_for is not estimator or self._tables_types != n_types:
            self._tables_for, self._tables_types, self._tables = estimator, n_types, {}
        keys = self.sig_of_gpu[gpus] * n_types + idx.type_of_gpu[gpus]
        return self._looked_up(estimator, job_type, keys, idx)

    def added_losses_rows(self, estimator: SlowdownEstimator, row_types: list[str], gpus: np.ndarray,
                          mask: np.ndarray, idx: ClusterIndex) -> tuple[np.ndarray, np.ndarray]:
        """``added_losses`` of ``row_types[i]`` joining the residents of ``gpus[i, j]`` wherever ``mask[i, j]`` (2-D
        arrays, one job type per row), in ``gpus[mask]`` order: the same table values, looked up per job type."""
        n_types = len(idx.types)
        if self._tables_for is not estimator or self._tables_types != n_types:
            self._tables_for, self._tables_types, self._tables = estimator, n_types, {}
        at = gpus[mask]
        keys = self.sig_of_gpu[at] * n_types + idx.type_of_gpu[at]
        distinct = list(dict.fromkeys(row_types))
        if len(distinct) == 1:
            return self._looked_up(estimator, distinct[0], keys, idx)
        number = {t: i for i, t in enumerate(distinct)}
        of_entry = np.array([number[t] for t in row_types])[np.nonzero(mask)[0]]
        lost, own = np.empty(len(keys)), np.empty(len(keys))
        for i, job_type in enumerate(distinct):
            here = of_entry == i
            lost[here], own[here] = self._looked_up(estimator, job_type, keys[here], idx)
        return lost, own

    def _looked_up(self, estimator: SlowdownEstimator, job_type: str, keys: np.ndarray,
                   idx: ClusterIndex) -> tuple[np.ndarray, np.ndarray]:
        """(loss, own throughput) of ``job_type`` at the (signature, GPU type) ``keys``, from its table (entries
        never needed before computed by ``estimator.added_loss``)."""
        n_types = len(idx.types)
        table = self._tables.get(job_type)
        size = len(self.sigs) * n_types
        if table is None or table.shape[1] < size:
            if sum(t.size for t in self._tables.values()) > 20_000_000:  # bound memory: start afresh
                self._tables = {}
                table = None
            grown = np.full((2, max(2 * size, 64)), np.nan)
            if table is not None:
                grown[:, :table.shape[1]] = table
            table = self._tables[job_type] = grown
        values = table[:, keys]
        missing = np.isnan(values[0])
        if missing.any():
            for key in np.unique(keys[missing]).tolist():
                sig, t = divmod(key, n_types)
                table[:, key] = estimator.added_loss(job_type, self.sigs[sig], idx.types[t])
            values = table[:, keys]
        return values[0], values[1]
