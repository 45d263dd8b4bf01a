"""Online correction in the simulator (``horus simulate --online-correction``): the live service's path
(``horus.core.online`` -> ``horus.predict.corrected``) fed by the simulated telemetry.

A running job alone on its GPUs shows what a real one would: the rate its telemetry reports (the policies' own
telemetry, ``horus.sim.telemetry``: exact, or periodic with log-normal noise), the utilization of its GPU (the
truth's solo utilization times the same telemetry model's noise, drawn from its own stream) and its peak memory (the
truth's, exact: NVML reads memory exactly). With noisy telemetry a report counts only when it was made after the job
became alone on its GPUs. Observations are committed before each policy call, so the policy decides on corrected
predictions; the summary then says how far the predictions the jobs started with were from the truth, raw and
corrected (``pred_*``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from horus.core.online import Observed, OnlineObserver
from horus.predict.base import Predictor
from horus.predict.corrected import QUANTITIES, CorrectedPredictor, Corrections
from horus.state import SchedulerState
from horus.truth.base import SoloTruth


class SimOnline:
    """The simulator's online correction (see the module docstring)."""

    def __init__(self, predictor: Predictor, noise: Callable[[str, int, int], float] | None) -> None:
        self.predictor = CorrectedPredictor(predictor, Corrections())
        self.observer = OnlineObserver(self.predictor, min_util_samples=1)  # simulated samples are whole
        self.noise = noise
        self.solo_since: dict[str, float] = {}
        self.pending: dict[str, None] = {}
        self.final: list[Observed] = []
        self.errors: dict[str, list[tuple[float, float, float]]] = {q: [] for q in QUANTITIES}

    def started(self, state: SchedulerState, job_id: str, attempt: int, truth: SoloTruth) -> None:
        """A job started on GPUs whose type's truth for it is ``truth`` (scored: raw and corrected prediction)."""
        self.observer.start(state, job_id, attempt)
        watch = self.observer.watches.get(job_id)
        if watch is not None:
            for q in QUANTITIES:
                self.errors[q].append((getattr(watch.raw, q), getattr(watch.believed, q), getattr(truth, q)))

    def residents_changed(self, state: SchedulerState, job_ids: Iterable[str], now: float) -> None:
        """The residents of these jobs' GPUs changed at ``now``: who is alone since when."""
        for job_id in job_ids:
            run = state.running.get(job_id)
            if run is not None and self.observer.solo(state, run):
                self.solo_since.setdefault(job_id, now)
            else:
                self.solo_since.pop(job_id, None)

    def sample(self, state: SchedulerState, job_id: str, rate: float, truth: SoloTruth, attempt: int,
               index: int | None = None, at: float | None = None) -> None:
        """A report of ``rate`` (made at ``at``, report ``index``; None: continuous telemetry, current)."""
        since = self.solo_since.get(job_id)
        if since is None or (at is not None and at < since):
            return
        noise = self.noise(f"{job_id}\0util", attempt, index) if self.noise is not None and index is not None else 1.0
        self.observer.sample_rate(state, job_id, rate)
        self.observer.sample_gpu(state, job_id, util=min(1.0, truth.util * noise), gpu_mem_mib=truth.mem_mib)
        self.pending[job_id] = None

    def stopped(self, job_id: str) -> None:
        self.final += self.observer.stop(job_id)
        self.solo_since.pop(job_id, None)
        self.pending.pop(job_id, None)

    def commit(self, state: SchedulerState) -> None:
        """Feed new observations to the corrections (before a policy call)."""
        if not self.pending and not self.final:
            return
        found = self.final + [o for job_id in self.pending for o in self.observer.observations(job_id)]
        self.final, self.pending = [], {}
        self.observer.commit(state, found)

    def summary(self) -> dict[str, float]:
        """Error of the predictions jobs started with against the truth: utilization MAE in points, memory and
        iteration time MAPE in percent; ``_raw``: of the base predictor alone."""
        out: dict[str, float] = {}
        for q, key, scale in (("util", "pred_util_mae", None), ("mem_mib", "pred_mem_mape", 100.0),
                              ("iter_time_s", "pred_iter_mape", 100.0)):
            rows = self.errors[q]
            if not rows:
                continue
            for i, suffix in ((0, "_raw"), (1, "")):
                if scale is None:
                    err = sum(abs(r[i] - r[2]) for r in rows) * 100.0 / len(rows)
                else:
                    err = sum(abs(r[i] - r[2]) / r[2] for r in rows if r[2] > 0) * scale / len(rows)
                out[key + suffix] = err
        out["online_observations"] = float(len(self.predictor.corrections))
        return out
