"""Co-location slowdown model and its fit to Gavel's measured pairs.

Model (shared by the ``gavel`` and ``parametric`` truths). Each job ``i`` on a GPU has a solo
utilization ``u_i`` in (0, 1]. Sharing the GPU with the set ``S``, its normalized throughput is

    x_i = 1 / (1 + alpha * u_i**gamma * O_i**beta),     O_i = sum of u_j over j in S, j != i

* alone (``O_i = 0``) ``x_i = 1``; adding a co-runner or a heavier co-runner raises ``O_i`` and
  never speeds anyone up (alpha >= 0, beta > 0);
* ``gamma`` lets busy jobs suffer more than mostly idle ones (Gavel's pairs are asymmetric);
* with alpha = beta = 1, gamma = 0 two saturated jobs get 1/2 each, three 1/3 (pure time slicing).

Fitting: ``u`` of every Gavel job type is a latent parameter, fitted jointly with the scalars
(alpha, beta, gamma) by bounded least squares on the measured normalized throughputs (two
observations per measured ordered pair), then rescaled so the largest latent ``u`` is 1 (only
``alpha * u**(beta+gamma)`` is identified; see ``_pin_scale``). Quality is measured on a seeded 80/20 split of the
*unordered* pairs (so (a, b) and (b, a) never straddle the split); the parameters reported and used
are then refitted on all measured pairs.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np

from horus.errors import HorusInputError
from horus.sources.gavel import GavelThroughputs, load_gavel

FORM = "x_i = 1 / (1 + alpha * u_i**gamma * (sum_{j in S, j != i} u_j)**beta)"
UTIL_BOUNDS = (0.01, 1.0)
PARAM_BOUNDS = {"alpha": (0.0, 20.0), "beta": (0.05, 5.0), "gamma": (0.0, 5.0)}
BOTH_AT_SOLO_MODES = ("keep", "drop")
PARAMS_FILE = "truth_params.json"


@dataclass(frozen=True)
class SlowdownParams:
    alpha: float
    beta: float
    gamma: float


def normalized_throughputs(utils: Sequence[float], params: SlowdownParams) -> list[float]:
    """Normalized throughput of each job sharing one GPU, given their solo utilizations."""
    if len(utils) <= 1:
        return [1.0] * len(utils)
    total = math.fsum(utils)
    alpha, beta, gamma = params.alpha, params.beta, params.gamma
    out = []
    for u in utils:
        others = total - u
        if others < 0.0:  # max(total - u, 0.0), without the call (hot: horus.sim.bounds asks ~100k sets)
            others = 0.0
        out.append(1.0 / (1.0 + alpha * u**gamma * others**beta))
    return out


def load_slowdown_params() -> SlowdownParams:
    """The scalars shipped in ``horus/data/truth_params.json`` (written by ``--write-params``)."""
    ref = resources.files("horus.data").joinpath(PARAMS_FILE)
    try:
        data = json.loads(ref.read_text())
        return SlowdownParams(float(data["alpha"]), float(data["beta"]), float(data["gamma"]))
    except (OSError, json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise HorusInputError(f"horus/data/{PARAMS_FILE}", f"expected alpha, beta, gamma numbers ({exc})") from None


# ---- fitting ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Metrics:
    n: int
    mae: float
    rmse: float
    r2: float
    spearman: float


@dataclass
class FitResult:
    """Fitted slowdown model of one Gavel GPU type."""

    gpu: str
    sha256: str
    seed: int
    params: SlowdownParams  # refitted on all measured pairs
    utils: dict[str, float]  # latent solo utilization per job type (all-pairs fit)
    heldout: Metrics | None  # split fit evaluated on the held-out 20 % of unordered pairs (None: not evaluated)
    heldout_baseline_mae: float | None  # MAE of predicting the training mean for every held-out value
    in_sample: Metrics  # all-pairs fit evaluated on all pairs
    both_at_solo: str  # how the 'both at solo' quirk pairs were handled
    quirks: dict[str, int] = field(default_factory=dict)
    unfitted_types: list[str] = field(default_factory=list)  # types with no measured pair (u left at 0.5)

    def to_dict(self) -> dict[str, object]:
        return {"form": FORM, "gpu": self.gpu, "sha256": self.sha256, "seed": self.seed,
                "params": asdict(self.params), "heldout": asdict(self.heldout) if self.heldout else None,
                "heldout_baseline_mae": self.heldout_baseline_mae, "in_sample": asdict(self.in_sample),
                "both_at_solo": self.both_at_solo, "quirks": dict(self.quirks),
                "unfitted_types": list(self.unfitted_types), "utils": dict(self.utils)}

    def report(self) -> str:
        p, h, s = self.params, self.heldout, self.in_sample
        heldout = "not evaluated" if h is None else (
            f"MAE={h.mae:.4f} RMSE={h.rmse:.4f} R2={h.r2:.3f} Spearman={h.spearman:.3f} ({h.n} obs;"
            f" constant-mean baseline MAE={self.heldout_baseline_mae:.4f})")
        lines = [
            f"Gavel {self.gpu} co-location fit (sha256 {self.sha256[:12]}..., seed {self.seed})",
            f"  form: {FORM}",
            f"  alpha={p.alpha:.4f} beta={p.beta:.4f} gamma={p.gamma:.4f}",
            f"  held-out: {heldout}",
            f"  in-sample ({s.n} obs): MAE={s.mae:.4f} RMSE={s.rmse:.4f} R2={s.r2:.3f} Spearman={s.spearman:.3f}",
            f"  quirks: {self.quirks}; both-at-solo pairs: {self.both_at_solo}",
            "  latent solo utilization: " + ", ".join(f"{k}={v:.2f}" for k, v in sorted(self.utils.items())),
        ]
        if self.unfitted_types:
            lines.append(f"  no measured pair (u=0.5): {', '.join(self.unfitted_types)}")
        return "\n".join(lines)


@dataclass(frozen=True)
class _Observations:
    self_idx: np.ndarray
    other_idx: np.ndarray
    value: np.ndarray
    group: np.ndarray  # index of the unordered pair


def _observations(gavel: GavelThroughputs, types: list[str], both_at_solo: str) -> _Observations:
    index = {t: i for i, t in enumerate(types)}
    groups: dict[tuple[str, str], int] = {}
    rows: list[tuple[int, int, float, int]] = []
    for a, b in sorted(gavel.pairs):
        xa, xb = gavel.normalized_pair(a, b)  # type: ignore[misc]
        if both_at_solo == "drop" and xa == 1.0 and xb == 1.0:
            continue
        g = groups.setdefault((min(a, b), max(a, b)), len(groups))
        rows.append((index[a], index[b], xa, g))
        rows.append((index[b], index[a], xb, g))
    arr = np.array(rows, dtype=float).reshape(-1, 4)
    return _Observations(arr[:, 0].astype(int), arr[:, 1].astype(int), arr[:, 2], arr[:, 3].astype(int))


def _predict(theta: np.ndarray, obs: _Observations, mask: np.ndarray) -> np.ndarray:
    alpha, beta, gamma = theta[:3]
    u = theta[3:]
    return 1.0 / (1.0 + alpha * u[obs.self_idx[mask]] ** gamma * u[obs.other_idx[mask]] ** beta)


def _jacobian(theta: np.ndarray, obs: _Observations, mask: np.ndarray) -> np.ndarray:
    """d prediction / d theta (analytic; the fit is 20x faster than with finite differences)."""
    alpha, beta, gamma = theta[:3]
    u = theta[3:]
    u_self, u_other = u[obs.self_idx[mask]], u[obs.other_idx[mask]]
    base = u_self**gamma * u_other**beta
    q = alpha * base
    dfdq = -1.0 / (1.0 + q) ** 2
    jac = np.zeros((len(q), len(theta)))
    jac[:, 0] = dfdq * base
    jac[:, 1] = dfdq * q * np.log(u_other)
    jac[:, 2] = dfdq * q * np.log(u_self)
    rows = np.arange(len(q))
    jac[rows, 3 + obs.self_idx[mask]] += dfdq * gamma * q / u_self  # one entry per row: plain += is safe
    jac[rows, 3 + obs.other_idx[mask]] += dfdq * beta * q / u_other
    return jac


def _single_threaded_blas() -> contextlib.AbstractContextManager[object]:
    try:
        from threadpoolctl import threadpool_limits  # a scikit-learn dependency
    except ImportError:  # pragma: no cover
        return contextlib.nullcontext()
    return threadpool_limits(1)


def _solve(obs: _Observations, mask: np.ndarray, n_types: int) -> np.ndarray:
    from scipy.optimize import least_squares

    lower = [PARAM_BOUNDS[k][0] for k in ("alpha", "beta", "gamma")] + [UTIL_BOUNDS[0]] * n_types
    upper = [PARAM_BOUNDS[k][1] for k in ("alpha", "beta", "gamma")] + [UTIL_BOUNDS[1]] * n_types
    theta0 = np.array([1.0, 1.0, 1.0] + [0.5] * n_types)
    target = obs.value[mask]
    with _single_threaded_blas():  # tiny SVDs: BLAS threads on a busy machine cost 25x
        result = least_squares(lambda th: _predict(th, obs, mask) - target, theta0,
                               jac=lambda th: _jacobian(th, obs, mask),
                               bounds=(lower, upper), x_scale="jac", max_nfev=2000)
    return _pin_scale(result.x)


def _pin_scale(theta: np.ndarray) -> np.ndarray:
    """Rescale so the largest latent utilization is 1 (predictions are unchanged).

    The model only sees alpha * u_i**gamma * u_j**beta, so (u, alpha) and (c u, alpha c**-(beta+gamma))
    fit equally well; the convention 'the most interfering job type saturates the GPU' fixes c.
    """
    theta = theta.copy()
    scale = 1.0 / float(theta[3:].max())
    theta[3:] *= scale
    theta[0] *= scale ** -(theta[1] + theta[2])
    return theta


def _metrics(pred: np.ndarray, true: np.ndarray) -> Metrics:
    from scipy.stats import spearmanr

    err = pred - true
    ss_tot = float(np.sum((true - true.mean()) ** 2))
    r2 = 1.0 - float(np.sum(err**2)) / ss_tot if ss_tot > 0 else float("nan")
    rho = float(spearmanr(pred, true).statistic) if len(true) > 2 else float("nan")
    return Metrics(len(true), float(np.mean(np.abs(err))), float(np.sqrt(np.mean(err**2))), r2, rho)


def _check_enough(obs: _Observations, gavel: GavelThroughputs) -> None:
    """A fit with a held-out split needs at least two measured pairs (one to fit, one to hold out)."""
    groups = int(obs.group.max()) + 1 if len(obs.value) else 0
    if groups < 2:
        raise HorusInputError(f"gavel/{gavel.gpu}", f"{groups} measured co-located pair(s) with positive "
                                                    f"throughputs; fitting and holding out need at least 2")


def fit_slowdown_model(gavel: GavelThroughputs, seed: int = 0, *, test_fraction: float = 0.2,
                       both_at_solo: str = "keep", evaluate: bool = True) -> FitResult:
    """Fit (alpha, beta, gamma) and per-type latent utilization to ``gavel``'s measured pairs.

    ``evaluate=False`` skips the held-out split fit (half the cost) and leaves ``heldout`` None.
    """
    if both_at_solo not in BOTH_AT_SOLO_MODES:
        raise HorusInputError("both_at_solo", f"expected one of {BOTH_AT_SOLO_MODES}, got {both_at_solo!r}")
    types = gavel.job_types()
    obs = _observations(gavel, types, both_at_solo)
    if len(obs.value) == 0:
        raise HorusInputError(f"gavel/{gavel.gpu}", "no measured co-located pairs to fit")
    heldout, baseline_mae = None, None
    if evaluate:
        _check_enough(obs, gavel)
        n_groups = int(obs.group.max()) + 1
        rng = np.random.default_rng(seed)
        test_groups = rng.permutation(n_groups)[: max(1, round(test_fraction * n_groups))]
        test = np.isin(obs.group, test_groups)
        split_theta = _solve(obs, ~test, len(types))
        heldout = _metrics(_predict(split_theta, obs, test), obs.value[test])
        baseline_mae = float(np.mean(np.abs(obs.value[test] - obs.value[~test].mean())))
    everything = np.ones(len(obs.value), dtype=bool)
    theta = _solve(obs, everything, len(types))
    in_sample = _metrics(_predict(theta, obs, everything), obs.value)
    seen = set(obs.self_idx.tolist())
    return FitResult(
        gpu=gavel.gpu, sha256=gavel.sha256, seed=seed,
        params=SlowdownParams(*(float(v) for v in theta[:3])),
        utils={t: float(theta[3 + i]) for i, t in enumerate(types)},
        heldout=heldout, heldout_baseline_mae=baseline_mae, in_sample=in_sample,
        both_at_solo=f"{both_at_solo} ({gavel.quirks.get('both_at_solo', 0)} such pairs in the file)",
        quirks=dict(gavel.quirks),
        unfitted_types=[t for i, t in enumerate(types) if i not in seen],
    )


# ---- the law on a given input scale -----------------------------------------------------------

@dataclass
class ScalarFit:
    """(alpha, beta, gamma) fitted with each job type's input ``u`` fixed (not latent)."""

    gpu: str
    sha256: str
    seed: int
    inputs: str  # what u is, e.g. "parametric physical utilization (seed 0)"
    params: SlowdownParams
    heldout: Metrics
    heldout_baseline_mae: float
    in_sample: Metrics
    pair_sum: dict[str, float]  # median x_a + x_b and share below 1: measured vs this law, all unordered pairs

    def report(self) -> str:
        p, h, s = self.params, self.heldout, self.in_sample
        ps = self.pair_sum
        return "\n".join([
            f"Gavel {self.gpu} co-location law on fixed inputs: {self.inputs} (sha256 {self.sha256[:12]}..., seed "
            f"{self.seed})",
            f"  form: {FORM}",
            f"  alpha={p.alpha:.4f} beta={p.beta:.4f} gamma={p.gamma:.4f}",
            f"  held-out ({h.n} obs): MAE={h.mae:.4f} RMSE={h.rmse:.4f} R2={h.r2:.3f} Spearman={h.spearman:.3f}"
            f" (constant-mean baseline MAE={self.heldout_baseline_mae:.4f})",
            f"  in-sample ({s.n} obs): MAE={s.mae:.4f} Spearman={s.spearman:.3f}",
            f"  pair sum x_a + x_b over {int(ps['pairs'])} pairs: median measured {ps['median_measured']:.3f}, "
            f"law {ps['median_law']:.3f}; below 1: measured {ps['below_one_measured']:.0%}, law "
            f"{ps['below_one_law']:.0%}; correlation {ps['correlation']:.2f}",
        ])


