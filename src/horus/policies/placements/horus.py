"""Horus placement: interference-aware per-GPU cost from predicted utilization and memory."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from horus.policies.parts.cluster_index import job_predictions
from horus.policies.parts.fit_counts import FitCounts
from horus.policies.parts.ordered import PLACEMENTS, Placement, needs_empty_gpu
from horus.predict.base import Prediction
from horus.state import GPULoad, QueuedJob, SchedulerState

FULL_SCAN_NODES = 128  # up to this many nodes ``bounded_choice`` costs every node at once (no node bounds)
FEW_ROWS = 8  # ``possible_rows`` of up to this many rows first tries the summary alone, on Python floats
Adjust = Callable[[np.ndarray, np.ndarray], None]  # (costs of nodes' GPUs, those GPUs) -> raise costs in place


@dataclass(frozen=True)
class HorusWeights:
    """Cost = util*U + overload*max(0, U-1) + memory*M + corunners*(n_after-1) + node_fit*f_node.

    U: summed predicted utilization after placing (fractions); M: predicted memory after placing as a
    fraction of the card; n_after: residents after placing; f_node: fraction of the node's GPUs idle
    (a tie-break that keeps whole nodes free for multi-GPU jobs). With these defaults an idle GPU
    always beats a shared one, and among shared GPUs the least-utilized one wins; memory only breaks
    near-ties (it matters for feasibility, not for speed).
    """

    util: float = 1.0
    overload: float = 10.0
    memory: float = 0.25
    corunners: float = 0.2
    node_fit: float = 0.01


@PLACEMENTS.register("horus")
class HorusPlacement(Placement):
    """Best-scored GPU(s) by ``HorusWeights``; infeasible when predicted memory exceeds
    ``1 - mem_margin`` of the card, when a GPU already has ``max_residents`` workers, or when the
    predicted summed utilization would exceed ``util_cap``. An idle GPU always accepts a job (even one
    predicted too big for the card: the only alternative is waiting forever). A job that already
    failed out-of-memory is placed only on an empty GPU.
    """

    name = "horus"

    def __init__(self, *, util_cap: float = 1.0, mem_margin: float = 0.05, max_residents: int = 4,
                 weights: HorusWeights | dict[str, float] | None = None) -> None:
        self.util_cap = float(util_cap)
        self.mem_margin = float(mem_margin)
        self.max_residents = int(max_residents)
        self.weights = weights if isinstance(weights, HorusWeights) else HorusWeights(**(weights or {}))

    def describe(self) -> dict[str, object]:
        return {"util_cap": self.util_cap, "mem_margin": self.mem_margin, "max_residents": self.max_residents,
                "weights": asdict(self.weights)}

    # ---- the job's load (predicted here; the oracle substitutes truth) ------------------------
    def job_loads(self, job: QueuedJob, state: SchedulerState) -> list[Prediction]:
        return job_predictions(job.spec, state, self.idx)

    def update(self, load: GPULoad, state: SchedulerState) -> None:
        # Everything is derived lazily: many calls place one job and never need the summary.
        self._load = load
        self._state = state
        self._idle_ready = False
        self._summary_ready = False
        self._base_ready = False
        self._fast_gpu: tuple[int, int] | None = None
        # per (k, util, memory): node bounds, and how many entries of _changed_nodes they include
        self._bounds: dict[tuple[int, float, float], tuple[np.ndarray, int]] = {}
        self._changed_nodes: list[np.ndarray] = []  # nodes whose rows changed since the bounds began
        self._node_stamp: np.ndarray | None = None  # per node: 1 + the last entry of _changed_nodes naming it (0: none)
        self._rows_ready = False
        self._dirty: set[int] = set()  # nodes whose base costs and rows ``update_added`` left to ``_flush_nodes``
        self._kept_costs: dict[tuple[object, ...], tuple[np.ndarray, int, np.ndarray]] = {}  # ``cost_per_gpu_kept``
        self._gen = 0  # update_added calls since ``update``
        self._gen_nodes: np.ndarray | None = None  # per node: the last of them that changed it

    def update_added(self, load: GPULoad, state: SchedulerState, gpus: Sequence[int]) -> None:
        """``update`` after one worker was added on each of ``gpus``: what is already derived is redone for those
        GPUs and their nodes only (the same float operations per element; the minimum and maximum of the summary
        rescanned only when a changed GPU held them), the rest stays lazy."""
        if state is not self._state or not self._idle_ready:
            self.update(load, state)
            return
        self._load = load
        self._fast_gpu = None
        idx = self.idx
        n_res, idle = load.n_residents, self.idle
        self._gen += 1
        if self._kept_costs:
            if self._gen_nodes is None:
                self._gen_nodes = np.zeros(len(idx.node_first), dtype=np.int64)
            self._gen_nodes[idx.node_of_gpu[list(gpus)]] = self._gen
        for g in gpus:
            idle[g] = n_res[g] == 0
        nodes = sorted({int(idx.node_of_gpu[g]) for g in gpus})
        spans = [(node, int(idx.node_first[node]), int(idx.node_first[node] + idx.node_size[node])) for node in nodes]
        for node, first, end in spans:
            count = int(np.count_nonzero(idle[first:end]))
            self.n_idle += count - int(self.node_idle[node])
            self.node_idle[node] = count
            self._idle_key[node] = count if count > 0 else np.inf
        if not self._summary_ready:
            return
        # The maximum and minimum are kept with how many GPUs hold them (None: not counted since the last scan,
        # counted when a holder first changes): rescanned only when the last holder changed (many idle GPUs share
        # the extreme values, so a start rarely takes the last one).
        for g in gpus:
            free = self.free_mib[g] = self.mem_limit_mib[g] - load.pred_mem_mib[g]
            is_open = self.open[g] = n_res[g] < self.max_residents
            open_free = free if is_open else -np.inf
            util_open = load.pred_util[g] if open_free > 0 else np.inf
            if self._open_free[g] == self.max_free_mib:
                if self._n_max_free is None:  # counted when first needed after a scan
                    self._n_max_free = int(np.count_nonzero(self._open_free == self.max_free_mib))
                self._n_max_free -= 1
            if self._util_open[g] == self.min_util_open:
                if self._n_min_util is None:
                    self._n_min_util = int(np.count_nonzero(self._util_open == self.min_util_open))
                self._n_min_util -= 1
            self._open_free[g], self._util_open[g] = open_free, util_open
            if open_free > self.max_free_mib:
                self.max_free_mib, self._n_max_free = float(open_free), 1
            elif open_free == self.max_free_mib and self._n_max_free is not None:
                self._n_max_free += 1
            if util_open < self.min_util_open:
                self.min_util_open, self._n_min_util = float(util_open), 1
            elif util_open == self.min_util_open and self._n_min_util is not None:
                self._n_min_util += 1
        if self._n_max_free is not None and self._n_max_free <= 0:  # the last holder changed: scan
            self.max_free_mib, self._n_max_free = float(self._open_free.max()), None
        if self._n_min_util is not None and self._n_min_util <= 0:
            self.min_util_open, self._n_min_util = float(self._util_open.min()), None
        if self._base_ready:
            self._dirty.update(nodes)  # base costs and node rows: brought up to date when read (``_flush_nodes``)

    def _flush_nodes(self) -> None:
        """The base costs (and node rows, where kept) of the nodes ``update_added`` changed since they were last read,
        redone from the current load and idle counts (the same float operations per element as ``_ensure_base_cost``
        and ``_node_rows``: a node's values depend only on its own GPUs, so redoing them once for several starts
        gives what redoing them after each would)."""
        if not self._dirty:
            return
        idx, w, load = self.idx, self.weights, self._load
        if len(self._dirty) == 1:  # one node (most starts): the same operations on a slice
            node = self._dirty.pop()
            first = int(idx.node_first[node])
            size = int(idx.node_size[node])
            at = slice(first, first + size)
            term = w.node_fit * self.node_idle[node] / idx.node_size[node]
            base = self.base_cost[at] = (w.util * load.pred_util[at]
                                         + (w.memory * load.pred_mem_mib[at]) * self.inv_cap[at]
                                         + w.corunners * load.n_residents[at] + term)
            if not self._rows_ready:
                self._bounds = {}
                return
            values = self._rows_values[at] = np.where(self.idle[at] | self.open[at], base, np.inf)
            self._rows[node, :size] = np.sort(values)  # padding stays inf
            self._changed_nodes.append(np.array([node], dtype=np.int64))
            if self._node_stamp is None:
                self._node_stamp = np.zeros(len(idx.node_first), dtype=np.int64)
            self._node_stamp[node] = len(self._changed_nodes)
            return
        nodes = np.fromiter(sorted(self._dirty), dtype=np.int64, count=len(self._dirty))
        self._dirty.clear()
        gpus, pad = idx.node_gpus[nodes], idx.node_pad[nodes]
        at = gpus[~pad]  # node by node, ascending
        term = np.repeat(w.node_fit * self.node_idle[nodes] / idx.node_size[nodes], idx.node_size[nodes])
        base = self.base_cost[at] = (w.util * load.pred_util[at] + (w.memory * load.pred_mem_mib[at]) * self.inv_cap[at]
                                     + w.corunners * load.n_residents[at] + term)
        if not self._rows_ready:
            self._bounds = {}
            return
        self._rows_values[at] = np.where(self.idle[at] | self.open[at], base, np.inf)
        self._rows[nodes] = np.sort(np.where(pad, np.inf, self._rows_values[gpus]), axis=1)
        self._changed_nodes.append(nodes)  # node bounds: brought up to date when read
        if self._node_stamp is None:
            self._node_stamp = np.zeros(len(idx.node_first), dtype=np.int64)
        self._node_stamp[nodes] = len(self._changed_nodes)

    def _ensure_idle(self) -> None:
        if not self._idle_ready:
            self.idle = self._load.n_residents == 0
            self.n_idle = int(np.count_nonzero(self.idle))
            self.node_idle = np.add.reduceat(self.idle, self.idx.node_first, dtype=np.int64)
            self._idle_key = np.where(self.node_idle > 0, self.node_idle, np.inf)  # the fast path's node: least
            self._idle_ready = True

    def evaluate(self, job: QueuedJob, load: GPULoad, state: SchedulerState) -> tuple[tuple[int, ...], float] | None:
        if not hasattr(self, "idx") or self.idx.cluster is not state.cluster:
            self.begin(load, state)
        spec = job.spec
        self._ensure_idle()
        if len(self.idx.types) == 1 and spec.gpu_type_request is None:
            if self.n_idle and spec.num_gpus == 1:
                return self._idle_fast_path(job, load, state)
            found = self.bounded_choice(job, load, state)
            if found is not None:
                return (found[0], found[1] / spec.num_gpus) if found else None
        return super().evaluate(job, load, state)

    def bounded_choice(self, job: QueuedJob, load: GPULoad, state: SchedulerState,
                       adjust: Adjust | None = None) -> tuple[tuple[int, ...], float] | tuple[()] | None:
        """``select_gpus(cost_per_gpu(job))`` -- GPUs and summed cost -- on one GPU type and card size where one
        node can take the job, costing few nodes exactly.

        With one card size a GPU's cost grows with its job-independent part (``base_cost``), so the k cheapest
        GPUs of a node that are idle or open (kept per node, sorted, re-sorted only where values changed), costed
        for the job and summed as ``select_gpus`` sums, bound the node's sum from below -- and equal it when those
        k GPUs can all take the job. Nodes are costed exactly (the same float operations as ``cost_per_gpu`` and
        ``select_gpus``) in (bound, node) order until no node left can beat or tie the best: the choice (lowest
        sum, ties: lowest node, then lowest GPU) is the one of costing every GPU. ``adjust(cost, gpus)`` may raise
        the cost of the feasible GPUs it is given (rows of nodes, in place; never lower: the bound must hold).
        Returns () when the job cannot be placed, None where this shortcut does not apply (negative weights, a
        job that needs an empty GPU, several card sizes, no node that fits: the general path decides)."""
        shape = self._bounded_shape(job, state)
        if not isinstance(shape, list):
            return shape
        k, u, m, inv_cap = shape
        w = self.weights
        overload = self.util_cap > 1.0 or u > 1.0
        if adjust is None and self.idx.num_nodes <= FULL_SCAN_NODES:
            return self._full_choice(load, k, u, m, overload)
        key = (k, u, m)
        bound = self._node_bound(key, inv_cap).copy()
        best, best_node, chunk = np.inf, -1, 1
        found: np.ndarray | None = None
        while True:
            node = int(np.argmin(bound))  # the lowest (bound, node) left
            first = float(bound[node])
            if not math.isfinite(first) or first > best or (first == best and node > best_node):
                break
            if chunk == 1 and adjust is None:  # one node: its GPUs as a slice (the same values as the rows below)
                total, padded_one = self._node_sum(load, node, k, u, m, overload)
                if total < best:
                    best, best_node, found = total, node, padded_one
                bound[node] = np.inf
                chunk = 16
                continue
            if chunk == 1:
                part = np.array([node])
            elif np.isfinite(best):
                part = np.flatnonzero(bound <= best)  # all that may still beat or tie the best
            else:
                part = np.argpartition(bound, chunk)[:chunk] if chunk < len(bound) else np.arange(len(bound))
                part = np.sort(part[np.isfinite(bound[part])])
            bound[part] = np.inf
            gpus = self.idx.node_gpus[part]
            cost, feasible = self._gpu_costs(load, gpus, u, m, overload)
            padded = np.where(self.idx.node_pad[part] | ~feasible, np.inf, cost)
            if adjust is not None:
                adjust(padded, gpus)
            ordered = np.sort(padded, axis=1)
            sums = np.where(np.isfinite(ordered).sum(axis=1) >= k, ordered[:, :k].sum(axis=1), np.inf)
            i = int(np.argmin(sums))  # the lowest node among this part's least sums (part is ascending)
            total, at = float(sums[i]), int(part[i])
            if total < best or (total == best and at < best_node):
                best, best_node, found = total, at, padded[i]
            chunk = 16 if chunk == 1 else 2 * chunk
        if found is None:
            return None  # no single node fits: the general path (spanning nodes) decides
        chosen = self.idx.node_gpus[best_node][np.argsort(found, kind="stable")[:k]]
        return tuple(chosen.tolist()), best

    def _full_choice(self, load: GPULoad, k: int, u: float, m: float,
                     overload: bool) -> tuple[tuple[int, ...], float] | None:
        """``bounded_choice`` on a small cluster: every node costed exactly as one array (the same float operations
        per element as its node search, which on a few nodes costs more in calls than it saves in work). The least
        sum (ties: the lowest node, then the lowest GPU); None where no single node fits. A one-GPU job on nodes
        numbered in order: the first least GPU (one ``argmin``; a node's sum of one is its least cost)."""
        self._ensure_base_cost()
        idx = self.idx
        gpus = idx.node_gpus
        if self._whole_rows():  # nodes' rows are the GPU arrays reshaped: the same values without gathering them
            cost, feasible = self._gpu_costs(load, slice(None), u, m, overload)
            flat = np.where(feasible, cost, np.inf)
            if k == 1:  # a node's sum is its least cost: the first least GPU (numbered node by node) is the choice
                g = int(np.argmin(flat))
                total = float(flat[g])
                if math.isfinite(total):
                    return (g,), total
                if total == np.inf:  # every GPU inf (argmin returns a NaN where there is one): none fits
                    return None
            padded = flat.reshape(gpus.shape)
        else:
            cost, feasible = self._gpu_costs(load, gpus, u, m, overload)
            padded = np.where(idx.node_pad | ~feasible, np.inf, cost)
        ordered = np.sort(padded, axis=1)
        sums = np.where(np.isfinite(ordered).sum(axis=1) >= k, ordered[:, :k].sum(axis=1), np.inf)
        node = int(np.argmin(sums))
        total = float(sums[node])
        if total == np.inf:
            return None
        chosen = gpus[node][np.argsort(padded[node], kind="stable")[:k]]
        return tuple(chosen.tolist()), total

    def _whole_rows(self) -> bool:
        """Whether every node has as many GPUs as the widest, numbered node by node (``node_gpus`` is the GPUs
        reshaped, no padding)."""
        idx = self.idx
        if getattr(self, "_whole_of", None) is not idx:
            self._whole_of = idx
            gpus = idx.node_gpus
            self._whole = bool(not idx.node_pad.any() and np.array_equal(gpus.ravel(), np.arange(gpus.size)))
        return self._whole

    def _bounded_shape(self, job: QueuedJob, state: SchedulerState) -> list | tuple[()] | None:
        """``bounded_choice``'s checks before costing nodes: [k, util, memory, inv_cap] of the job where it goes on
        to cost nodes, else its answer (None: the shortcut does not apply; (): the summary rules the job out)."""
        k, w = job.spec.num_gpus, self.weights
        if (needs_empty_gpu(job) or len(self.idx.types) != 1 or job.spec.gpu_type_request is not None
                or k > self.idx.node_gpus.shape[1]
                or min(w.util, w.memory, w.corunners, w.node_fit, w.overload) < 0.0):
            return None
        if not self._summary_ready:
            self._summarise()
        inv_cap = self._one_inv_cap()
        if inv_cap is None:
            return None
        loads = self.job_loads(job, state)
        u, m = float(loads[0].util), float(loads[0].mem_mib)
        if self.n_idle < k and (m > self.max_free_mib or u + self.min_util_open > self.util_cap):
            return ()  # as cost_per_gpu: the summary rules it out
        return [k, u, m, inv_cap]

    def bounded_many(self, jobs: Sequence[QueuedJob], load: GPULoad, state: SchedulerState,
                     adjust: Callable[[list[int], np.ndarray, np.ndarray], None] | None = None
                     ) -> list[tuple[tuple[int, ...], float] | tuple[()] | None | bool]:
        """``bounded_choice(job, adjust=...)`` of each of ``jobs`` where the first node costed settles its search,
        the jobs of one GPU count searched as one array (``_bounded_group``); False where it does not (the caller
        asks ``bounded_choice`` itself). ``adjust(rows, cost, gpus)``: the adjustment of ``bounded_choice`` for the
        jobs at ``rows`` (positions in ``jobs``), one per row of ``cost`` and ``gpus`` (in place, never lower)."""
        out: list[tuple[tuple[int, ...], float] | tuple[()] | None | bool] = [False] * len(jobs)
        groups: dict[int, list[tuple[int, float, float, float]]] = {}
        for i, job in enumerate(jobs):
            shape = self._bounded_shape(job, state)
            if not isinstance(shape, list):
                out[i] = shape
            else:
                groups.setdefault(shape[0], []).append((i, shape[1], shape[2], shape[3]))
        for k, group in groups.items():
            where = [g[0] for g in group]
            rows_adjust = None if adjust is None else (lambda cost, gpus, where=where: adjust(where, cost, gpus))
            for i, choice in zip(where, self._bounded_group(k, group, load, rows_adjust)):
                out[i] = False if choice is None else choice
        return out

    def _bounded_group(self, k: int, group: list[tuple[int, float, float, float]], load: GPULoad,
                       adjust: Adjust | None = None) -> list[tuple[tuple[int, ...], float] | None]:
        """``bounded_choice`` of jobs of k GPUs (index, util, memory, inv_cap each), as arrays; None for a job whose
        search the first node does not settle (its caller evaluates it alone). ``adjust(cost, gpus)``: rows of the
        jobs in order (``bounded_choice``'s adjustment of each job on its row).

        Each job's least node bound (``_node_bounds``, first lowest node) is costed exactly (the same float
        operations per element as ``bounded_choice``; numpy sums each row's k sorted costs as it sums one node's) and
        the next lowest bound checked: where no other node can beat or tie it, that is ``bounded_choice``'s answer."""
        w, idx = self.weights, self.idx
        bound = self._node_bounds(k, [g[1] for g in group], [g[2] for g in group], group[0][3])
        n = len(group)
        at = np.arange(n)
        u = np.array([g[1] for g in group])[:, None]
        m = np.array([g[2] for g in group])[:, None]
        nodes = np.argmin(bound, axis=1)
        first = bound[at, nodes]
        gpus = idx.node_gpus[nodes]
        cost = self.base_cost[gpus] + w.util * u + (w.memory * m) * self.inv_cap[gpus]
        util_after = load.pred_util[gpus] + u
        overload = (u > 1.0)[:, 0] if self.util_cap <= 1.0 else np.ones(n, dtype=bool)
        if overload.any():
            cost = np.where(overload[:, None], cost + w.overload * np.maximum(util_after - 1.0, 0.0), cost)
        feasible = (self.free_mib[gpus] >= m) & self.open[gpus] & (util_after <= self.util_cap)
        feasible |= self.idle[gpus]
        padded = np.where(feasible & ~idx.node_pad[nodes], cost, np.inf)
        if adjust is not None:
            adjust(padded, gpus)
        ordered = np.sort(padded, axis=1)
        total = np.where(np.isfinite(ordered).sum(axis=1) >= k, ordered[:, :k].sum(axis=1), np.inf)
        bound[at, nodes] = np.inf
        second = np.argmin(bound, axis=1)
        after = bound[at, second]
        settled = (np.isfinite(first) & np.isfinite(total)
                   & (~np.isfinite(after) | (after > total) | ((after == total) & (second > nodes))))
        # each row's k GPUs as bounded_choice picks them (a stable argsort of its costs, row by row)
        chosen = np.take_along_axis(gpus, np.argsort(padded, axis=1, kind="stable")[:, :k], axis=1).tolist()
        return [(tuple(chosen[j]), t) if ok else None
                for j, (ok, t) in enumerate(zip(settled.tolist(), total.tolist()))]

    def _gpu_costs(self, load: GPULoad, at: np.ndarray | slice, u: float, m: float,
                   overload: bool) -> tuple[np.ndarray, np.ndarray]:
        """(cost, feasible) of placing a worker of predicted utilization ``u`` and memory ``m`` on the GPUs ``at``
        (an index array of any shape, or a slice): base cost + utilization and memory terms (+ the overload
        penalty); feasible where memory, openness and the utilization cap allow it, or the GPU is idle."""
        w = self.weights
        cost = self.base_cost[at] + w.util * u + (w.memory * m) * self.inv_cap[at]
        util_after = load.pred_util[at] + u
        if overload:
            cost = cost + w.overload * np.maximum(util_after - 1.0, 0.0)
        feasible = (self.free_mib[at] >= m) & self.open[at] & (util_after <= self.util_cap)
        feasible |= self.idle[at]
        return cost, feasible

    def _node_sum(self, load: GPULoad, node: int, k: int, u: float, m: float, overload: bool) -> tuple[float, np.ndarray]:
        """``bounded_choice``'s exact least sum of k GPU costs on one node (inf: fewer than k can take the job) and
        the node's GPU costs (inf: infeasible), computed on a slice of the node's GPUs."""
        first = int(self.idx.node_first[node])
        cost, feasible = self._gpu_costs(load, slice(first, first + int(self.idx.node_size[node])), u, m, overload)
        padded = np.where(feasible, cost, np.inf)
        if np.count_nonzero(np.isfinite(padded)) < k:
            return np.inf, padded
        return float(np.sort(padded)[:k].sum()), padded

    def _node_bound(self, key: tuple[int, float, float], inv_cap: float) -> np.ndarray:
        """Per node, the lower bound of a (k GPUs, util, memory) job's summed cost (inf: fewer than k GPUs can take
        it): kept per job shape and updated on the nodes whose rows changed since (read-only)."""
        k, u, m = key
        w = self.weights
        rows = self._node_rows()
        changed = self._changed_nodes
        kept = self._bounds.get(key)
        if kept is None:  # the same for every job of that shape until the load changes
            bound = (rows + w.util * u + (w.memory * m) * inv_cap)[:, :k].sum(axis=1)
        elif kept[1] == len(changed):
            return kept[0]
        else:
            bound = kept[0]
            # the nodes changed since (ascending, once each): those whose last change came after ``kept``
            nodes = changed[kept[1]] if kept[1] + 1 == len(changed) else np.flatnonzero(self._node_stamp > kept[1])
            bound[nodes] = (rows[nodes] + w.util * u + (w.memory * m) * inv_cap)[:, :k].sum(axis=1)
        self._bounds[key] = (bound, len(changed))
        return bound

    def _node_bounds(self, k: int, us: list[float], ms: list[float], inv_cap: float) -> np.ndarray:
        """``_node_bound`` of the shapes (k, us[i], ms[i]) as the rows of one new array; the kept bounds behind are
        brought up to date together (the same float operations per element as one by one)."""
        w = self.weights
        rows = self._node_rows()
        changed = self._changed_nodes
        now = len(changed)
        keys = [(k, u, m) for u, m in zip(us, ms)]
        kept = [self._bounds.get(key) for key in keys]
        behind = [i for i, entry in enumerate(kept) if entry is not None and entry[1] != now]
        if behind:
            since = min(kept[i][1] for i in behind)  # type: ignore[index]
            nodes = changed[since] if since + 1 == now else np.flatnonzero(self._node_stamp > since)
            u = np.array([us[i] for i in behind])[:, None, None]
            m = np.array([ms[i] for i in behind])[:, None, None]
            values = (rows[nodes][None, :, :] + w.util * u + (w.memory * m) * inv_cap)[:, :, :k].sum(axis=2)
            for j, i in enumerate(behind):
                bound = kept[i][0]  # type: ignore[index]
                bound[nodes] = values[j]  # a node changed before this bound's last update: the same value again
                self._bounds[keys[i]] = (bound, now)
        return np.stack([self._node_bound(key, inv_cap) for key in keys])

    def _one_inv_cap(self) -> float | None:
        """``inv_cap`` when every GPU has the same card size, else None."""
        if getattr(self, "_inv_cap_of", None) is not self.inv_cap:
            self._inv_cap_of = self.inv_cap
            same = len(self.inv_cap) > 0 and bool(np.all(self.inv_cap == self.inv_cap[0]))
            self._inv_cap_one = float(self.inv_cap[0]) if same else None
        return self._inv_cap_one

    def _node_rows(self) -> np.ndarray:
        """Per node: the ascending ``base_cost`` of its GPUs that are idle or open (inf past them); rows are
        re-sorted only for nodes whose values changed."""
        if self._rows_ready:
            self._flush_nodes()
            return self._rows
        self._ensure_base_cost()
        values = np.where(self.idle | self.open, self.base_cost, np.inf)
        idx = self.idx
        if getattr(self, "_rows_idx", None) is not idx:
            self._rows_idx = idx
            self._rows_values = np.full(len(values), np.nan)  # NaN differs from everything: all rows
            self._rows = np.full(idx.node_gpus.shape, np.inf)
        changed = np.flatnonzero(values != self._rows_values)
        if len(changed):
            nodes = np.unique(idx.node_of_gpu[changed])
            block = np.sort(np.where(idx.node_pad[nodes], np.inf, values[idx.node_gpus[nodes]]), axis=1)
            self._rows[nodes] = block
            self._rows_values = values
        self._rows_ready = True
        return self._rows

    def _idle_fast_path(self, job: QueuedJob, load: GPULoad, state: SchedulerState) -> tuple[tuple[int, ...], float]:
        """Single-GPU job, one GPU type, some GPU idle: the general cost's winner is an idle GPU (the
        co-runner term, 0.2 by default, exceeds the node tie-break, at most ``node_fit``), namely the
        first idle GPU of the node with the fewest idle GPUs. Same result, O(nodes) instead of O(GPUs)."""
        w = self.weights
        if w.corunners <= w.node_fit:  # the shortcut's premise does not hold for these weights
            return super().evaluate(job, load, state)  # type: ignore[return-value]
        if self._fast_gpu is None:  # the same GPU for every job until the load changes
            self._fast_gpu = self._first_idle_gpu()
        g, node = self._fast_gpu
        pred = self.job_loads(job, state)[0]
        util_after = load.pred_util[g] + pred.util
        cost = (w.util * util_after + w.overload * max(util_after - 1.0, 0.0)
                + w.memory * (load.pred_mem_mib[g] + pred.mem_mib) / state.mem_capacity_mib[g]
                + w.node_fit * self.node_idle[node] / self.idx.node_size[node])
        return (g,), float(cost)

    def _first_idle_gpu(self) -> tuple[int, int]:
        """The first idle GPU of the node with the fewest idle GPUs (ties: the lowest node), and that node."""
        node = int(np.argmin(self._idle_key))
        first = int(self.idx.node_first[node])
        return first + int(np.argmax(self.idle[first:first + int(self.idx.node_size[node])])), node

    def idle_fast_choices(self, jobs: list[QueuedJob], ok: list[bool], load: GPULoad, state: SchedulerState,
                          rows: np.ndarray | None = None) -> dict[int, tuple[tuple[int, ...], float]]:
        """``evaluate`` of the jobs ``ok`` admits that take the idle fast path, all at once (position -> choice);
        the others are left out (evaluate them one by one). Same values: the same float operations, per job.
        ``rows``: the jobs' ``requests`` rows, where the caller has them."""
        if not self.idle_fast_applies(load, state):
            return {}
        at = [i for i, job in enumerate(jobs) if ok[i] and job.spec.num_gpus == 1 and job.spec.gpu_type_request is None]
        if not at:
            return {}
        rows = (self.requests(jobs, state) if rows is None else rows)[at]  # one GPU type: the least over types
        g, cost = self.idle_fast_costs(rows, load, state)
        return {i: ((g,), c) for i, c in zip(at, cost.tolist())}

    def idle_fast_applies(self, load: GPULoad, state: SchedulerState) -> bool:
        """Whether a one-GPU job without a GPU-type request takes the idle fast path on ``load`` now."""
        if not hasattr(self, "idx") or self.idx.cluster is not state.cluster:
            self.begin(load, state)
        self._ensure_idle()
        w = self.weights
        return bool(self.n_idle) and len(self.idx.types) == 1 and w.corunners > w.node_fit

    def fast_gpu(self) -> tuple[int, int]:
        """The idle fast path's GPU and its node (where ``idle_fast_applies``)."""
        if self._fast_gpu is None:  # the same GPU for every job until the load changes
            self._fast_gpu = self._first_idle_gpu()
        return self._fast_gpu

    def idle_fast_costs(self, rows: np.ndarray, load: GPULoad, state: SchedulerState) -> tuple[int, np.ndarray]:
        """The idle fast path's GPU and its cost for jobs with these ``requests`` rows (where
        ``idle_fast_applies``; one-GPU jobs without a GPU-type request). The cost reads of the GPU only its predicted
        utilization, memory and capacity and its node's idle count and size."""
        w = self.weights
        g, node = self.fast_gpu()
        if len(rows) == 1:  # the same operations on Python floats (IEEE doubles: the same value), without arrays
            after = float(load.pred_util[g]) + float(rows[0, 2])
            one = (w.util * after + w.overload * max(after - 1.0, 0.0)
                   + w.memory * (float(load.pred_mem_mib[g]) + float(rows[0, 1])) / float(state.mem_capacity_mib[g])
                   + w.node_fit * float(self.node_idle[node]) / float(self.idx.node_size[node]))
            return g, np.array([one])
        util_after = load.pred_util[g] + rows[:, 2]
        cost = (w.util * util_after + w.overload * np.maximum(util_after - 1.0, 0.0)
                + w.memory * (load.pred_mem_mib[g] + rows[:, 1]) / state.mem_capacity_mib[g]
                + w.node_fit * self.node_idle[node] / self.idx.node_size[node])
        return g, cost

    def _summarise(self) -> None:
        self._ensure_idle()
        load, state = self._load, self._state
        if getattr(self, "_cap_source", None) is not state.mem_capacity_mib:
            self._cap_source = state.mem_capacity_mib
            self.mem_limit_mib = (1.0 - self.mem_margin) * state.mem_capacity_mib
            self.inv_cap = 1.0 / state.mem_capacity_mib
        self.free_mib = self.mem_limit_mib - load.pred_mem_mib
        self.open = load.n_residents < self.max_residents
        open_free = self._open_free = np.where(self.open, self.free_mib, -np.inf)
        self._util_open = np.where(open_free > 0, load.pred_util, np.inf)
        self.max_free_mib = float(open_free.max()) if len(open_free) else 0.0
        self.min_util_open = float(self._util_open.min()) if len(open_free) else np.inf
        self._n_max_free: int | None = None  # GPUs holding the maximum / minimum: counted when first needed
        self._n_min_util: int | None = None
        self._summary_ready = True

    def _ensure_base_cost(self) -> None:
        """Cost terms that do not depend on the job being placed (needed only to score GPUs)."""
        if self._base_ready:
            self._flush_nodes()
        else:
            if not self._summary_ready:
                self._summarise()
            load, w = self._load, self.weights
            self.base_cost = (w.util * load.pred_util + (w.memory * load.pred_mem_mib) * self.inv_cap
                              + w.corunners * load.n_residents
                              + (w.node_fit * self.node_idle / self.idx.node_size)[self.idx.node_of_gpu])
            self._base_ready = True

    def any_room(self) -> bool:
        self._ensure_idle()
        if self.n_idle > 0:
            return True
        if not self._summary_ready:
            self._summarise()
        return self.max_free_mib > 0.0

    def fit_counts(self) -> FitCounts | None:
        """Counts that admit what ``possible`` admits (and ``room`` that is ``any_room``), where they are this
        class's own (``possible`` the base one over ``possible_rows``)."""
        cls = type(self)
        own = (cls.possible_rows is HorusPlacement.possible_rows and cls.any_room is HorusPlacement.any_room
               and cls.possible is Placement.possible)
        if not own:
            return None
        return FitCounts(self.util_cap, self.mem_margin, self.max_residents)

    def possible_rows(self, r: np.ndarray, load: GPULoad, state: SchedulerState) -> np.ndarray:
        """False when fewer than k GPUs are idle or could share with the job's least predicted memory
        and utilization (over GPU types): then ``cost_per_gpu`` has fewer than k finite entries. A few rows that the
        summary alone refuses (too few idle GPUs, and no open GPU with the memory or the utilization headroom) are
        answered on Python floats, without the per-GPU arrays."""
        self._ensure_idle()
        if len(r) <= FEW_ROWS and self._summary_refuses(r):
            return np.zeros(len(r), dtype=bool)
        k, mem, util, empty = r[:, 0], r[:, 1], r[:, 2], r[:, 4] > 0
        ok = k <= self.n_idle
        rest = ~ok & ~empty
        if rest.any():
            if not self._summary_ready:
                self._summarise()
            mem_r, util_r = mem[rest], util[rest]
            open_shared = self.open & ~self.idle
            free, used = self.free_mib[open_shared], load.pred_util[open_shared]
            keep = (free >= mem_r.min()) & (used + util_r.min() <= self.util_cap)
            free, used = free[keep], used[keep]
            fits = (free[None, :] >= mem_r[:, None]) & (used[None, :] + util_r[:, None] <= self.util_cap)
            ok[rest] = self.n_idle + np.count_nonzero(fits, axis=1) >= k[rest]
        return ok

    def _summary_refuses(self, r: np.ndarray) -> bool:
        """Whether ``possible_rows`` refuses every row of ``r`` by the summary alone: more GPUs than are idle, and an
        out-of-memory job, or memory above every open GPU's free memory, or (memory above 0: only GPUs with free
        memory can hold it) utilization that added to the least utilization of those GPUs exceeds the cap (IEEE
        addition is monotone, so every such GPU exceeds it too). NaN compares false: not refused here."""
        n_idle = self.n_idle
        for k, mem, util, _, empty in r.tolist():
            if k <= n_idle:
                return False
            if not self._summary_ready:
                self._summarise()
            if not (empty > 0 or mem > self.max_free_mib or (mem > 0 and util + self.min_util_open > self.util_cap)):
                return False
        return True

    def cost_per_gpu_kept(self, job: QueuedJob, load: GPULoad, state: SchedulerState) -> np.ndarray | None:
        """``cost_per_gpu`` as a read-only array kept per job shape until ``update``: on a cluster of one GPU type a
        job's costs read only its predicted utilization and memory, whether it needs an empty GPU, its GPU-type
        request and the per-GPU summary, so a kept array is brought up to date on the nodes ``update_added``
        changed since (the same float operations per element). The caller must not write to it."""
        if (len(self.idx.types) != 1 or type(self).cost_per_gpu is not HorusPlacement.cost_per_gpu
                or load is not self._load or state is not self._state):  # kept for the load the summary follows
            return self.cost_per_gpu(job, load, state)
        spec = job.spec
        loads = self._screened_loads(job, state)
        if loads is None:
            return None
        self._ensure_base_cost()
        u, m = float(loads[0].util), float(loads[0].mem_mib)
        key = (u, m, needs_empty_gpu(job), spec.gpu_type_request)
        kept = self._kept_costs.get(key)
        if kept is not None and kept[2] is self.base_cost and kept[1] == self._gen:
            return kept[0]
        nodes = None
        if kept is not None and kept[2] is self.base_cost and self._gen_nodes is not None:
            nodes = np.flatnonzero(self._gen_nodes > kept[1])
            if 8 * len(nodes) > len(self._gen_nodes):  # many changed: costing every GPU is as cheap
                nodes = None
        if nodes is None:
            cost = self.cost_per_gpu(job, load, state)
            if cost is None:
                return None
            cost.setflags(write=False)
        else:
            cost = kept[0]  # type: ignore[index]
            rows = self.idx.node_gpus[nodes]
            at = rows[~self.idx.node_pad[nodes]]
            w = self.weights
            part = self.base_cost[at] + w.util * u + (w.memory * m) * self.inv_cap[at]
            util_after = load.pred_util[at] + u
            if self.util_cap > 1.0 or u > 1.0:
                part = part + w.overload * np.maximum(util_after - 1.0, 0.0)
            if needs_empty_gpu(job):
                feasible = self.idle[at]
            else:
                feasible = (self.free_mib[at] >= m) & self.open[at] & (util_after <= self.util_cap)
                feasible |= self.idle[at]
            allowed = self.idx.allowed(spec)
            if allowed is not None:
                feasible = feasible & allowed[at]
            cost.setflags(write=True)
            cost[at] = np.where(feasible, part, np.inf)
            cost.setflags(write=False)
        if len(self._kept_costs) > 256:
            self._kept_costs.clear()
        self._kept_costs[key] = (cost, self._gen, self.base_cost)
        if self._gen_nodes is None:
            self._gen_nodes = np.zeros(len(self.idx.node_first), dtype=np.int64)
        return cost

    def _screened_loads(self, job: QueuedJob, state: SchedulerState) -> list[Prediction] | None:
        """The job's predicted per-GPU loads, or None where the per-GPU summary alone says it fits nowhere (too few
        idle GPUs for its gang and no open GPU with the memory or utilization headroom it needs)."""
        if not self._summary_ready:
            self._summarise()
        loads = self.job_loads(job, state)
        if self.n_idle < job.spec.num_gpus:
            if min(p.mem_mib for p in loads) > self.max_free_mib or needs_empty_gpu(job):
                return None
            if min(p.util for p in loads) + self.min_util_open > self.util_cap:
                return None
        return loads

    def cost_per_gpu(self, job: QueuedJob, load: GPULoad, state: SchedulerState) -> np.ndarray | None:
        spec = job.spec
        loads = self._screened_loads(job, state)
        if loads is None:
            return None
        utils = [p.util for p in loads]
        u = self.idx.per_gpu(utils)
        m = self.idx.per_gpu([p.mem_mib for p in loads])
        w = self.weights
        self._ensure_base_cost()
        cost = self.base_cost + w.util * u + (w.memory * m) * self.inv_cap
        util_after = load.pred_util + u
        if self.util_cap > 1.0 or max(utils) > 1.0:
            cost = cost + w.overload * np.maximum(util_after - 1.0, 0.0)
        if needs_empty_gpu(job):
            feasible = self.idle
        else:
            feasible = (self.free_mib >= m) & self.open & (util_after <= self.util_cap)
            feasible |= self.idle  # an idle GPU takes any job: limits apply to sharing only
        allowed = self.idx.allowed(spec)
        if allowed is not None:
            feasible = feasible & allowed
        return np.where(feasible, cost, np.inf)
