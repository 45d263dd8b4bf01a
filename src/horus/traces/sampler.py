"""Profile samplers: attach a job type (model + batch size) to trace jobs that have none.

Traces such as Philly and openb record only GPU count and run time. A sampler picks a job type
for each such job, drawing only from the truth model's ``job_types()`` (or, when it lists none,
from ``GAVEL_JOB_TYPES``). The default rule, ``by-size-duration``, is documented in docs/traces.md.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np

from horus.jobs import job_type_key
from horus.registry import Registry
from horus.traces.base import RawJob

# The 26 single-GPU job types of Gavel's measurements (sources/gavel.py names).
GAVEL_JOB_TYPES: tuple[str, ...] = tuple(
    [job_type_key("resnet18_cifar", b) for b in (16, 32, 64, 128, 256)]
    + [job_type_key("resnet50", b) for b in (16, 32, 64, 128)]
    + [job_type_key("transformer", b) for b in (16, 32, 64, 128, 256)]
    + [job_type_key("lstm_lm", b) for b in (5, 10, 20, 40, 80)]
    + [job_type_key("recoder", b) for b in (512, 1024, 2048, 4096, 8192)]
    + [job_type_key("cyclegan", 1), job_type_key("a3c", 4)]
)

# Fallback training FLOPs per sample (forward + backward ~ 3 x forward) for models the catalog
# lacks. Order-of-magnitude figures from the models' papers at their usual input sizes (ResNet-18
# 1.8 GMACs and ResNet-50 4.1 GMACs at 224 px; VGG-16 15.5 GMACs; BERT-base / GPT-2 ~ 2 x params x
# tokens at 128 / 1024 tokens; Transformer base ~ 2 x 65 M x 30 tokens; 2-layer LSTM LM with 33 k
# vocabulary, 35 steps; CycleGAN 2 generators + 2 discriminators at 256 px; NCF and A3C tiny).
# Only used to rank job types by size.
FALLBACK_TRAIN_FLOPS_PER_SAMPLE: dict[str, float] = {
    "resnet18": 3 * 3.6e9, "resnet50": 3 * 8.2e9, "vgg16": 3 * 31e9, "transformer": 3 * 4e9,
    "lstm_lm": 3 * 2e9, "ncf": 3 * 1e6, "recoder": 3 * 1.6e7, "resnet18_cifar": 3 * 0.56e9, "cyclegan": 3 * 130e9, "a3c": 3 * 1e7,
    "bert_base": 3 * 28e9, "gpt2": 3 * 254e9,
}

SAMPLERS: Registry[ProfileSampler] = Registry("profile sampler")


def split_job_type(key: str) -> tuple[str, int]:
    """``'resnet50/b64'`` -> ``('resnet50', 64)``; ValueError for malformed keys."""
    model, sep, batch = key.rpartition("/b")
    if not sep or not model or not batch.isdigit():
        raise ValueError(f"malformed job type {key!r} (expected '<model>/b<batch>')")
    return model, int(batch)


def job_type_size(key: str) -> float:
    """Training FLOPs of one iteration of a job type: catalog value if present, else the fallback table.

    Models in neither get the median of the fallback table (documented; only used for ranking).
    """
    model, batch = split_job_type(key)
    try:
        from horus.catalog import load_catalog

        info = load_catalog().get(model)
    except (FileNotFoundError, ImportError):
        info = None
    if info is not None and info.train_flops_per_sample > 0:
        return info.train_flops_per_sample * batch
    per_sample = FALLBACK_TRAIN_FLOPS_PER_SAMPLE.get(model)
    if per_sample is None:
        per_sample = float(np.median(list(FALLBACK_TRAIN_FLOPS_PER_SAMPLE.values())))
    return per_sample * batch


class ProfileSampler(ABC):
    """Assigns job-type keys to jobs; deterministic given the generator passed in."""

    name: str = "sampler"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed  # default seed of materialize() when it is given none

    @abstractmethod
    def assign(self, jobs: Sequence[RawJob], job_types: Sequence[str], rng: np.random.Generator) -> list[str]:
        """One job-type key (from ``job_types``) per job."""

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "seed": self.seed}


@SAMPLERS.register("by-size-duration")
class BySizeDuration(ProfileSampler):
    """Bigger jobs (more GPUs, longer run) draw bigger job types (more training FLOPs per iteration).

    Each job gets a score s = gpu bucket + duration bucket in 0..4 (see ``score``) and a target
    size quantile q = (s + 0.5) / 5 (0.1 .. 0.9). Job types are ranked by ``job_type_size``; type i at rank quantile
    r_i = (rank + 0.5) / n is drawn with probability proportional to exp(-|r_i - q| / spread).
    Jobs without a duration (iteration-count traces) use the middle duration bucket.
    """

    name = "by-size-duration"
    def __init__(self, seed: int = 0, spread: float = 0.25) -> None:
        super().__init__(seed)
        if spread <= 0:
            raise ValueError("spread must be positive")
        self.spread = spread

    SHORT_S = 1800.0  # below: short
    LONG_S = 4 * 3600.0  # at or above: long

    def score(self, job: RawJob) -> int:
        """GPU bucket (1 / 2-4 / >=5 GPUs -> 0/1/2) + duration bucket (short/medium/long -> 0/1/2)."""
        gpu = 0 if job.num_gpus <= 1 else (1 if job.num_gpus <= 4 else 2)
        if job.duration_s is None:
            return gpu + 1
        return gpu + (0 if job.duration_s < self.SHORT_S else (1 if job.duration_s < self.LONG_S else 2))

    def assign(self, jobs: Sequence[RawJob], job_types: Sequence[str], rng: np.random.Generator) -> list[str]:
        if not job_types:
            raise ValueError("no job types to draw from")
        ranked = sorted(job_types, key=lambda key: (job_type_size(key), key))
        n = len(ranked)
        quantiles = (np.arange(n) + 0.5) / n
        probs = np.empty((5, n))
        for s in range(5):
            weights = np.exp(-np.abs(quantiles - (s + 0.5) / 5) / self.spread)
            probs[s] = weights / weights.sum()
        scores = np.fromiter((self.score(job) for job in jobs), dtype=np.int64, count=len(jobs))
        uniforms = rng.random(len(jobs))
        cdf = np.cumsum(probs, axis=1)
        picks = np.minimum((cdf[scores] < uniforms[:, None]).sum(axis=1), n - 1)
        return [ranked[i] for i in picks.tolist()]

    def describe(self) -> dict[str, object]:
        return {
            "name": self.name,
            "seed": self.seed,
            "rule": "score = gpu bucket + duration bucket (0..4); job types ranked by training FLOPs per "
                    "iteration; P(type) ~ exp(-|rank quantile - (score + 0.5) / 5| / spread)",
            "gpu_buckets": ["1 GPU", "2-4 GPUs", ">=5 GPUs"],
            "duration_buckets": ["<30 min", "30 min-4 h", ">=4 h (no duration: middle bucket)"],
            "spread": self.spread,
        }
