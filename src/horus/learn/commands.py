"""CLI: ``horus predictor train|evaluate`` and ``horus predict``."""

from __future__ import annotations

import argparse
import importlib
import json
from pathlib import Path
from typing import Any

from horus.errors import HorusInputError

DEFAULT_OUT = "learned-predictor"


def register(subparsers: Any) -> None:
    predictor = subparsers.add_parser("predictor", help="train / evaluate learned predictors on profiling data")
    sub = predictor.add_subparsers(dest="predictor_command", metavar="ACTION", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("data", metavar="DATA", help="profile table (Parquet or CSV, horus.profiling.schema)")
        p.add_argument("--seed", type=int, default=0, help="seed of k-fold shuffling and the models (default 0)")
        p.add_argument("--folds", type=int, default=5, help="k of k-fold cross-validation (default 5)")
        p.add_argument("--candidates", default=None,
                       help="comma-separated candidates (default: all available; see docs/predictors.md)")
        p.add_argument("--json", action="store_true", help="print JSON instead of a table")

    train = sub.add_parser("train", help="evaluate candidates, keep the best per target, save a model directory")
    common(train)
    train.add_argument("--out", default=DEFAULT_OUT, help=f"output model directory (default ./{DEFAULT_OUT})")
    train.set_defaults(func=run_train)

    evaluate = sub.add_parser("evaluate", help="print the metrics table of every candidate x protocol")
    common(evaluate)
    evaluate.set_defaults(func=run_evaluate)

    predict = subparsers.add_parser("predict", help="predict a job's solo util / memory / iteration time")
    predict.add_argument("model", metavar="MODEL", help="catalog model name, e.g. resnet50")
    predict.add_argument("--batch", type=int, required=True, help="per-GPU batch size")
    predict.add_argument("--gpu", required=True, help="GPU type preset (V100, A100-80GB, H100, ...)")
    predict.add_argument("--predictor-dir", default=None,
                         help="learned model directory (default: the analytic predictor)")
    predict.add_argument("--precision", choices=("fp32", "amp"), default="fp32",
                         help="precision for the learned predictor (default fp32)")
    predict.add_argument("--json", action="store_true", help="print JSON")
    predict.set_defaults(func=run_predict)


def _candidate_names(arg: str | None) -> list[str] | None:
    if arg is None:
        return None
    from horus.learn.candidates import CANDIDATES

    names = [n.strip() for n in arg.split(",") if n.strip()]
    unknown = [n for n in names if n not in CANDIDATES]
    if unknown or not names:
        raise HorusInputError("--candidates", f"expected names from {', '.join(CANDIDATES)}, got {arg!r}")
    return names


def _check(args: argparse.Namespace) -> None:
    from horus.validation import check_option

    check_option("--seed", args.seed, "seed")
    check_option("--folds", args.folds, "folds")


def run_evaluate(args: argparse.Namespace) -> int:
    from horus.learn.candidates import resolve_candidates
    from horus.learn.dataset import load_profiles
    from horus.learn.evaluation import cross_validate, format_table
    from horus.learn.training import protocols_for

    _check(args)
    data = load_profiles(args.data)
    candidates = resolve_candidates(_candidate_names(args.candidates))
    rows = cross_validate(data, candidates, protocols_for(data), folds=args.folds, seed=args.seed)
    if args.json:
        print(json.dumps({"data": data.source, "sha256": data.sha256, "rows": len(data),
                          "metrics": [r.as_dict() for r in rows]}, indent=2))
    else:
        print(f"{data.source}: {len(data)} configurations ({data.rows_not_ok} non-ok rows dropped), "
              f"families {', '.join(sorted(set(data.families)))}")
        print(format_table(rows))
    return 0


def run_train(args: argparse.Namespace) -> int:
    from horus.learn.dataset import load_profiles
    from horus.learn.evaluation import format_table
    from horus.learn.persistence import save_trained
    from horus.learn.training import train_predictors

    from horus.validation import OutputDir

    _check(args)
    OutputDir(Path(args.out), "--out")  # checked before the data is read
    data = load_profiles(args.data)
    trained = train_predictors(data, seed=args.seed, folds=args.folds,
                               candidate_names=_candidate_names(args.candidates))
    with OutputDir(Path(args.out), "--out"):
        sidecar = save_trained(trained, args.out)
    if args.json:
        print(json.dumps({"out": str(args.out), "choices": trained.choices}, indent=2))
    else:
        print(format_table(trained.metrics))
        for target, choice in trained.choices.items():
            print(f"{target}: {choice['candidate']} ({choice['protocol']} {choice['metric']} {choice['value']:.4g})")
        print(f"saved {sidecar}")
    return 0


def _analytic_predictor() -> Any:
    from horus.predict.base import PREDICTORS

    try:
        importlib.import_module("horus.predict.analytic")
    except ModuleNotFoundError as exc:
        if exc.name != "horus.predict.analytic":
            raise
    if "analytic" not in PREDICTORS:
        raise HorusInputError("horus predict", "the analytic predictor is not installed; pass --predictor-dir DIR")
    return PREDICTORS.create("analytic")


def run_predict(args: argparse.Namespace) -> int:
    from horus.catalog import model_info
    from horus.jobs import JobSpec
    from horus.learn.gpus import resolve_gpu

    from horus.validation import check_option

    check_option("--batch", args.batch, "batch_size", allow_none=False)
    model_info(args.model)  # unknown model -> HorusInputError
    gpu = resolve_gpu(args.gpu, source="--gpu")
    if args.predictor_dir is not None:
        from horus.learn.predictor import LearnedPredictor

        predictor = LearnedPredictor(args.predictor_dir, precision=args.precision)
    else:
        predictor = _analytic_predictor()
    job = JobSpec(job_id="cli", submit_time=0.0, num_gpus=1, model=args.model, batch_size=args.batch, iterations=1)
    pred = predictor.predict(job, gpu)
    if args.json:
        print(json.dumps({"job_type": job.job_type, "gpu": gpu.name, "util": pred.util, "mem_mib": pred.mem_mib,
                          "iter_time_s": pred.iter_time_s, "predictor": predictor.describe()}, indent=2, default=str))
    else:
        print(f"{job.job_type} on {gpu.name} ({predictor.name}): util {100 * pred.util:.1f} %, "
              f"memory {pred.mem_mib:.0f} MiB, iteration {pred.iter_time_s:.4g} s")
    return 0