def fit_scalars(gavel: GavelThroughputs, inputs: dict[str, float], label: str, seed: int = 0, *,
                test_fraction: float = 0.2, both_at_solo: str = "keep") -> ScalarFit:
    """Fit only (alpha, beta, gamma) to ``gavel``'s pairs with ``u`` = ``inputs[type]`` (clipped to
    UTIL_BOUNDS): the law then expects inputs on that scale (e.g. a world's physical utilization)."""
    from scipy.optimize import least_squares

    types = gavel.job_types()
    missing = [t for t in types if t not in inputs]
    if missing:
        raise HorusInputError("inputs", f"no input utilization for {', '.join(missing)}")
    u = np.clip(np.array([inputs[t] for t in types], dtype=float), *UTIL_BOUNDS)
    obs = _observations(gavel, types, both_at_solo)
    _check_enough(obs, gavel)

    def solve(mask: np.ndarray) -> np.ndarray:
        def residual(p: np.ndarray) -> np.ndarray:
            return _predict(np.concatenate([p, u]), obs, mask) - obs.value[mask]

        def jac(p: np.ndarray) -> np.ndarray:
            return _jacobian(np.concatenate([p, u]), obs, mask)[:, :3]

        lower = [PARAM_BOUNDS[k][0] for k in ("alpha", "beta", "gamma")]
        upper = [PARAM_BOUNDS[k][1] for k in ("alpha", "beta", "gamma")]
        with _single_threaded_blas():
            return least_squares(residual, np.array([1.0, 1.0, 1.0]), jac=jac, bounds=(lower, upper),
                                 x_scale="jac", max_nfev=2000).x

    n_groups = int(obs.group.max()) + 1
    rng = np.random.default_rng(seed)
    test = np.isin(obs.group, rng.permutation(n_groups)[: max(1, round(test_fraction * n_groups))])
    split = solve(~test)
    heldout = _metrics(_predict(np.concatenate([split, u]), obs, test), obs.value[test])
    baseline = float(np.mean(np.abs(obs.value[test] - obs.value[~test].mean())))
    everything = np.ones(len(obs.value), dtype=bool)
    params = solve(everything)
    law = _predict(np.concatenate([params, u]), obs, everything)
    per_pair = np.bincount(obs.group) / 2.0  # a pair listed in both orders has 4 observations
    measured_sum = np.bincount(obs.group, weights=obs.value) / per_pair
    law_sum = np.bincount(obs.group, weights=law) / per_pair
    pair_sum = {"pairs": float(len(measured_sum)), "median_measured": float(np.median(measured_sum)),
                "median_law": float(np.median(law_sum)), "below_one_measured": float(np.mean(measured_sum < 1)),
                "below_one_law": float(np.mean(law_sum < 1)),
                "correlation": float(np.corrcoef(measured_sum, law_sum)[0, 1])}
    return ScalarFit(gavel.gpu, gavel.sha256, seed, label, SlowdownParams(*(float(v) for v in params)), heldout,
                     baseline, _metrics(law, obs.value), pair_sum)


