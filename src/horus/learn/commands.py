"""CLI: ``horus predictor train|evaluate`` and ``horus predict``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from horus.errors import HorusInputError
from horus.jobs import OPTIMIZERS, PRECISION_ALIASES, PRECISIONS
from horus.validation import NumberArg

if TYPE_CHECKING:
    from horus.cluster import GPUType

DEFAULT_OUT = "learned-predictor"
DEFAULT_FOLDS = 5
PRECISION_CHOICES = (*PRECISIONS, "amp", "fp16", "bfloat16")
assert set(PRECISION_CHOICES) - set(PRECISIONS) <= set(PRECISION_ALIASES)
# registered predictors that read a job's input size, precision and optimizer (the others would ignore them)
DESCRIBED_JOB_PREDICTORS = frozenset({"physical"})


def register(subparsers: Any) -> None:
    predictor = subparsers.add_parser("predictor", help="train / evaluate learned predictors on profiling data")
    sub = predictor.add_subparsers(dest="predictor_command", metavar="ACTION", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("data", metavar="DATA", nargs="?" if p.prog.endswith("evaluate") else None,
                       help="profile table (Parquet or CSV, horus.profiling.schema)")
        p.add_argument("--seed", type=NumberArg("seed"), default=0,
                       help="seed of k-fold shuffling and the models (default 0)")
        p.add_argument("--folds", type=NumberArg("folds"), default=None,
                       help=f"k of k-fold cross-validation (default {DEFAULT_FOLDS})")
        p.add_argument("--candidates", default=None,
                       help="comma-separated candidates (default: all available; see docs/predictors.md)")
        p.add_argument("--json", action="store_true", help="print JSON instead of a table")

    train = sub.add_parser("train", help="evaluate candidates, keep the best per target, save a model directory")
    common(train)
    train.add_argument("--out", default=DEFAULT_OUT, help=f"output model directory (default ./{DEFAULT_OUT})")
    train.set_defaults(func=run_train)

    evaluate = sub.add_parser("evaluate", help="print the metrics table of every candidate x protocol")
    common(evaluate)
    evaluate.add_argument("--reference", metavar="DIR", default=None,
                          help="instead of DATA: public measurements laid out like ../shared/data; held-out "
                               "families and GPU types, physical predictor vs baselines (docs/predictors.md)")
    evaluate.add_argument("--datasets", default=None, help="with --reference: comma-separated subset of "
                          "gavel,zeus,pollux,gpumemnet (default all)")
    evaluate.add_argument("--out", default=None, help="with --reference: also write the scores as JSON here")
    evaluate.set_defaults(func=run_evaluate)

    calibrate = sub.add_parser("calibrate", help="fit the physical predictor's constants on public measurements")
    calibrate.add_argument("--reference", metavar="DIR", required=True,
                           help="public measurements laid out like ../shared/data")
    calibrate.add_argument("--datasets", default=None, help="comma-separated subset of gavel,zeus,pollux,gpumemnet")
    calibrate.add_argument("--seed", type=NumberArg("seed"), default=0, help="seed of the fit's row subsampling (default 0)")
    calibrate.add_argument("--out", default=None,
                           help="JSON file to write (default: print; the shipped file is "
                                "src/horus/data/physical_params.json)")
    calibrate.set_defaults(func=run_calibrate)

    predict = subparsers.add_parser("predict", help="predict a job's solo util / memory / iteration time")
    predict.add_argument("model", metavar="MODEL",
                         help="catalog model name (e.g. resnet50), your own package.module:factory (needs torch), or "
                              "path/to/model.onnx: predicted from its graph's own training step (docs/predictors.md)")
    predict.add_argument("--batch", type=NumberArg("batch_size"), required=True, help="per-GPU batch size")
    predict.add_argument("--gpu", required=True, help="GPU type preset (V100, A100-80GB, H100, ...)")
    predict.add_argument("--predictor-dir", default=None,
                         help="learned model directory (default: the --predictor registered predictor)")
    predict.add_argument("--predictor", default="physical",
                         help="registered predictor when no --predictor-dir is given (default physical)")
    predict.add_argument("--input-size", type=NumberArg("input_size"), default=None,
                         help="image side / sequence length / feature count (default: the catalog's)")
    predict.add_argument("--precision", choices=PRECISION_CHOICES, default=None,
                         help="fp32, tf32, amp-fp16 (alias amp, fp16) or bf16 (alias bfloat16); default: the "
                              "predictor's (physical: fp32 with TF32 convolutions; learned: fp32)")
    predict.add_argument("--optimizer", choices=OPTIMIZERS, default=None,
                         help="optimizer (default: the predictor's, adam)")
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


def _datasets(arg: str | None) -> tuple[str, ...]:
    from horus.predict.measurements import DATASETS

    if arg is None:
        return DATASETS
    names = tuple(n.strip() for n in arg.split(",") if n.strip())
    unknown = [n for n in names if n not in DATASETS]
    if unknown or not names:
        raise HorusInputError("--datasets", f"expected names from {', '.join(DATASETS)}, got {arg!r}")
    return names


def run_reference_evaluate(args: argparse.Namespace) -> int:
    import sys
    import time

    from horus.predict.evaluate import CANDIDATES, PROTOCOLS, evaluate, format_scores, undefined
    from horus.predict.measurements import load_measurements, source_files

    candidates = CANDIDATES
    if args.candidates is not None:
        candidates = tuple(n.strip() for n in args.candidates.split(",") if n.strip())
        unknown = [n for n in candidates if n not in CANDIDATES]
        if unknown or not candidates:
            raise HorusInputError("--candidates",
                                  f"expected names from {', '.join(CANDIDATES)}, got {args.candidates!r}")
    datasets = _datasets(args.datasets)
    _check_reference(args)
    start = time.monotonic()
    rows = load_measurements(args.reference, datasets)
    scores = evaluate(rows, candidates=candidates, seed=args.seed,
                      progress=lambda msg: print(msg, file=sys.stderr, flush=True))
    gaps = {p: undefined(rows, p) for p in PROTOCOLS}
    report = {"reference": str(args.reference), "files_sha256": source_files(args.reference, datasets),
              "command": "horus predictor evaluate --reference DIR --datasets " + ",".join(datasets),
              "rows": len(rows), "seed": args.seed, "protocols": list(PROTOCOLS),
              "undefined": [{"protocol": p, "held_out": g, "target": t,
                             "why": "no measurement of this target on the training side"}
                            for p, cells in gaps.items() for g, t in cells],
              "seconds": round(time.monotonic() - start, 1),
              "scores": [s.as_dict() for s in scores]}
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(report, fh, indent=2)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"{args.reference}: {len(rows)} measurements; held out by GPU type (gpu-out, the headline), by "
              f"dataset (dataset-out) and by model family (family-out)")
        print(format_scores(scores))
        for p, cells in gaps.items():
            for g, t in cells:
                print(f"undefined: {p} {g} {t} (no other held-in measurement of {t}; fitted candidates not scored)")
        print(f"({report['seconds']} s)")
    return 0


def run_calibrate(args: argparse.Namespace) -> int:
    import datetime

    from horus.predict.calibrate import calibrate
    from horus.predict.measurements import load_measurements, source_files

    datasets = _datasets(args.datasets)
    _check_reference(args)
    rows = load_measurements(args.reference, datasets)
    params = calibrate(rows, seed=args.seed)
    from dataclasses import replace

    params = replace(params, provenance={
        "calibrated": True, "command": f"horus predictor calibrate --reference DIR --datasets {','.join(datasets)} "
                                       f"--seed {args.seed}",
        "datasets": list(datasets), "rows": len(rows), "files_sha256": source_files(args.reference, datasets),
        "gpus": sorted({m.gpu for m in rows}),
        "date_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    })
    text = json.dumps(params.to_json(), indent=2)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")
        print(f"wrote {args.out}")
    else:
        print(text)
    return 0


def _check_reference(args: argparse.Namespace) -> None:
    """``--reference DIR`` exists and ``--out FILE`` can be written, before any measurement is read."""
    from horus.validation import check_option, check_output_path

    check_option("--seed", args.seed, "seed")
    if not Path(args.reference).is_dir():
        raise HorusInputError("--reference", f"{args.reference}: not a directory (expected ../shared/data's layout)")
    if args.out is not None:
        check_output_path(Path(args.out), "--out", directory=False)


def _check(args: argparse.Namespace) -> None:
    from horus.validation import check_option

    check_option("--seed", args.seed, "seed")
    check_option("--folds", args.folds, "folds")
    if args.folds is None:
        args.folds = DEFAULT_FOLDS
    if not isinstance(args.data, str) or not args.data.strip():
        raise HorusInputError("DATA", f"expected a profile table (.csv, .parquet or .jsonl), got {args.data!r}")


def run_evaluate(args: argparse.Namespace) -> int:
    if args.reference is not None:
        for option, value in (("DATA", args.data), ("--folds", args.folds)):
            if value is not None:  # would be ignored: an error, not a silent no-op
                raise HorusInputError(option, "is not read with --reference DIR (give one or the other)")
        return run_reference_evaluate(args)
    if args.data is None:
        raise HorusInputError("horus predictor evaluate", "give a profile table DATA or --reference DIR")
    for option, value in (("--datasets", args.datasets), ("--out", args.out)):
        if value is not None:  # would be ignored: an error, not a silent no-op
            raise HorusInputError(option, "is read only with --reference DIR")
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
    if not args.out.strip():
        raise HorusInputError("--out", "expected a directory path, got ''")
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


def _registered_predictor(name: str) -> Any:
    from horus.plugins import load_all
    from horus.predict.base import PREDICTORS

    load_all("horus.predict")
    if name not in PREDICTORS:
        raise HorusInputError("--predictor", f"unknown predictor {name!r}; known: {', '.join(PREDICTORS.names())}")
    return PREDICTORS.create(name)


def predict_gpu(name: str, source: str = "--gpu") -> tuple[GPUType, str]:
    """The GPU type ``horus predict`` runs on and how its spec was matched (``exact``, ``rule``, ``family``).

    The type is named after the data-sheet spec the name maps to (``H100-PCIe``, not the ``H100`` preset an NVML
    rule would give), with the preset's speed where there is a preset of that name; HorusInputError for a name
    no spec rule or family recognises, or for a request listing several types.
    """
    from horus.cluster import GPUType
    from horus.gpu_types import PRESETS, REQUEST_SEPARATOR, lookup_spec
    from horus.learn.gpus import resolve_gpu

    if REQUEST_SEPARATOR in name:
        resolve_gpu(name, source)  # its one-line error
    spec, how = lookup_spec(name)
    if how == "none":
        raise HorusInputError(source, f"unknown GPU type {name!r}; expected one of {', '.join(PRESETS)}, a data-sheet "
                                      "name (horus.gpu_types.SPECS) or an NVML name")
    if how == "family":
        from horus.gpu_types import gpu_spec

        gpu_spec(name)  # the once-per-name warning: the spec is a guess
    if spec.name in PRESETS:
        return PRESETS[spec.name], how
    return GPUType(spec.name, int(spec.memory_gib * 1024), 1.0), how


def _job_description(args: argparse.Namespace, predictor: Any) -> tuple[int | None, str | None, str | None]:
    """The job's input size, precision and optimizer, checked against the model and the chosen predictor."""
    from horus.graph.input_sizes import check_input_size
    from horus.jobs import normalize_precision
    from horus.validation import check_option

    check_option("--input-size", args.input_size, "input_size")
    check_input_size(args.model, args.input_size, "--input-size")
    precision = normalize_precision(args.precision, "--precision")
    if predictor.name not in DESCRIBED_JOB_PREDICTORS:
        for option, value in (("--input-size", args.input_size), ("--optimizer", args.optimizer)):
            if value is not None:
                raise HorusInputError(option, f"the {predictor.name} predictor would ignore it (it predicts at the "
                                              "catalog's input size with Adam); use --predictor physical")
        if precision is not None and predictor.name != "learned":
            raise HorusInputError("--precision", f"the {predictor.name} predictor would ignore it; use --predictor "
                                                 "physical")
    return args.input_size, precision, args.optimizer


