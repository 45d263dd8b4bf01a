"""Prometheus metrics of the live service (``prometheus_client``, one registry per service).

Counters and histograms are updated where things happen; queue length, running jobs, the
per-GPU gauges and the per-queue (tenant) gauges are read from the scheduler at scrape time (a custom
collector), so they are never stale.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from horus.service.scheduler import LiveScheduler

DECISION_BUCKETS = (1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 2e-3, 5e-3, 1e-2, 3e-2, 0.1, 0.3, 1.0)
ERROR_BUCKETS = (0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0, 5.0)
TIME_BUCKETS = (0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600, 4 * 3600, 12 * 3600, 24 * 3600, 7 * 24 * 3600)


class ServiceMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.submitted = Counter("horus_jobs_submitted", "Jobs accepted by the API", registry=r)
        self.decision_s = Histogram("horus_scheduling_decision_seconds", "Duration of one policy decision step",
                                    buckets=DECISION_BUCKETS, registry=r)
        self.wait_s = Histogram("horus_job_wait_seconds", "Queueing delay of each start (from (re)queueing)",
                                buckets=TIME_BUCKETS, registry=r)
        self.jct_s = Histogram("horus_job_completion_seconds", "Submission to completion of finished jobs",
                               buckets=TIME_BUCKETS, registry=r)
        self.oom_restarts = Counter("horus_oom_restarts", "Job attempts that ended out of GPU memory", registry=r)
        self.agents_lost = Counter("horus_agents_lost", "Agents that missed their lease", registry=r)
        self.queue_reclaims = Counter("horus_queue_reclaims", "Jobs of the queue preempted to give borrowed GPUs "
                                      "back (to another queue's guarantee, or down to its own limit)", ["queue"],
                                      registry=r)
        self.prediction_error = Histogram(
            "horus_prediction_error", "Relative error |predicted - observed| / observed of each attempt's solo "
            "utilization, peak memory and iteration time, against the prediction (corrected online) it started with",
            ["quantity"], buckets=ERROR_BUCKETS, registry=r)

    def bind(self, scheduler: LiveScheduler) -> None:
        """Expose the scheduler's live gauges."""
        self.registry.register(_StateCollector(scheduler))

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _StateCollector(Collector):
    def __init__(self, scheduler: LiveScheduler) -> None:
        self.scheduler = scheduler

    def collect(self) -> Iterator[Metric]:
        view = self.scheduler.cluster_view()
        yield GaugeMetricFamily("horus_queue_length", "Jobs waiting", value=view["queued"])
        yield GaugeMetricFamily("horus_running_jobs", "Jobs running", value=view["running"])
        labels = ["gpu", "agent", "local_index", "type"]
        families = {
            "predicted_util": GaugeMetricFamily("horus_gpu_predicted_util", "Summed predicted utilization of the "
                                                "GPU's residents (fraction)", labels=labels),
            "observed_util": GaugeMetricFamily("horus_gpu_observed_util", "NVML utilization (fraction)", labels=labels),
            "predicted_mem_mib": GaugeMetricFamily("horus_gpu_predicted_memory_mib", "Summed predicted memory of "
                                                   "the GPU's residents", labels=labels),
            "observed_mem_mib": GaugeMetricFamily("horus_gpu_observed_memory_mib", "NVML memory used by Horus jobs",
                                                  labels=labels),
        }
        residents = GaugeMetricFamily("horus_gpu_residents", "Jobs on the GPU", labels=labels)
        capacity = GaugeMetricFamily("horus_gpu_memory_capacity_mib", "Memory of the GPU's type", labels=labels)
        for gpu in view["gpus"]:
            values = [str(gpu["index"]), gpu["agent"], str(gpu["local_index"]), gpu["type"]]
            residents.add_metric(values, len(gpu["residents"]))
            capacity.add_metric(values, gpu["memory_mib"])
            for key, family in families.items():
                if gpu[key] is not None:
                    family.add_metric(values, gpu[key])
        yield residents
        yield capacity
        yield from families.values()
        yield from _queue_families(self.scheduler.queue_views())


QUEUE_GAUGES = (  # (metric, help, key of the queue's view)
    ("horus_queue_guaranteed_gpus", "GPUs guaranteed to the queue (all types)", "guaranteed"),
    ("horus_queue_charged_gpus", "GPUs the queue's running jobs are charged now (shared GPUs split)",
     "charged_gpus"),
    ("horus_queue_reserved_gpus", "GPUs reserved by the queue's admitted jobs that wait for placement",
     "reserved_gpus"),
    ("horus_queue_held_jobs", "Jobs of the queue held by its quota (not yet admitted)", "held_jobs"),
    ("horus_queue_fair_deficit_gpu_hours", "GPU-hours the queue is behind its weighted fair share while contended "
     "(decayed with the half-life; negative: ahead)", "fair_deficit_gpu_h"),
)


def _queue_families(queues: list[dict[str, object]]) -> Iterator[Metric]:
    """Per-queue gauges (label ``queue``); none without a tenancy."""
    for name, text, key in QUEUE_GAUGES:
        family = GaugeMetricFamily(name, text, labels=["queue"])
        for q in queues:
            value = q[key]
            if isinstance(value, dict):  # per GPU type; an any-type ("*") guarantee holds the per-type ones
                value = value["*"] if "*" in value else sum(value.values())
            family.add_metric([str(q["name"])], float(value))
        yield family