def parametric_inputs(gavel: GavelThroughputs, gpu_type_name: str = "V100", seed: int = 0) -> dict[str, float]:
    """The solo utilization the ``parametric`` world gives each Gavel job type: what its law is fed."""
    from horus.gpu_types import PRESETS
    from horus.truth.parametric import ParametricTruth

    world = ParametricTruth(seed=seed, slowdown=SlowdownParams(1.0, 1.0, 1.0))  # solo values only
    return {t: world.solo(t, PRESETS[gpu_type_name]).util for t in gavel.job_types()}


# ---- entry point -----------------------------------------------------------------------------

def params_json(result: FitResult, command: str) -> dict[str, object]:
    """The content of ``truth_params.json``: a handful of scalars plus their provenance."""
    if result.heldout is None or result.heldout_baseline_mae is None:
        raise ValueError("params_json needs a fit with evaluate=True")
    return {
        "form": FORM,
        **asdict(result.params),
        "provenance": {
            "command": command,
            "data_file": "Gavel scheduler/simulation_throughputs.json (MIT)",
            "data_sha256": result.sha256,
            "gpu": result.gpu,
            "seed": result.seed,
            "date": dt.date.today().isoformat(),
            "both_at_solo": result.both_at_solo,
            "heldout_mae": round(result.heldout.mae, 5),
            "heldout_rmse": round(result.heldout.rmse, 5),
            "heldout_spearman": round(result.heldout.spearman, 4),
            "heldout_baseline_mae": round(result.heldout_baseline_mae, 5),
            "in_sample_mae": round(result.in_sample.mae, 5),
        },
    }


