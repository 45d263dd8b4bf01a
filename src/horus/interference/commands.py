"""``horus interference train|evaluate|predict``."""

from __future__ import annotations

import argparse
import json
import sys

from horus.sim import options as opt
from horus.validation import NumberArg, check_input_path, path_arg

GAVEL_GPUS = ("v100", "p100", "k80")
# Names of horus.interference.evaluation.PROTOCOLS (kept here so that building the parser imports no numpy).
PROTOCOL_NAMES = ("random", "cold-start", "cross-gpu", "leave-one-gpu-out", "cold-start-cross-gpu")
MAX_FOLDS = 100


def _check_common(args: argparse.Namespace) -> None:
    """Options checked before the Gavel file is read (docs/inputs.md)."""
    from horus.errors import HorusInputError
    from horus.plugins import load_all
    from horus.predict.base import PREDICTORS
    from horus.validation import check_option

    check_option("--seed", args.seed, "seed")
    check_input_path(args.gavel, "--gavel", "Gavel's simulation_throughputs.json")
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
    output = OutputDir(args.out, "--out")  # checked before the data is read
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
    with output:
        path = save_model(model, args.out, data_sha256=sha, metrics={"train": fit, f"random_{args.folds}fold": cv},
                          extra={"data": {"source": str(args.gavel), "gpu": args.gpu, "observations": len(obs),
                                          "quirks": quirks[args.gpu]}})
    held = f", {args.folds}-fold held-out MAE {cv['mae']:.3f} (Spearman {cv['spearman']:.3f})" if cv else ""
    print(f"{args.model}: train MAE {fit['mae']:.3f}{held}; wrote {path}")
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    from horus.errors import HorusInputError
    from horus.interference import models  # noqa: F401
    from horus.interference.data import default_features
    from horus.interference.evaluation import COMPARED_MODELS, PROTOCOLS, default_factory, format_table
    from horus.interference.models import INTERFERENCE_MODELS

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
    if features.predictor_name is None:  # the summed-utilization rules need predicted solo utilization
        names = [n for n in names if not n.startswith("summed-util")]
    factory = default_factory(features, args.seed)
    results = {name: _run_protocol(name, i, len(protocols), data, names, factory, args)
               for i, name in enumerate(protocols, 1)}
    if args.json:
        print(json.dumps({"data_sha256": sha, "quirks": quirks, "feature_names": list(features.names),
                          "results": results}, indent=2))
    else:
        print(f"Gavel data sha256 {sha[:12]}; features: {', '.join(features.names)}")
        print(f"quirks: {json.dumps(quirks)}")
        print(format_table(results))
    return 0


def _run_protocol(name: str, index: int, count: int, data: dict[str, list], models: list[str], factory: object,
                  args: argparse.Namespace) -> dict:
    """One protocol with a progress bar on stderr (one step per model fit; --protocol all runs for minutes)."""
    from tqdm import tqdm

    from horus.interference.data import job_types_of
    from horus.interference.evaluation import PROTOCOLS

    splits = {"random": args.folds, "cold-start": len(job_types_of(data[args.gpu])), "cross-gpu": len(data) - 1,
              "leave-one-gpu-out": len(data)}
    total = splits.get(name, 0) * len(models)
    bar = tqdm(total=total, unit="fit", desc=f"[{index}/{count}] {name}", file=sys.stderr, disable=None)
    if bar.disable:  # not a terminal: one line per protocol instead of a bar
        print(f"horus: [{index}/{count}] protocol {name}: up to {total} model fits", file=sys.stderr, flush=True)

    def counted(model_name: str) -> object:
        bar.update(1)
        return factory(model_name)  # type: ignore[operator]

    try:
        return PROTOCOLS[name](data, models, counted, train_gpu=args.gpu, folds=args.folds, seed=args.seed)
    finally:
        bar.close()


def predict_gpu(name: str) -> object:
    """``--gpu`` of ``predict``: a Gavel key (v100, p100, k80) as is, or a preset GPU type by name (any case);
    anything else is a HorusInputError (it would silently be predicted as a 16 GiB V100-speed card)."""
    from horus.errors import HorusInputError
    from horus.gpu_types import PRESETS

    if name.lower() in GAVEL_GPUS:
        return name.lower()
    by_lower = {key.lower(): value for key, value in PRESETS.items()}
    if name.lower() in by_lower:
        return by_lower[name.lower()]
    raise HorusInputError("--gpu", f"unknown GPU type {name!r}; expected one of {', '.join(GAVEL_GPUS)} or a preset: "
                                   f"{', '.join(PRESETS)}")


def _predict(args: argparse.Namespace) -> int:
    from horus.interference.persistence import load_model
    from horus.jobs import parse_job_type

    from horus.validation import LIMITS

    LIMITS["set_size"].check(len(args.job_types), "JOB_TYPE", "jobs sharing one GPU")
    for job_type in args.job_types:
        parse_job_type(job_type)
    gpu = predict_gpu(args.gpu)
    model = load_model(args.model_dir)
    values = model.predict(args.job_types, gpu)
    for job_type, value in zip(args.job_types, values):
        print(f"{job_type}\t{value:.3f}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("interference", help="train / evaluate / query interference predictors")
    sub = parser.add_subparsers(dest="interference_command", metavar="ACTION", required=True)

    def data_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("--gavel", required=True, type=path_arg, help="Gavel simulation_throughputs.json")
        p.add_argument("--gpu", default="v100", choices=GAVEL_GPUS, help="GPU type to train on")
        p.add_argument("--drop-both-at-solo", action="store_true",
                       help="exclude Gavel pairs where both jobs are exactly at solo throughput (kept by default)")
        p.add_argument("--solo-predictor", default="analytic",
                       help="registered solo predictor for util/memory features ('' for graph features only)")
        p.add_argument("--seed", type=NumberArg(opt.SEED), default=0, help="0 to 2**32-1 (default 0)")

    train = sub.add_parser("train", help="train a model on Gavel pairs and save it")
    data_args(train)
    train.add_argument("--model", default="iasp", choices=("iasp", "iapp", "lowrank-mc", "summed-util", "physical",
                                                           "contention", "contention-zeroshot"))
    train.add_argument("--out", required=True, type=path_arg, help="output directory")
    train.add_argument("--folds", type=NumberArg(opt.TRAIN_FOLDS), default=5,
                       help=f"k-fold held-out check stored in the sidecar, 2 to {MAX_FOLDS} and at most the measured "
                            "co-located sets (0 or 1: skip; default 5)")
    train.set_defaults(func=_train)

    evaluate = sub.add_parser("evaluate", help="compare models under held-out protocols")
    data_args(evaluate)
    evaluate.add_argument("--protocol", default="all", choices=(*PROTOCOL_NAMES, "all"))
    evaluate.add_argument("--models", default="", help="comma-separated model names (default: all compared)")
    evaluate.add_argument("--folds", type=NumberArg(opt.EVALUATE_FOLDS), default=5,
                          help=f"k of the random protocol, 2 to {MAX_FOLDS} and at most the measured co-located sets "
                               "(default 5)")
    evaluate.add_argument("--json", action="store_true")
    evaluate.set_defaults(func=_evaluate)

    predict = sub.add_parser("predict", help="normalized throughput of each job of a co-located set")
    predict.add_argument("--model-dir", required=True, type=path_arg)
    predict.add_argument("--gpu", default="v100", help="GPU type: v100 (default), p100, k80 or a preset (A100-80GB...)")
    predict.add_argument("job_types", nargs="+", metavar="JOB_TYPE", help="e.g. resnet50/b64 lstm_lm/b20")
    predict.set_defaults(func=_predict)
