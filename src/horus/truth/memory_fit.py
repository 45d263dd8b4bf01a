"""Fit the memory truth's deviation on GPUMemNet's measured MLP trainings (``horus truth fit-memory``).

Each GPUMemNet run (one generated MLP trained ~1 min on an A100 40 GB, ``horus.sources.gpumemnet``) is
described as a ``ModelInfo`` and put through ``horus.truth.memory.training_memory_mib`` (Adam, fp32), the
formula the analytic predictor uses. Parameters are the run's own count; saved activations per sample are
the input plus every layer's output, 4 bytes per element (a dropout mask 1 byte, ``Identity`` nothing).

The measured peak is whole-device usage (``nvsm``) including the CUDA context: ~1,450 MiB for a net of a few
kilobytes, against the formula's constant ``CUDA_CONTEXT_MIB``. A ratio of totals would measure that gap (a
property of the machine, not of the model), so the fit separates it:

* baseline: the median measured peak of the nets whose formula model part (the total less the context) is
  below ``BASELINE_MAX_MIB``: the device's fixed cost on that machine (reported, not applied);
* deviation ``d = (measured - baseline) / (formula - CUDA_CONTEXT_MIB)`` over the runs with a model part of at
  least ``MIN_MODEL_MIB`` (below it the ratio is dominated by the baseline's run-to-run spread);
* the distribution of ``ln d``: its ``QUANTILE_PROBS`` quantiles (sampled by linear interpolation of the
  inverse CDF), mean and standard deviation. Fit error: the Kolmogorov-Smirnov distance of a log-normal
  (a normal on ``ln d``) and of the quantile form, in-sample and fitted on one step file, tested on the other.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import math
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from horus.catalog import ModelInfo
from horus.errors import HorusInputError
from horus.truth.memory import CUDA_CONTEXT_MIB, training_memory_mib

BASELINE_MAX_MIB = 5.0
MIN_MODEL_MIB = 100.0
QUANTILE_PROBS = (0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999)
SIZE_BINS_MIB = (100.0, 200.0, 400.0, 800.0, 1600.0, math.inf)
PARAMS_FILE = "memory_deviation.json"
OPTIMIZER = "adam"  # GPUMemNet does not record the optimizer (as horus.predict.measurements assumes)


@dataclass(frozen=True)
class MemoryRow:
    """One run: measured peak and the formula's total, MiB."""

    source: str  # step file
    measured_mib: float
    formula_mib: float

    @property
    def model_mib(self) -> float:
        return self.formula_mib - CUDA_CONTEXT_MIB