def build_parser(prog: str = "python -m horus.truth.fit") -> argparse.ArgumentParser:
    """The options of ``horus truth fit`` (``main`` parses with it)."""
    from horus.validation import NumberArg, path_arg

    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("--gavel", required=True, type=path_arg,
                        help="path to Gavel's simulation_throughputs.json")
    parser.add_argument("--gpu", default="v100", help="Gavel GPU key (v100, p100, k80)")
    parser.add_argument("--seed", type=NumberArg("seed"), default=0,
                        help="seed of the held-out split, 0 to 2**32-1 (default 0)")
    parser.add_argument("--both-at-solo", choices=BOTH_AT_SOLO_MODES, default="keep")
    parser.add_argument("--write-params", nargs="?", const=package_params_path(), default=None, type=path_arg,
                        metavar="PATH",
                        help="write the fitted scalars (default: the package's horus/data/truth_params.json)")
    parser.add_argument("--json", action="store_true", help="print the full result as JSON")
    parser.add_argument("--inputs", choices=("latent", "physical"), default="physical",
                        help="u of each job type: 'physical' = the parametric world's solo utilization, fixed, "
                             "only the 3 scalars fitted (what the parametric truth uses; default); 'latent' = "
                             "fitted per type (Gavel's inferred intensity, used by the gavel truth)")
    return parser


