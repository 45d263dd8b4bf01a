"""Co-location observations and the side features of a job type.

An ``Observation`` is one measured value: the normalized throughput (co-located / solo) of
``target`` while ``corunners`` share its GPU. Any source (Gavel pairs, the project's own
co-location dataset) is turned into a list of these; every model trains on that list only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from horus.catalog import FEATURE_NAMES, model_info
from horus.cluster import GPUType
from horus.errors import HorusInputError
from horus.jobs import parse_job_type, type_spec
from horus.predict.base import Predictor, whole_gpu
from horus.sources.gavel import GavelThroughputs

# GPU types of the Gavel measurements (memory in MiB; speed relative to V100, Gavel's solo ratios).
KNOWN_GPU_TYPES: dict[str, GPUType] = {
    "v100": GPUType("v100", 16 * 1024, 1.0),
    "p100": GPUType("p100", 16 * 1024, 0.6),
    "k80": GPUType("k80", 12 * 1024, 0.25),
}


def gpu_type_of(gpu: GPUType | str) -> GPUType:
    """A GPUType from a name (known Gavel types; others get 16 GiB) or pass one through."""
    if isinstance(gpu, GPUType):
        return gpu
    return KNOWN_GPU_TYPES.get(gpu.lower(), GPUType(gpu.lower(), 16 * 1024, 1.0))


@dataclass(frozen=True)
class Observation:
    """``target``'s normalized throughput while ``corunners`` share one GPU of type ``gpu``."""

    target: str
    corunners: tuple[str, ...]
    gpu: str
    value: float
    source: str = ""

    @property
    def job_types(self) -> tuple[str, ...]:
        """The whole co-located set, target first."""
        return (self.target, *self.corunners)


def gavel_observations(table: GavelThroughputs, *, drop_both_at_solo: bool = False) -> list[Observation]:
    """One observation per measured ordered pair (a with b -> a's normalized throughput).

    Gavel stores each pair under both orders with mirrored values, so (a, b) and (b, a) are the
    two jobs of one experiment. Zero pairs are already excluded by the loader (unmeasured);
    "both at solo" pairs are kept unless ``drop_both_at_solo``.
    """
    out: list[Observation] = []
    for (a, b), (ta, tb) in sorted(table.pairs.items()):
        if drop_both_at_solo and ta == table.solo[a] and tb == table.solo[b]:
            continue
        value = ta / table.solo[a]
        out.append(Observation(a, (b,), table.gpu, value, f"gavel:{table.gpu}"))
    return out


def experiment_key(obs: Observation) -> tuple[str, ...]:
    """Key shared by every observation of one co-location experiment (the unordered set)."""
    return (obs.gpu, *sorted(obs.job_types))


def catalog_graph_features(job_type: str) -> dict[str, float]:
    """FEATURE_NAMES of a job type from the shipped model catalog."""
    model, batch = parse_job_type(job_type)
    return model_info(model).features(batch)


SOLO_FEATURE_NAMES: tuple[str, ...] = ("pred_util", "pred_mem_frac")


class JobFeatures:
    """Side-feature vector of a job type on a GPU type.

    Graph features (``FEATURE_NAMES``, log1p-transformed since they span orders of magnitude)
    come from ``graph`` (a mapping job type -> features, for tests or new data) or the catalog.
    If a solo predictor is given (an instance, or a name in ``PREDICTORS``), its predicted
    utilization and memory fraction of the card are appended. Vectors are cached.
    """

    def __init__(self, graph: Mapping[str, Mapping[str, float]] | None = None,
                 predictor: Predictor | str | None = None) -> None:
        self.graph = dict(graph) if graph is not None else None
        self.predictor_name = predictor if isinstance(predictor, str) else getattr(predictor, "name", None)
        self._predictor = predictor if isinstance(predictor, Predictor) else None
        self._cache: dict[tuple[str, str], np.ndarray] = {}

    @property
    def names(self) -> tuple[str, ...]:
        return (*FEATURE_NAMES, *(SOLO_FEATURE_NAMES if self.predictor_name else ()))

    def __getstate__(self) -> dict[str, object]:
        state = dict(self.__dict__)
        state["_predictor"] = None  # re-created from its registered name on load
        state["_cache"] = {}
        return state

    def predictor(self) -> Predictor | None:
        if self._predictor is None and self.predictor_name:
            from horus.plugins import load_all
            from horus.predict.base import PREDICTORS

            load_all("horus.predict")
            self._predictor = PREDICTORS.create(self.predictor_name)
        return self._predictor

    def graph_features(self, job_type: str) -> Mapping[str, float]:
        if self.graph is None:
            return catalog_graph_features(job_type)
        try:
            return self.graph[job_type]
        except KeyError:
            raise HorusInputError("job type", f"no graph features for {job_type!r}") from None

    def solo(self, job_type: str, gpu: GPUType | str) -> tuple[float, float]:
        """Predicted solo (utilization fraction, memory MiB); needs a predictor."""
        pred = self.predictor()
        if pred is None:
            raise HorusInputError("interference features", "a solo predictor is needed for utilization features")
        if job_type.startswith("/b"):  # a job without a model (e.g. a live job given only a GPU fraction)
            p = whole_gpu(gpu_type_of(gpu))
            return float(p.util), float(p.mem_mib)
        p = pred.predict(type_spec(job_type, "feature"), gpu_type_of(gpu))
        return float(p.util), float(p.mem_mib)

    def vector(self, job_type: str, gpu: GPUType | str) -> np.ndarray:
        gt = gpu_type_of(gpu)
        key = (job_type, gt.name)
        vec = self._cache.get(key)
        if vec is None:
            feats = self.graph_features(job_type)
            values = [math.log1p(max(float(feats.get(n, 0.0)), 0.0)) for n in FEATURE_NAMES]
            if self.predictor_name:
                util, mem = self.solo(job_type, gt)
                values += [util, mem / gt.memory_mib]
            vec = np.asarray(values, dtype=float)
            self._cache[key] = vec
        return vec

    def matrix(self, job_types: Sequence[str], gpu: GPUType | str) -> np.ndarray:
        return np.vstack([self.vector(t, gpu) for t in job_types]) if job_types else np.zeros((0, len(self.names)))


def job_types_of(observations: Iterable[Observation]) -> list[str]:
    """Every job type appearing in the observations, sorted."""
    return sorted({t for o in observations for t in o.job_types})


def default_features(predictor: str | None = "analytic") -> JobFeatures:
    """Catalog graph features plus ``predictor``'s solo util/memory when that predictor is registered."""
    if predictor:
        from horus.plugins import load_all
        from horus.predict.base import PREDICTORS

        load_all("horus.predict")
        if predictor not in PREDICTORS:
            predictor = None
    return JobFeatures(predictor=predictor)