@dataclass
class MemoryFit:
    """The fitted distribution of ln(measured model part / formula model part) and its error."""

    data_sha256: dict[str, str]
    runs: int
    baseline_runs: int
    baseline_mib: float  # median measured peak of the near-empty nets
    baseline_iqr_mib: tuple[float, float]
    total_log_ratio_mean: float  # ln(measured / formula) of totals, all runs: the context gap, for the record
    fitted_runs: int
    mean: float
    std: float
    probs: tuple[float, ...]
    quantiles: tuple[float, ...]
    ks_lognormal: float  # normal on ln d with the mean and std above
    ks_lognormal_robust: float  # normal on ln d with the median and IQR / 1.349
    ks_quantiles: float
    ks_quantiles_cross: dict[str, float]  # "fit step1 -> test step2" etc.
    by_size: list[dict[str, float]]  # mean and std of ln d per formula model-part bin (MiB)

    def report(self) -> str:
        q = dict(zip(self.probs, self.quantiles))
        cross = ", ".join(f"{k} {v:.3f}" for k, v in self.ks_quantiles_cross.items())
        head = f"GPUMemNet MLPs on A100 40 GB: {self.runs} runs; formula training_memory_mib ({OPTIMIZER}, fp32)"
        totals = (f"  totals: mean ln(measured / formula) = {self.total_log_ratio_mean:.3f} (the context gap: measured "
                  f"baseline {self.baseline_mib:.0f} MiB, IQR {self.baseline_iqr_mib[0]:.0f}-"
                  f"{self.baseline_iqr_mib[1]:.0f}, over {self.baseline_runs} nets with a model part < "
                  f"{BASELINE_MAX_MIB:g} MiB; formula context {CUDA_CONTEXT_MIB:g})")
        fitted = (f"  deviation d = (measured - baseline) / (formula - context), {self.fitted_runs} runs with a model "
                  f"part >= {MIN_MODEL_MIB:g} MiB")
        moments = (f"  ln d: mean {self.mean:.4f} std {self.std:.4f} (d: median {math.exp(q[0.5]):.3f}, "
                   f"p1 {math.exp(q[0.01]):.3f}, p99 {math.exp(q[0.99]):.3f})")
        quantiles = "  quantiles of ln d: " + ", ".join(f"p{100 * p:g} {v:.4f}" for p, v in q.items())
        error = (f"  fit error (Kolmogorov-Smirnov): log-normal {self.ks_lognormal:.3f} (robust median/IQR fit "
                 f"{self.ks_lognormal_robust:.3f}); quantile form in-sample {self.ks_quantiles:.3f}, across files "
                 f"{cross}")
        sizes = "  by model part (MiB): " + "; ".join(
            f"{b['lo']:g}-{b['hi']:g}: n {b['n']:.0f} mean {b['mean']:.3f} std {b['std']:.3f}" for b in self.by_size)
        lines = (head, totals, fitted, moments, quantiles, error, sizes)
        return "\n".join(lines)

    def params_json(self, command: str) -> dict[str, object]:
        """The content of ``horus/data/memory_deviation.json``: the quantiles plus their provenance and error."""
        return {
            "form": "mem' = context + (mem - context) x d, ln d ~ linear interpolation of these quantiles; "
                    "context = horus.truth.memory.CUDA_CONTEXT_MIB",
            "probs": list(self.probs), "log_quantiles": [round(v, 5) for v in self.quantiles],
            "log_mean": round(self.mean, 5), "log_std": round(self.std, 5),
            "provenance": {
                "command": command,
                "data_files": "itu-rad/GPUMemNet Datasets/MLP mlp_data_step{1,2}.csv (Apache-2.0), A100 40 GB",
                "data_sha256": self.data_sha256, "date": dt.date.today().isoformat(),
                "formula": f"horus.truth.memory.training_memory_mib ({OPTIMIZER}, fp32)",
                "runs": self.runs, "fitted_runs": self.fitted_runs, "min_model_mib": MIN_MODEL_MIB,
                "baseline_mib": self.baseline_mib, "total_log_ratio_mean": round(self.total_log_ratio_mean, 4),
                "ks_lognormal": round(self.ks_lognormal, 4), "ks_lognormal_robust": round(self.ks_lognormal_robust, 4),
                "ks_quantiles": round(self.ks_quantiles, 4),
                "ks_quantiles_cross": {k: round(v, 4) for k, v in self.ks_quantiles_cross.items()},
                "limitation": "MLPs only, one GPU type (A100), optimizer not recorded (Adam assumed): CNN and "
                              "transformer deviations (cuDNN workspaces, fragmentation, attention buffers) may be "
                              "larger and are not represented",
            },
        }


def mlp_info(name: str, inputs: int, layers: tuple[tuple[str, int, int], ...]) -> ModelInfo:
    """A GPUMemNet net as the formula's input (only ``params`` and ``activation_bytes_per_sample`` matter)."""
    saved = 4.0 * inputs
    for layer_type, out, _ in layers:
        kind = layer_type.lower()
        saved += 0.0 if kind == "identity" else (1.0 if kind == "dropout" else 4.0) * out
    return ModelInfo(name=name, family="mlp", params=sum(p for _, _, p in layers), forward_flops_per_sample=0.0,
                     train_flops_per_sample=0.0, activation_bytes_per_sample=saved, input_size=inputs,
                     depth=len(layers), op_counts={}, source="gpumemnet")


def memory_rows(root: str | Path) -> list[MemoryRow]:
    """Measured peak and formula total of every GPUMemNet run under ``root``."""
    from horus.sources.gpumemnet import load_gpumemnet

    return [MemoryRow(r.run_id.split(":")[0], r.max_mem_mib,
                      training_memory_mib(mlp_info(r.run_id, r.inputs, r.layers), r.batch_size, OPTIMIZER))
            for r in load_gpumemnet(root)]


def quantile_cdf(x: np.ndarray, probs: np.ndarray, quantiles: np.ndarray) -> np.ndarray:
    """CDF of the quantile form (linear between quantiles; the outer ``probs`` are point masses at the ends)."""
    return np.where(x < quantiles[0], 0.0, np.where(x >= quantiles[-1], 1.0, np.interp(x, quantiles, probs)))


def ks_distance(sample: np.ndarray, cdf: np.ndarray) -> float:
    """Kolmogorov-Smirnov distance between a sample (sorted) and a model's CDF at those points."""
    n = len(sample)
    upper = np.arange(1, n + 1) / n
    return float(max(np.max(upper - cdf), np.max(cdf - (upper - 1.0 / n))))


def _normal_cdf(x: np.ndarray, mean: float, std: float) -> np.ndarray:
    from scipy.special import ndtr

    return ndtr((x - mean) / std)


