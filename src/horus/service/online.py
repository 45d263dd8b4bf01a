"""Online correction in the live service: agents' telemetry -> observations (``horus.core.online``) -> the store's
``observations`` table -> the ``Corrections`` the scheduler's predictor reads (``horus.predict.corrected``).

The corrections are a function of the stored observations: on start they are read back, so they survive a restart
(and ``kill -9``: every write is one transaction, made before the corrections in memory change). A running job's
observations are written when it first observes a quantity, then at most every ``SAVE_S`` seconds, and when its
attempt leaves its GPUs.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any

from horus.core.online import Observed, OnlineObserver
from horus.predict.corrected import QUANTITIES, CorrectedPredictor, Observation

if TYPE_CHECKING:
    from horus.service.metrics import ServiceMetrics
    from horus.service.store import Store
    from horus.state import SchedulerState

log = logging.getLogger("horus.service")

SAVE_S = 30.0  # a running job's observations reach the store at most this often (and when it stops)


class LiveCorrections:
    """The service's online correction: an observer, its persistence and its views."""

    def __init__(self, store: Store, predictor: CorrectedPredictor, metrics: ServiceMetrics, load: bool = True) -> None:
        """``load``: rebuild the corrections from the stored observations (False: online correction is off)."""
        self.store = store
        self.observer = OnlineObserver(predictor)
        self.predictor = predictor
        self.metrics = metrics
        self.pending: list[Observed] = []  # final observations of stopped attempts not yet stored
        for row in store.observations() if load else ():
            predictor.corrections.observe(Observation(str(row["job_id"]), row["job_type"], row["gpu_type"],
                                                      row["quantity"], row["predicted"], row["observed"]))

    def heartbeat(self, state: SchedulerState, gpus: dict[int, tuple[str, int]],
                  gpu_telemetry: dict[int, dict[str, float]], reports: list[dict[str, Any]], now: float) -> None:
        """Sample the running jobs whose first GPU is one of this agent's ``gpus`` (global index -> (agent, local
        index)) from its GPUs' telemetry and its reports (``gpu_mem_mib``: a job's own memory, where measured)."""
        own_mem = {str(r["job_id"]): r.get("gpu_mem_mib") for r in reports if r.get("gpu_mem_mib") is not None}
        for g, (_, local) in gpus.items():
            for job_id in state.residents[g]:
                run = state.running[job_id]
                if run.gpus[0] != g:
                    continue
                seen = gpu_telemetry.get(local, {})
                self.observer.sample_gpu(state, job_id, util=seen.get("util"), gpu_mem_mib=seen.get("mem_mib"),
                                         job_mem_mib=own_mem.get(job_id))
                self.observer.sample_progress(state, job_id, now, run.iterations_done)

    def sync(self, state: SchedulerState, attempts: dict[str, int], now: float) -> None:
        """Stopped attempts give their final observations, started ones are watched; due observations are stored,
        then fed to the corrections (the state's predictions refreshed if they changed)."""
        ended = self.observer.resync(state, attempts)
        for item in ended:
            self._error(item)
        self.pending += ended
        due = self.observer.due(now, SAVE_S)
        rows = self.pending + [item for found in due.values() for item in found]
        if not rows:
            return
        from horus.service.store import StoreUnavailable

        try:
            self.store.put_observations([{
                "job_id": int(o.observation.key), "quantity": o.observation.quantity, "attempt": o.attempt,
                "job_type": o.observation.job_type, "gpu_type": o.observation.gpu_type,
                "predicted": o.observation.predicted, "believed": o.believed, "observed": o.observation.observed,
                "samples": o.samples} for o in rows], now)
        except StoreUnavailable as exc:  # telemetry, not a transition: kept and written with a later sync
            log.warning("observations not stored: %s", exc)
            return
        self.pending = []
        for job_id, found in due.items():
            self.observer.taken(job_id, now, len(found))
        self.observer.commit(state, rows)

    def _error(self, item: Observed) -> None:
        """The relative error of the prediction the attempt started with, once per stopped attempt."""
        obs = item.observation
        if obs.observed > 0 and math.isfinite(item.believed):
            self.metrics.prediction_error.labels(quantity=obs.quantity).observe(
                abs(item.believed - obs.observed) / obs.observed)

    def job_observation(self, job_id: int) -> dict[str, Any] | None:
        """What telemetry saw of the job (its latest observed attempt), per quantity, beside its predictions."""
        rows = self.store.observations(job_id)
        found = {o.observation.quantity: o for o in self.observer.observations(str(job_id))}
        if not rows and not found:
            return None
        out: dict[str, Any] = {}
        for row in rows:
            out.setdefault("gpu_type", row["gpu_type"])
            out.setdefault("attempt", row["attempt"])
            out[row["quantity"]] = {"observed": row["observed"], "predicted": row["believed"],
                                    "uncorrected": row["predicted"], "samples": row["samples"]}
        for q, o in found.items():  # fresher than the store's copy while it runs
            if o.attempt >= out.get("attempt", 0):
                out["gpu_type"], out["attempt"] = o.observation.gpu_type, o.attempt
                out[q] = {"observed": o.observation.observed, "predicted": o.believed,
                          "uncorrected": o.observation.predicted, "samples": o.samples}
        return {k: out[k] for k in ("gpu_type", "attempt", *QUANTITIES) if k in out}