def main(argv: list[str] | None = None, prog: str = "python -m horus.truth.fit") -> int:
    from horus.validation import check_input_path, check_output_path

    args = build_parser(prog).parse_args(argv)
    try:  # every option before any work: a bad --seed or --write-params must not cost a fit, nor end in a traceback
        from horus.validation import check_option

        check_option("--seed", args.seed, "seed")
        check_input_path(args.gavel, "--gavel", "Gavel's simulation_throughputs.json")
        if args.write_params is not None:
            check_output_path(args.write_params, "--write-params", directory=False)
    except HorusInputError as exc:
        print(f"horus: error: {exc}", file=sys.stderr)
        return 2
    if args.inputs == "physical":
        return _main_physical(args)
    try:
        result = fit_slowdown_model(load_gavel(args.gavel, args.gpu), args.seed, both_at_solo=args.both_at_solo)
    except HorusInputError as exc:
        print(f"horus: error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result.to_dict(), indent=2) if args.json else result.report())
    if args.write_params is not None:
        target = args.write_params
        command = (f"python -m horus.truth.fit --gavel <shared>/gavel/simulation_throughputs.json --gpu {args.gpu} "
                   f"--seed {args.seed} --both-at-solo {args.both_at_solo} --write-params")
        if not write_params(target, params_json(result, command)):
            return 2
        print(f"wrote {target}")
    return 0


def package_params_path(name: str = PARAMS_FILE) -> Path:
    """``horus/data/<name>``: where a bare ``--write-params`` writes."""
    return Path(__file__).resolve().parents[1] / "data" / name


def write_params(target: Path, data: dict) -> bool:
    """Write the fitted parameters (creating missing directories); False after a one-line error."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(data, indent=2) + "\n")
    except OSError as exc:
        print(f"horus: error: --write-params: cannot write {target}: {exc.strerror or exc}", file=sys.stderr)
        return False
    return True


def _main_physical(args: argparse.Namespace) -> int:
    try:
        gavel = load_gavel(args.gavel, args.gpu)
        result = fit_scalars(gavel, parametric_inputs(gavel), "parametric physical utilization (seed 0)", args.seed,
                             both_at_solo=args.both_at_solo)
    except HorusInputError as exc:
        print(f"horus: error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(asdict(result), indent=2) if args.json else result.report())
    if args.write_params is not None:
        target = args.write_params
        h = result.heldout
        data = {"form": FORM, **asdict(result.params), "inputs": result.inputs, "provenance": {
            "command": f"horus truth fit --gavel <shared>/gavel/simulation_throughputs.json --gpu {args.gpu} "
                       f"--inputs physical --seed {args.seed} --both-at-solo {args.both_at_solo} --write-params",
            "data_file": "Gavel scheduler/simulation_throughputs.json (MIT)", "data_sha256": result.sha256,
            "gpu": result.gpu, "seed": result.seed, "date": dt.date.today().isoformat(),
            "heldout_mae": round(h.mae, 5), "heldout_rmse": round(h.rmse, 5), "heldout_spearman": round(h.spearman, 4),
            "heldout_baseline_mae": round(result.heldout_baseline_mae, 5),
            "in_sample_mae": round(result.in_sample.mae, 5),
            "pair_sum": {k: round(v, 4) for k, v in result.pair_sum.items()}}}
        if not write_params(target, data):
            return 2
        print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
