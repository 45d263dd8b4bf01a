"""``horus interference train|evaluate|predict``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

GAVEL_GPUS = ("v100", "p100", "k80")
MAX_FOLDS = 100


def _check_common(args: argparse.Namespace) -> None:
    """Options checked before the Gavel file is read (docs/inputs.md)."""
    from horus.errors import HorusInputError
    from horus.plugins import load_all
    from horus.predict.base import PREDICTORS
    from horus.validation import check_option

    check_option("--seed", args.seed, "seed")
    if args.solo_predictor:
        load_all("horus.predict")
        if args.solo_predictor not in PREDICTORS:
            raise HorusInputError("--solo-predictor", f"unknown predictor {args.solo_predictor!r}; known: "
                                                      f"{', '.join(PREDICTORS.names())} ('' for graph features only)")


def _check_folds(folds: int, obs: list, *, skip_below: int | None = None) -> None:
    """``folds`` between 2 and min(MAX_FOLDS, number of co-located sets); below ``skip_below`` means no check."""
    from horus.errors import HorusInputError
    from horus.interference.data import experiment_key

    observations = len({experiment_key(o) for o in obs})

    if skip_below is not None and 0 <= folds < skip_below:
        return
    high = min(MAX_FOLDS, observations)
    if not 2 <= folds <= high:
        raise HorusInputError("--folds", f"expected an integer in [2, {high}] (at most {MAX_FOLDS} and at most the "
                                         f"{observations} measured co-located sets), got {folds}"
                              + ("; 0 or 1 skip the check" if skip_below else ""))


def _load(path: str, gpus: tuple[str, ...], drop_both_at_solo: bool) -> tuple[dict[str, list], str, dict]:
    from horus.interference.data import gavel_observations
    from horus.sources.gavel import load_gavel

    data, quirks, sha = {}, {}, ""
    for gpu in gpus:
        table = load_gavel(path, gpu)
        data[gpu] = gavel_observations(table, drop_both_at_solo=drop_both_at_solo)
        quirks[gpu] = {**table.quirks, "both_at_solo_handling": "dropped" if drop_both_at_solo else "kept"}
        sha = table.sha256
    return data, sha, quirks


def _train(args: argparse.Namespace) -> int:
    from horus.interference import models  # noqa: F401  (registers every model)
    from horus.interference.base import INTERFERENCE_MODELS
    from horus.interference.data import default_features
    from horus.interference.evaluation import default_factory, evaluate_splits, random_splits
    from horus.interference.persistence import save_model

    from horus.validation import OutputDir

    _check_common(args)
    OutputDir(args.out, "--out")  # checked before the data is read
    data, sha, quirks = _load(args.gavel, (args.gpu,), args.drop_both_at_solo)
    features = default_features(args.solo_predictor)
    obs = data[args.gpu]
    _check_folds(args.folds, obs, skip_below=2)
    cv = (evaluate_splits(random_splits(obs, folds=args.folds, seed=args.seed), [args.model],
                          default_factory(features, args.seed))[args.model] if args.folds > 1 else {})
    model = INTERFERENCE_MODELS.create(args.model, features=features, seed=args.seed).fit(obs)
    train_pred = model.predict_observations(obs)
    import numpy as np

    from horus.interference.evaluation import metrics
    fit = metrics(np.array([o.value for o in obs]), train_pred)
    with OutputDir(args.out, "--out"):
        path = save_model(model, args.out, data_sha256=sha, metrics={"train": fit, f"random_{args.folds}fold": cv},
                          extra={"data": {"source": str(args.gavel), "gpu": args.gpu, "observations": len(obs),
                                          "quirks": quirks[args.gpu]}})
    held = f", {args.folds}-fold held-out MAE {cv['mae']:.3f} (Spearman {cv['spearman']:.3f})" if cv else ""
    print(f"{args.model}: train MAE {fit['mae']:.3f}{held}; wrote {path}")
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    from horus.interference import models  # noqa: F401
    from horus.interference.data import default_features
    import sys
    import time

    from horus.errors import HorusInputError
    from horus.interference.models import INTERFERENCE_MODELS
    from horus.interference.evaluation import COMPARED_MODELS, PROTOCOLS, default_factory, format_table

    _check_common(args)
    names = [n.strip() for n in args.models.split(",")] if args.models else list(COMPARED_MODELS)
    unknown = [n for n in names if n not in INTERFERENCE_MODELS]
    if unknown or not names:
        raise HorusInputError("--models", f"expected comma-separated names from {', '.join(INTERFERENCE_MODELS)}, "
                                          f"got {args.models!r}")
    protocols = list(PROTOCOLS) if args.protocol == "all" else [args.protocol]
    gpus = (args.gpu, *(g for g in GAVEL_GPUS if g != args.gpu))
    data, sha, quirks = _load(args.gavel, gpus, args.drop_both_at_solo)
    if "random" in protocols:
        _check_folds(args.folds, data[args.gpu])
    features = default_features(args.solo_predictor)
    if features.predictor_name is None and "summed-util" in names:
        names.remove("summed-util")  # needs predicted solo utilization
    factory = default_factory(features, args.seed)
    results = {}
    start = time.monotonic()
    for i, name in enumerate(protocols, 1):  # progress on stderr: --protocol all runs for minutes
        print(f"horus: [{i}/{len(protocols)}] protocol {name} ({len(names)} models) ...", file=sys.stderr, flush=True)
        results[name] = PROTOCOLS[name](data, names, factory, train_gpu=args.gpu, folds=args.folds, seed=args.seed)
        print(f"horus: [{i}/{len(protocols)}] protocol {name} done, {time.monotonic() - start:.0f} s elapsed",
              file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps({"data_sha256": sha, "quirks": quirks, "feature_names": list(features.names),
                          "results": results}, indent=2))
    else:
        print(f"Gavel data sha256 {sha[:12]}; features: {', '.join(features.names)}")
        print(f"quirks: {json.dumps(quirks)}")
        print(format_table(results))
    return 0


def _predict(args: argparse.Namespace) -> int:
    from horus.interference.data import parse_job_type
    from horus.interference.persistence import load_model

    for job_type in args.job_types:
        parse_job_type(job_type)
    model = load_model(args.model_dir)
    values = model.predict(args.job_types, args.gpu)
    for job_type, value in zip(args.job_types, values):
        print(f"{job_type}\t{value:.3f}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("interference", help="train / evaluate / query interference predictors")
    sub = parser.add_subparsers(dest="interference_command", metavar="ACTION", required=True)

    def data_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("--gavel", required=True, help="Gavel simulation_throughputs.json")
        p.add_argument("--gpu", default="v100", choices=GAVEL_GPUS, help="GPU type to train on")
        p.add_argument("--drop-both-at-solo", action="store_true",
                       help="exclude Gavel pairs where both jobs are exactly at solo throughput (kept by default)")
        p.add_argument("--solo-predictor", default="analytic",
                       help="registered solo predictor for util/memory features ('' for graph features only)")
        p.add_argument("--seed", type=int, default=0)

    train = sub.add_parser("train", help="train a model on Gavel pairs and save it")
    data_args(train)
    train.add_argument("--model", default="iasp", choices=("iasp", "iapp", "lowrank-mc", "summed-util"))
    train.add_argument("--out", required=True, type=Path, help="output directory")
    train.add_argument("--folds", type=int, default=5, help="k-fold held-out check stored in the sidecar (<2: skip)")
    train.set_defaults(func=_train)

    evaluate = sub.add_parser("evaluate", help="compare models under held-out protocols")
    data_args(evaluate)
    evaluate.add_argument("--protocol", default="all", choices=("random", "cold-start", "cross-gpu", "all"))
    evaluate.add_argument("--models", default="", help="comma-separated model names (default: all compared)")
    evaluate.add_argument("--folds", type=int, default=5, help=f"k of the random protocol (2-{MAX_FOLDS})")
    evaluate.add_argument("--json", action="store_true")
    evaluate.set_defaults(func=_evaluate)

    predict = sub.add_parser("predict", help="normalized throughput of each job of a co-located set")
    predict.add_argument("--model-dir", required=True, type=Path)
    predict.add_argument("--gpu", default="v100")
    predict.add_argument("job_types", nargs="+", metavar="JOB_TYPE", help="e.g. resnet50/b64 lstm_lm/b20")
    predict.set_defaults(func=_predict)
