"""What the scheduler is told about each job's length: a property of the simulated world, the same for every policy.

A trace gives each job's *true* length (the iterations it really ran). Real schedulers never see that: users state a
length up front (epochs, a step budget, a wall-time limit) and jobs end early when they converge, are killed by
their owner or fail. ``SIZE_KNOWLEDGE`` names what the world announces in ``JobSpec.iterations`` of the spec every
policy reads (the simulator keeps the true length for itself):

* ``exact``: the true length (the evaluations before issue 23 granted every policy this).
* ``estimate`` (default for ``horus simulate`` and the sweep): the user's stated length. A share ``early_share`` of
  jobs ends early, after a fraction ``u ~ Uniform(min_used, 1)`` of what was stated (announced = true / u); the
  others run to their natural end, which the stated length misjudged by a log-normal factor ``exp(sigma Z)``
  (announced = true x that: a guessed step budget, a convergence criterion). Studies of user run-time estimates find them mostly over-estimates with a wide, roughly uniform
  spread of the used fraction (Mu'alem and Feitelson, IEEE TPDS 12(6), 2001; Tsafrir, Etsion and Feitelson, JSSPP
  2005), and DL clusters report a large share of killed and failed jobs (Jeon et al., USENIX ATC 2019, Philly).
  The parameters below are this project's assumptions in that spirit, not fitted (no trace at hand records stated
  lengths): ``early_share`` 0.3, ``min_used`` 0.05, ``sigma`` 0.5.
* ``none``: nothing (``iterations`` is ``inf``). Orders that rank by size refuse such a world
  (``Policy.orders_by_size``); a job's progress is still reported, its remaining length is unknown.

Draws are deterministic by (seed, job id), so every policy of a comparison sees the same announcements.
"""

from __future__ import annotations

import hashlib
import math
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass, replace

import numpy as np

from horus.errors import HorusInputError
from horus.jobs import JobSpec
from horus.registry import Registry


class SizeKnowledge(ABC):
    """Maps a job with its true length to the spec the scheduler sees."""

    name: str = "size-knowledge"

    @abstractmethod
    def announced(self, spec: JobSpec) -> float:
        """Iterations announced for ``spec`` (whose ``iterations`` is the true length); may be ``inf``."""

    def prepare(self, specs: Iterable[JobSpec]) -> None:
        """Draw what ``announced`` will need for ``specs`` at once (the same values; only faster in bulk)."""

    def visible(self, spec: JobSpec) -> JobSpec:
        """``spec`` as the scheduler sees it."""
        value = self.announced(spec)
        return spec if value == spec.iterations else with_iterations(spec, value)

    @property
    def known(self) -> bool:
        """Whether any size is announced at all."""
        return True

    def describe(self) -> dict[str, object]:
        return {"name": self.name}


def with_iterations(spec: JobSpec, iterations: float) -> JobSpec:
    """``dataclasses.replace(spec, iterations=iterations)`` without its per-field work (~5 -> ~1 us): a plain
    ``JobSpec`` has no ``__post_init__`` and its cached ``job_type`` does not depend on ``iterations``, so its
    fields are copied as they are; anything else goes through ``replace``."""
    if type(spec) is not JobSpec:
        return replace(spec, iterations=iterations)
    copy = object.__new__(JobSpec)
    fields = copy.__dict__
    fields.update(spec.__dict__)
    fields["iterations"] = iterations
    return copy


SIZE_KNOWLEDGE: Registry[SizeKnowledge] = Registry("size knowledge")


@SIZE_KNOWLEDGE.register("exact")
class ExactSizes(SizeKnowledge):
    """The true length (clairvoyant: a property no real cluster has)."""

    name = "exact"

    def announced(self, spec: JobSpec) -> float:
        return spec.iterations

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "note": "every policy is told each job's true length"}


@dataclass(frozen=True)
class _EstimateParams:
    early_share: float = 0.3
    min_used: float = 0.05
    sigma: float = 0.5


@SIZE_KNOWLEDGE.register("estimate")
class EstimatedSizes(SizeKnowledge):
    """The user's stated length: early termination and a log-normal misjudgement (module docstring)."""

    name = "estimate"

    def __init__(self, *, seed: int = 0, early_share: float = _EstimateParams.early_share,
                 min_used: float = _EstimateParams.min_used, sigma: float = _EstimateParams.sigma) -> None:
        if not 0.0 <= early_share <= 1.0:
            raise ValueError(f"early_share must be in [0, 1], got {early_share}")
        if not 0.0 < min_used <= 1.0:
            raise ValueError(f"min_used must be in (0, 1], got {min_used}")
        if not (math.isfinite(sigma) and sigma >= 0.0):
            raise ValueError(f"sigma must be a finite number >= 0, got {sigma}")
        self.seed = int(seed)
        self.params = _EstimateParams(float(early_share), float(min_used), float(sigma))
        self._drawn: dict[str, tuple[float, float, float]] = {}  # job id -> (early, u, z), from ``prepare``

    def _entropy(self, job_id: str) -> int:
        return int.from_bytes(hashlib.sha256(f"{self.seed}:{job_id}".encode()).digest()[:8], "little")

    def _rng(self, job_id: str) -> np.random.Generator:
        return np.random.default_rng(self._entropy(job_id))

    def prepare(self, specs: Iterable[JobSpec]) -> None:
        """Each job's draws of ``_rng(job_id)`` for all ``specs`` at once: one generator whose state is set to
        each job's (``seeded_pcg64_states``) instead of a ``default_rng`` per job (~18 -> ~4 us a job)."""
        ids = [spec.job_id for spec in specs if spec.job_id not in self._drawn]
        if not ids:
            return
        generator = np.random.Generator(np.random.PCG64(0))
        bits = generator.bit_generator
        drawn = self._drawn
        for job_id, (state, inc) in zip(ids, seeded_pcg64_states([self._entropy(i) for i in ids])):
            bits.state = {"bit_generator": "PCG64", "state": {"state": state, "inc": inc}, "has_uint32": 0,
                          "uinteger": 0}
            drawn[job_id] = (generator.random(), generator.random(), generator.standard_normal())

    def announced(self, spec: JobSpec) -> float:
        p = self.params
        draws = self._drawn.get(spec.job_id)
        if draws is None:
            rng = self._rng(spec.job_id)
            draws = rng.random(), rng.random(), rng.standard_normal()
        early, u, z = draws
        if early < p.early_share:
            return spec.iterations / (p.min_used + (1.0 - p.min_used) * u)
        return spec.iterations * math.exp(p.sigma * z)

    def describe(self) -> dict[str, object]:
        p = self.params
        return {"name": self.name, "seed": self.seed, "early_share": p.early_share, "min_used": p.min_used,
                "sigma": p.sigma,
                "model": "early_share of jobs end after Uniform(min_used, 1) of the stated length; the stated "
                         "length of the others misjudges their true one by exp(sigma Z)",
                "sources": "assumptions in the spirit of Mu'alem & Feitelson 2001, Tsafrir et al. 2005 (user "
                           "run-time estimates) and Jeon et al. 2019 (killed/failed DL jobs); not fitted"}


