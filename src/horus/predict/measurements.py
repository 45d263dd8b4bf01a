"""Public solo measurements as one list of ``Measurement`` rows (for calibration and evaluation).

Read from a directory laid out like ``../shared/data`` (its README) through the project's loaders:

| dataset | GPU types | target | workloads (zoo / catalog name) |
|---|---|---|---|
| ``gavel`` | K80, P100, V100 | iteration time (1 / isolated steps/s) | Gavel's 7 job types (``sources.gavel``) |
| ``zeus`` | V100, A40, RTX6000, P100 | iteration time (default power limit) | shufflenet_v2_cifar100, resnet50, |
| | | | ncf_ml1m, bert_base_squad |
| ``pollux`` | T4 | single-GPU step time | resnet18_cifar, resnet50, ncf_ml1m, bert_base_squad |
| ``gpumemnet`` | A100-40GB | peak memory, utilization | 6,000 generated MLPs (``mlp_workload``) |

Every row states the job as a user would (``model``, ``input_size``, ``precision``, ``optimizer``) so that
``horus predict`` can be asked the same question (``Measurement.job``). Precision: ``tf32`` -- the framework
default of the time, identical to fp32 before Ampere -- for Gavel, Zeus and Pollux (Zeus's A40 runs used
PyTorch's defaults: TF32 convolutions, and TF32 matmuls in PyTorch 1.7-1.11), ``amp-fp16`` for Pollux's
ImageNet job (apex amp O1), ``fp32`` for GPUMemNet's MLPs (PyTorch >= 1.12 runs matmuls in FP32 by default).
Input size: the catalog model's own (each catalog entry is the dataset's model: ``resnet18_cifar`` at 32 px,
``bert_base_squad`` at 384 tokens, ...); GPUMemNet nets are not catalog models (``model`` None).

Left out, with the reason: DeepSpeech2 (Zeus, Pollux) and YOLOv3 (Pollux) have no zoo model; Zeus's
Sentiment140 BERT rows (sequence length not stated); GPUMemNet's ``horus_formula_not_working.xlsx`` (needs an
xlsx reader the project does not depend on, and states no batch size).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from horus.errors import HorusInputError
from horus.jobs import JobSpec
from horus.predict.workload import Workload, catalog_workload, mlp_workload

# Gavel job-type model -> optimizer of Gavel's workload implementations (ResNets: SGD with momentum; the
# PyTorch word-language-model example updates weights with plain SGD; the others use Adam).
GAVEL_OPTIMIZER = {"resnet18_cifar": "momentum", "resnet50": "momentum", "lstm_lm": "sgd", "transformer": "adam",
                   "recoder": "adam", "cyclegan": "adam", "a3c": "adam"}
GAVEL_GPUS = {"k80": "K80", "p100": "P100", "v100": "V100"}
ZEUS_MODELS = {("cifar100", "shufflenetv2"): "shufflenet_v2_cifar100", ("imagenet", "resnet50"): "resnet50",
               ("movielens-1m", "ncf"): "ncf_ml1m", ("squad", "bert_base_uncased"): "bert_base_squad"}
# Pollux artifact scripts (petuum/adaptdl benchmark/models/*): CIFAR-10 and ImageNet SGD with momentum, ImageNet
# under apex amp (``amp.initialize`` default O1), BERT SQuAD with AdamW in fp32, NCF with Adam.
POLLUX_MODELS = {"cifar10": ("resnet18_cifar", "momentum", False), "imagenet": ("resnet50", "momentum", True),
                 "ncf": ("ncf_ml1m", "adam", False), "bert": ("bert_base_squad", "adamw", False)}
GPUMEMNET_OPTIMIZER = "adam"  # assumption: the GPUMemNet data does not record the optimizer
DATASETS = ("gavel", "zeus", "pollux", "gpumemnet")


@dataclass(frozen=True)
class Measurement:
    dataset: str
    workload: Workload
    family: str  # model family (catalog), or mlp-<arch> for GPUMemNet nets
    batch: int
    gpu: str  # horus.gpu_types spec name
    optimizer: str
    iter_time_s: float | None = None
    util: float | None = None  # fraction
    mem_mib: float | None = None
    precision: str = "tf32"  # horus.jobs.PRECISIONS (Pollux's ImageNet job: amp-fp16, apex amp O1)
    model: str | None = None  # catalog model name (None: not a catalog model, e.g. a GPUMemNet MLP)
    input_size: int | None = None  # the input size the run used (catalog units)

    @property
    def amp(self) -> bool:
        """Mixed precision (amp-fp16 or bf16)."""
        return self.precision in ("amp-fp16", "bf16")

    @property
    def key(self) -> str:
        return f"{self.workload.name}/b{self.batch}"

    def job(self, stated: bool = True) -> JobSpec:
        """The job as ``horus predict`` builds it: with the run's input size, precision and optimizer
        (``stated``), or stating nothing (catalog size, default precision, default optimizer)."""
        if self.model is None:
            raise HorusInputError(self.workload.name, "not a catalog model: no job a user could submit")
        if not stated:
            return JobSpec("ref", 0.0, 1, self.model, self.batch, 1.0)
        return JobSpec("ref", 0.0, 1, self.model, self.batch, 1.0, input_size=self.input_size,
                       precision=self.precision, optimizer=self.optimizer)


def _catalog_row(dataset: str, model: str, batch: int, gpu: str, optimizer: str, precision: str = "tf32",
                 **targets: float) -> Measurement:
    from horus.catalog import load_catalog

    w = catalog_workload(model)
    return Measurement(dataset, w, w.family, batch, gpu, optimizer, precision=precision, model=model,
                       input_size=load_catalog()[model].input_size, **targets)


def gavel_measurements(path: Path) -> list[Measurement]:
    from horus.jobs import parse_job_type
    from horus.sources.gavel import load_gavel

    out = []
    for gavel_gpu, gpu in GAVEL_GPUS.items():
        table = load_gavel(path, gavel_gpu)
        for job_type, steps in sorted(table.solo.items()):
            if steps <= 0:
                continue  # unmeasured isolated throughput
            model, batch = parse_job_type(job_type)
            out.append(_catalog_row("gavel", model, batch, gpu, GAVEL_OPTIMIZER[model], iter_time_s=1.0 / steps))
    return out


def zeus_measurements(root: Path) -> list[Measurement]:
    from horus.sources.zeus import GPU_FILES, load_zeus

    out = []
    for gpu in GPU_FILES:
        for r in load_zeus(root, gpu):
            model = ZEUS_MODELS.get((r.dataset, r.network))
            if model is None:
                continue
            out.append(_catalog_row("zeus", model, r.batch_size, gpu, r.optimizer, iter_time_s=r.iter_time_s))
    return out


def pollux_measurements(root: Path) -> list[Measurement]:
    from horus.sources.pollux import GPU, load_pollux

    out = []
    for name, (model, optimizer, amp) in POLLUX_MODELS.items():
        for r in load_pollux(root, name):
            out.append(_catalog_row("pollux", model, r.batch_size, GPU, optimizer, "amp-fp16" if amp else "tf32",
                                    iter_time_s=r.iter_time_s))
    return out


def gpumemnet_measurements(root: Path) -> list[Measurement]:
    from horus.sources.gpumemnet import GPU, load_gpumemnet

    return [Measurement("gpumemnet", mlp_workload(r.run_id, r.inputs, r.layers), f"mlp-{r.arch}", r.batch_size, GPU,
                        GPUMEMNET_OPTIMIZER, util=r.util_pct / 100.0, mem_mib=r.max_mem_mib, precision="fp32",
                        input_size=r.inputs)
            for r in load_gpumemnet(root)]


def source_files(data_root: str | Path, datasets: tuple[str, ...] = DATASETS) -> dict[str, str]:
    """sha256 of every file ``load_measurements`` reads for ``datasets``, keyed by path relative to ``data_root``."""
    from horus.hashing import sha256_file

    root = Path(data_root)
    patterns = {"gavel": ["gavel/simulation_throughputs.json"], "zeus": ["zeus/summary_power_*.csv"],
                "pollux": [f"pollux/{m}/placements.csv" for m in POLLUX_MODELS],
                "gpumemnet": ["gpumemnet/mlp_data_step*.csv"]}
    files = sorted({f for d in datasets for pat in patterns[d] for f in root.glob(pat)})
    return {str(f.relative_to(root)): sha256_file(f) for f in files}


def load_measurements(data_root: str | Path, datasets: tuple[str, ...] = DATASETS) -> list[Measurement]:
    """Every measurement of ``datasets`` under ``data_root`` (a directory laid out like ``../shared/data``)."""
    root = Path(data_root)
    if not root.is_dir():
        raise HorusInputError(str(root), "reference data directory not found (expected ../shared/data's layout)")
    unknown = [d for d in datasets if d not in DATASETS]
    if unknown:
        raise HorusInputError("--datasets", f"expected names from {', '.join(DATASETS)}, got {unknown[0]!r}")
    loaders = {"gavel": lambda: gavel_measurements(root / "gavel" / "simulation_throughputs.json"),
               "zeus": lambda: zeus_measurements(root / "zeus"), "pollux": lambda: pollux_measurements(root / "pollux"),
               "gpumemnet": lambda: gpumemnet_measurements(root / "gpumemnet")}
    return [m for d in datasets for m in loaders[d]()]
