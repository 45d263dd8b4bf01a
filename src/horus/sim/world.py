"""The simulated world by name: the embedded default files, truth models and predictors (``horus simulate`` and
``horus sweep`` build theirs here)."""

from __future__ import annotations

from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from horus.traces.base import RawJob

MEMORY_TRUTHS = ("formula", "deviated")  # the truth's own memory; off it by the measured deviation (docs/truth.md)


def embedded(name: str) -> Path:
    """Path of a file shipped in ``horus/data`` (the default trace and cluster)."""
    return Path(str(resources.files("horus.data").joinpath(name)))


def memory_truth_for(truth: str, option: str | None) -> str:
    """``--memory-truth`` as given, else ``deviated`` (``formula`` for ``--truth measured``: measured memory is
    the real thing and is never deviated)."""
    return option if option is not None else "formula" if truth == "measured" else "deviated"


def check_world_options(truth: str, gavel: object, predictor: str, predictor_dir: object, *,
                        profiles: object = None, colocation: object = None, memory_truth: str | None = None) -> None:
    """HorusInputError for an option the chosen truth or predictor would not read (so it is never silently
    ignored), or one they need and did not get. ``horus simulate`` and ``horus sweep`` both check here."""
    from horus.errors import HorusInputError

    if gavel is not None and truth != "gavel":
        raise HorusInputError("--gavel", f"is read only with --truth gavel (got --truth {truth})")
    if memory_truth is not None and memory_truth not in MEMORY_TRUTHS:
        raise HorusInputError("--memory-truth", f"expected one of {', '.join(MEMORY_TRUTHS)}, got {memory_truth!r}")
    if memory_truth is not None and truth == "measured":
        raise HorusInputError("--memory-truth", "is not read with --truth measured: its memory was measured on real "
                                                "GPUs and is never deviated")
    for option, value in (("--profiles", profiles), ("--colocation", colocation)):
        if value is not None and truth != "measured":
            raise HorusInputError(option, f"is read only with --truth measured (got --truth {truth})")
    if predictor_dir is not None and predictor != "learned":
        raise HorusInputError("--predictor-dir", f"is read only with --predictor learned (got --predictor {predictor})")
    if predictor == "learned" and predictor_dir is None:
        raise HorusInputError("--predictor learned", "needs --predictor-dir DIR (made by horus predictor train)")


def build_truth(name: str, gavel: Path | None, cluster: Any, profiles: Path | None = None,
                colocation: Path | None = None, memory: str = "formula") -> Any:
    """The truth model ``name``; ``memory="deviated"`` wraps it in ``horus.truth.memory_deviation`` (seed 0, as
    the truth itself), the parametric world then without its synthetic memory overhead."""
    if memory not in MEMORY_TRUTHS:
        from horus.errors import HorusInputError

        raise HorusInputError("--memory-truth", f"expected one of {', '.join(MEMORY_TRUTHS)}, got {memory!r}")
    truth = _build_truth(name, gavel, cluster, profiles, colocation, memory == "deviated")
    if memory == "formula":
        return truth
    from horus.truth.memory_deviation import MemoryDeviation

    return MemoryDeviation(truth)


def _build_truth(name: str, gavel: Path | None, cluster: Any, profiles: Path | None, colocation: Path | None,
                 deviated: bool) -> Any:
    from horus.errors import HorusInputError
    from horus.plugins import load_all
    from horus.truth.base import TRUTH_MODELS

    load_all("horus.truth")
    if name not in TRUTH_MODELS:
        import horus.colocation.truth_measured  # noqa: F401  (registers "measured"; imported only when asked for)
    if name not in TRUTH_MODELS:
        raise HorusInputError("--truth", f"unknown truth model {name!r}; known: {', '.join(TRUTH_MODELS.names())}")
    if name == "gavel":
        if gavel is None:
            raise HorusInputError("--truth gavel", "needs --gavel PATH to Gavel's simulation_throughputs.json")
        from horus.truth.gavel_pairs import GAVEL_GPU_KEYS

        keys = sorted({GAVEL_GPU_KEYS[t.name] for t in cluster.gpu_types() if t.name in GAVEL_GPU_KEYS} or {"v100"})
        return TRUTH_MODELS.create(name, path=gavel, gpus=keys)
    if name == "measured":
        if profiles is None:
            raise HorusInputError("--truth measured", "needs --profiles FILE (and optionally --colocation FILE), "
                                                      "the tables written by horus profile / horus profile colocate")
        return TRUTH_MODELS.create(name, solo_path=profiles, coloc_path=colocation)
    if name == "parametric" and deviated:
        return TRUTH_MODELS.create(name, memory_overhead=False)
    return TRUTH_MODELS.create(name)


def build_predictor(name: str, directory: Path | None) -> Any:
    from horus.errors import HorusInputError
    from horus.plugins import load_all
    from horus.predict.base import PREDICTORS

    load_all("horus.predict")
    if name not in PREDICTORS:
        import horus.learn.predictor  # noqa: F401  (registers "learned"; imports scikit-learn, so only when asked for)
    if name not in PREDICTORS:
        raise HorusInputError("--predictor", f"unknown predictor {name!r}; known: {', '.join(PREDICTORS.names())}")
    return PREDICTORS.create(name, path=directory) if directory is not None else PREDICTORS.create(name)


def check_trace_sizes(jobs: Iterable[RawJob], source: str) -> None:
    """One line naming the trace and the line of the first job whose ``input_size`` its zoo model cannot take
    (below an image model's smallest, above a transformer's position table: ``horus.graph.input_sizes``), before any
    simulation starts."""
    from horus.errors import HorusInputError
    from horus.graph.input_sizes import check_input_size

    for job in jobs:
        if job.input_size is None or not job.model:
            continue
        try:
            check_input_size(job.model, job.input_size, "input_size")
        except HorusInputError as exc:
            where = f"line {job.line}, " if job.line is not None else ""
            raise HorusInputError(source, f"{where}job {job.job_id!r}: input_size: {exc.message}") from None
