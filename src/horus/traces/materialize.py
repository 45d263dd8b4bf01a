"""Turn a Trace into JobSpecs for one simulated world (docs/traces.md, "Materializing").

- Jobs without a model get a job type from the profile sampler (seeded), drawn from
  ``truth.job_types()`` (or the Gavel job types when the truth lists none).
- Jobs with a model must have a job type the truth knows (when it lists any).
- Sampled job types are limited to those whose true solo memory fits the reference GPU (nobody
  submits a job that cannot run alone on the cluster's cards); a trace that names such a type keeps it.
- ``duration_s`` becomes ``iterations = duration_s / truth.solo(job_type, reference_gpu).iter_time_s``:
  the trace says how long the job ran, so in the simulated world it takes exactly that long when
  running alone (no co-location, solo per-worker speed) on the reference GPU type.
- ``queue`` / ``priority`` (the job's tenant and priority class) are passed on as they are, and so are
  ``input_size`` / ``precision`` / ``optimizer`` (the job's own description): they are part of the job type
  (``resnet18/b128/s32/amp-fp16``), which a truth that lists its job types must know.
"""

from __future__ import annotations

import numpy as np

from horus.cluster import GPUType
from horus.errors import HorusInputError
from horus.jobs import JobSpec, job_type_key
from horus.traces.base import RawJob, Trace
from horus.traces.sampler import GAVEL_JOB_TYPES, SAMPLERS, ProfileSampler, split_job_type
from horus.truth.base import TruthModel

DEFAULT_SAMPLER = "by-size-duration"


def _where(trace: Trace, job: RawJob) -> str:
    return f"line {job.line}, job {job.job_id!r}" if job.line is not None else f"job {job.job_id!r}"


def materialize(trace: Trace, truth: TruthModel, sampler: ProfileSampler | str = DEFAULT_SAMPLER,
                reference_gpu: GPUType | None = None, seed: int | None = None,
                limit: int | None = None) -> list[JobSpec]:
    """JobSpecs of ``trace`` in submit order.

    ``sampler`` is a ProfileSampler or a registered name; the draws use ``seed`` (default: the
    sampler's own seed). ``reference_gpu`` is needed when any job gives a duration.

    ``limit``: only the first ``limit`` jobs' JobSpecs (``materialize(...)[:limit]``, cheaper). The draws and the
    checks still cover the whole trace, so a job keeps its type and a trace with a job type the truth does not
    know fails (naming that job's line) whatever the limit: the same answer as without it, sooner.
    """
    if isinstance(sampler, str):
        sampler = SAMPLERS.create(sampler, seed=0 if seed is None else seed)
    rng = np.random.default_rng(sampler.seed if seed is None else seed)
    known = truth.job_types()
    known_set = set(known)
    needs_type = [job for job in trace.jobs if job.model is None]
    candidates = list(known) or list(GAVEL_JOB_TYPES)
    if reference_gpu is not None and needs_type:
        fitting = [jt for jt in candidates if truth.solo(jt, reference_gpu).mem_mib <= reference_gpu.memory_mib]
        candidates = fitting or candidates
    drawn = dict(zip((job.job_id for job in needs_type), sampler.assign(needs_type, candidates, rng)))
    # per distinct description, not per row (a trace has ~100k rows and a few dozen job types): the key, the
    # truth's verdict and the solo iteration time; the same checks, in the same row order, as row by row
    split: dict[str, tuple[str, int]] = {}
    keys: dict[tuple[object, ...], str] = {}
    iter_time: dict[str, float] = {}
    specs: list[JobSpec] = []
    wanted = len(trace.jobs) if limit is None else max(0, limit)
    for row, job in enumerate(trace.jobs):
        if job.model is None:
            sampled = drawn[job.job_id]
            if sampled not in split:
                split[sampled] = split_job_type(sampled)
            model, batch = split[sampled]
        else:
            model, batch = job.model, int(job.batch_size or 0)
        description = (model, batch, job.input_size, job.precision, job.optimizer)
        key = keys.get(description)
        if key is None:
            key = keys[description] = job_type_key(*description)
            if not truth.knows(key):
                raise HorusInputError(trace.source, f"{_where(trace, job)}: job type {key!r} is unknown to truth "
                                                    f"model {truth.name!r} (known: "
                                                    f"{', '.join(sorted(known_set)) or 'none'})")
        if job.iterations is not None:
            iterations = job.iterations
        else:
            if reference_gpu is None:
                raise ValueError("materialize needs reference_gpu to convert durations into iterations")
            if key not in iter_time:
                iter_time[key] = truth.solo(key, reference_gpu).iter_time_s
            if row >= wanted:
                continue
            iterations = float(job.duration_s or 0.0) / iter_time[key]
        if row >= wanted:
            continue
        specs.append(JobSpec(job.job_id, job.submit_time, job.num_gpus, model, batch, iterations,
                             job.gpu_fraction, job.gpu_type_request, job.queue, job.priority, job.input_size,
                             job.precision, job.optimizer))
    return specs