def run_predict(args: argparse.Namespace) -> int:
    from horus.catalog import model_info
    from horus.gpu_types import gpu_spec
    from horus.jobs import JobSpec, normalize_precision
    from horus.validation import check_option

    check_option("--batch", args.batch, "batch_size", allow_none=False)
    if args.predictor_dir is not None and not (args.predictor_dir and Path(args.predictor_dir).is_dir()):
        raise HorusInputError("--predictor-dir", f"{args.predictor_dir!r} is not a directory (expected a model "
                                                 "directory written by `horus predictor train`)")
    from horus.graph.user_model import is_user_model

    if is_user_model(args.model):  # the user's graph: registered as a catalog model with its own operator table
        from horus.extras import require
        from horus.graph.user_model import register_user_model

        if args.input_size is not None:
            raise HorusInputError("--input-size", "a module:factory or .onnx model is predicted at the input shape its "
                                                  "graph has; export it (or write the factory) at the size you train")
        require("onnx" if args.model.endswith(".onnx") else "torch", "horus predict MODEL")
        args.model = register_user_model(args.model)
    model_info(args.model)  # unknown model -> HorusInputError
    gpu, match = predict_gpu(args.gpu)
    predictor = _registered_predictor(args.predictor) if args.predictor_dir is None else None
    if predictor is None or predictor.name == "learned":  # it takes the precision when it is built
        from horus.learn.predictor import LearnedPredictor

        learned = {None: "fp32", "fp32": "fp32", "amp-fp16": "amp"}  # what its profiles were measured in
        wanted = normalize_precision(args.precision, "--precision")
        if wanted not in learned:
            raise HorusInputError("--precision", f"the learned predictor knows fp32 and amp (amp-fp16), got "
                                                 f"{args.precision!r}; use --predictor physical")
        predictor = LearnedPredictor(args.predictor_dir, precision=learned[wanted])
    input_size, precision, optimizer = _job_description(args, predictor)
    job = JobSpec(job_id="cli", submit_time=0.0, num_gpus=1, model=args.model, batch_size=args.batch, iterations=1,
                  input_size=input_size, precision=precision, optimizer=optimizer)
    pred = predictor.predict(job, gpu)
    if args.json:
        print(json.dumps({"job_type": job.job_type, "model": job.model, "batch_size": job.batch_size,
                          "input_size": job.input_size, "precision": job.precision, "optimizer": job.optimizer,
                          "gpu": gpu.name, "gpu_requested": args.gpu, "gpu_spec": gpu_spec(gpu.name).name,
                          "gpu_spec_match": match, "util": pred.util, "mem_mib": pred.mem_mib,
                          "iter_time_s": pred.iter_time_s, "predictor": predictor.describe()}, indent=2, default=str))
    else:
        guess = "" if match in ("exact", "rule") else f", a {match} guess for {args.gpu!r}"
        print(f"{job.job_type} on {gpu.name} (spec {gpu_spec(gpu.name).name}{guess}; {predictor.name}): "
              f"util {100 * pred.util:.1f} %, memory {pred.mem_mib:.0f} MiB, iteration {pred.iter_time_s:.4g} s")
    return 0
