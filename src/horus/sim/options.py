"""Domains of the numeric options of ``simulate``, ``sweep``, ``trace generate`` and ``interference``
(docs/inputs.md; ``validation.NumberArg`` checks them). Light on imports: ``register`` reads it."""

from __future__ import annotations

from horus.validation import LIMITS, MAX_ROWS, Domain

YEAR_S = 365.25 * 86400

# Domains of numeric options (NumberArg reads them; the CLI fuzzer derives valid and invalid values from them).
SEED = LIMITS["seed"]
MAX_JOBS = Domain(1, MAX_ROWS, True, "jobs")  # a trace holds at most MAX_ROWS rows
INTERFERENCE_SCALE = Domain(0, 100)  # 0: co-location is free; 100: a hundred times the truth's slowdown
LOSING_PAIRS = Domain(0, 1, False, "of job-type pairs")
TELEMETRY_PERIOD_S = Domain(1, 86_400, False, "s")  # monitoring scrapes every 1 s to once a day
TELEMETRY_SIGMA = Domain(0, 1)  # log-normal sigma of the reported rate
TELEMETRY_WARMUP = Domain(0, 1e6, False, "iterations")
GENERATE_JOBS = Domain(1, 10_000_000, True, "jobs")
OFFERED_LOAD = Domain(1e-3, 100, False, "x the cluster's GPUs")
JOB_DURATION_S = Domain(1, 10 * YEAR_S, False, "s")  # generated run times are whole seconds
DURATION_SIGMA = Domain(0, 10)
TENANTS = Domain(0, 1000, True, "tenants")  # trace generate --tenants (horus.traces.generate.MAX_TENANTS)
TRAIN_FOLDS = Domain(0, 100, True)  # interference train: 0 or 1 skip the held-out check
EVALUATE_FOLDS = LIMITS["folds"]