def fit_memory_deviation(rows: list[MemoryRow], data_sha256: dict[str, str] | None = None) -> MemoryFit:
    """The fit of the module docstring on ``rows``."""
    model = np.array([r.model_mib for r in rows])
    measured = np.array([r.measured_mib for r in rows])
    tiny = model < BASELINE_MAX_MIB
    big = model >= MIN_MODEL_MIB
    if tiny.sum() < 10 or big.sum() < 100:
        raise HorusInputError("gpumemnet", f"{int(tiny.sum())} near-empty nets and {int(big.sum())} nets with a model "
                                           f"part >= {MIN_MODEL_MIB:g} MiB; the fit needs >= 10 and >= 100")
    baseline = float(np.median(measured[tiny]))
    excess = measured - baseline
    keep = big & (excess > 0)
    log_d = np.log(excess[keep] / model[keep])
    sources = np.array([r.source for r in rows])[keep]
    probs = np.array(QUANTILE_PROBS)

    def quantiles(x: np.ndarray) -> np.ndarray:
        return np.quantile(x, probs)

    ordered = np.sort(log_d)
    mean, std = float(log_d.mean()), float(log_d.std())
    qs = quantiles(log_d)
    robust_std = float(np.subtract(*np.percentile(log_d, [75, 25]))) / 1.349
    cross = {}
    names = sorted(set(sources.tolist()))
    for a in names:
        for b in names:
            if a != b:
                test = np.sort(log_d[sources == b])
                cross[f"fit {a} -> test {b}"] = ks_distance(test, quantile_cdf(test, probs, quantiles(log_d[sources == a])))
    by_size = []
    for lo, hi in itertools.pairwise(SIZE_BINS_MIB):
        sel = (model[keep] >= lo) & (model[keep] < hi)
        if sel.any():
            by_size.append({"lo": lo, "hi": hi, "n": float(sel.sum()), "mean": float(log_d[sel].mean()),
                            "std": float(log_d[sel].std())})
    return MemoryFit(
        data_sha256=dict(data_sha256 or {}), runs=len(rows), baseline_runs=int(tiny.sum()), baseline_mib=baseline,
        baseline_iqr_mib=(float(np.percentile(measured[tiny], 25)), float(np.percentile(measured[tiny], 75))),
        total_log_ratio_mean=float(np.mean(np.log(measured / (model + CUDA_CONTEXT_MIB)))),
        fitted_runs=int(keep.sum()), mean=mean, std=std, probs=tuple(QUANTILE_PROBS),
        quantiles=tuple(float(v) for v in qs),
        ks_lognormal=ks_distance(ordered, _normal_cdf(ordered, mean, std)),
        ks_lognormal_robust=ks_distance(ordered, _normal_cdf(ordered, float(np.median(log_d)), robust_std)),
        ks_quantiles=ks_distance(ordered, quantile_cdf(ordered, probs, qs)), ks_quantiles_cross=cross, by_size=by_size)


def data_hashes(root: str | Path) -> dict[str, str]:
    from horus.hashing import sha256_file
    from horus.sources.gpumemnet import FILES

    return {name: sha256_file(Path(root) / name) for name in FILES}


def build_parser(prog: str = "horus truth fit-memory") -> argparse.ArgumentParser:
    """The options of ``horus truth fit-memory`` (``main`` parses with it)."""
    from horus.truth.fit import package_params_path
    from horus.validation import path_arg

    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("--gpumemnet", required=True, type=path_arg,
                        help="directory with GPUMemNet's mlp_data_step1.csv and mlp_data_step2.csv")
    parser.add_argument("--json", action="store_true", help="print the full result as JSON")
    parser.add_argument("--write-params", nargs="?", const=package_params_path(PARAMS_FILE), default=None,
                        type=path_arg, metavar="PATH",
                        help=f"write the fitted scalars (default: the package's horus/data/{PARAMS_FILE})")
    return parser


def main(argv: list[str] | None = None, prog: str = "horus truth fit-memory") -> int:
    from horus.truth.fit import write_params
    from horus.validation import check_input_path, check_output_path

    args = build_parser(prog).parse_args(argv)
    try:
        check_input_path(args.gpumemnet, "--gpumemnet", "GPUMemNet's data directory", directory=True)
        if args.write_params is not None:  # before the fit: an unwritable target must not cost it
            check_output_path(args.write_params, "--write-params", directory=False)
        result = fit_memory_deviation(memory_rows(args.gpumemnet), data_hashes(args.gpumemnet))
    except HorusInputError as exc:
        print(f"horus: error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(asdict(result), indent=2) if args.json else result.report())
    if args.write_params is not None:
        target = args.write_params
        if not write_params(target, result.params_json(f"{prog} --gpumemnet <shared>/gpumemnet --write-params")):
            return 2
        print(f"wrote {target}", file=sys.stderr if args.json else sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(prog="python -m horus.truth.memory_fit"))