_MASK32, _MASK128 = 0xFFFFFFFF, (1 << 128) - 1
# numpy.random.SeedSequence's hash constants (numpy/random/bit_generator.pyx) and PCG64's 128-bit multiplier
_INIT_A, _MULT_A, _INIT_B, _MULT_B = 0x43B0D7E5, 0x931E8875, 0x8B51F9DD, 0x58F38DED
_MIX_MULT_L, _MIX_MULT_R = 0xCA01F9DD, 0x4973F715
_PCG64_MULT = 0x2360ED051FC65DA44385DF649FCCF645


def seeded_pcg64_states(entropies: list[int]) -> list[tuple[int, int]]:
    """``(state, inc)`` of ``np.random.default_rng(e).bit_generator`` for each entropy ``e`` in [0, 2**64).

    numpy's ``SeedSequence(e)`` (pool of 4 words, ``generate_state(4, uint64)``) done for all entropies as uint32
    array arithmetic (its hash constants advance the same way for every entropy of at most two words: one of one
    word hashes like two words with a zero high word), then PCG64's seeding (``pcg_setseq_128_srandom_r``) in
    Python integers. ``tests/test_sim_sizes.py`` checks it against numpy."""
    words = np.asarray(entropies, dtype="<u8").reshape(-1).view("<u4").reshape(-1, 2)
    hash_const = _INIT_A

    def hashmix(value: np.ndarray) -> np.ndarray:
        nonlocal hash_const
        value = value ^ np.uint32(hash_const)
        hash_const = (hash_const * _MULT_A) & _MASK32
        value = value * np.uint32(hash_const)
        return value ^ (value >> np.uint32(16))

    zero = np.zeros(len(words), dtype=np.uint32)
    pool = [hashmix(words[:, 0]), hashmix(words[:, 1]), hashmix(zero), hashmix(zero)]
    for src in range(4):
        for dst in range(4):
            if src != dst:
                mixed = np.uint32(_MIX_MULT_L) * pool[dst] - np.uint32(_MIX_MULT_R) * hashmix(pool[src])
                pool[dst] = mixed ^ (mixed >> np.uint32(16))
    hash_const = _INIT_B
    out = np.empty((len(words), 8), dtype="<u4")
    for i in range(8):
        value = pool[i % 4] ^ np.uint32(hash_const)
        hash_const = (hash_const * _MULT_B) & _MASK32
        value = value * np.uint32(hash_const)
        out[:, i] = value ^ (value >> np.uint32(16))
    states = []
    for a, b, c, d in out.view("<u8").tolist():
        inc = ((((c << 64) | d) << 1) | 1) & _MASK128
        states.append(((((inc + ((a << 64) | b)) & _MASK128) * _PCG64_MULT + inc) & _MASK128, inc))
    return states


@SIZE_KNOWLEDGE.register("none")
class NoSizes(SizeKnowledge):
    """No length at all: ``iterations`` is ``inf``."""

    name = "none"

    def announced(self, spec: JobSpec) -> float:
        return math.inf

    @property
    def known(self) -> bool:
        return False

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "note": "no job length is announced; size-ordered policies are refused"}


def size_knowledge(name: str, seed: int = 0, **options: float) -> SizeKnowledge:
    """The named knowledge (``estimate`` takes the seed and its parameters); ValueError for an unknown name."""
    if name not in SIZE_KNOWLEDGE:
        raise ValueError(f"unknown size knowledge {name!r}; known: {', '.join(SIZE_KNOWLEDGE.names())}")
    if name == "estimate":
        return SIZE_KNOWLEDGE.create(name, seed=seed, **options)
    if options:
        raise ValueError(f"size knowledge {name!r} takes no options, got {sorted(options)}")
    return SIZE_KNOWLEDGE.create(name)


def size_ordered_error(policy: str) -> HorusInputError:
    """The one-line error for a policy whose order ranks jobs by length, in a world that announces none."""
    return HorusInputError("--sizes none", f"policy {policy!r} orders jobs by their length, which this world does not "
                                           "announce (use --sizes estimate or exact)")
