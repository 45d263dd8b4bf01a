"""Error of ``horus.predict.workload.catalog_workload`` at input sizes its operator table does not hold.

    python scripts/input_size_error.py [--exact resnet50:96,resnet50:160,bert_base:200] [--batch 32]

Two measurements, each against an exact operator table:

* leave-one-out (no torch): every recorded size of every model with three or more sizes is dropped from the
  tables in turn and predicted from the rest (interior sizes: interpolation; end sizes: extrapolation);
* exact extraction (needs torch): ``--exact`` model:size pairs are recorded with ``horus.graph.opcost`` and
  compared with the interpolated workload of the shipped table.

Per case: relative error of total FLOPs and bytes at ``--batch``, saved activations per sample, and the
physical predictor's iteration time on an A100 (shipped parameters, fp32, Adam).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import numpy as np

from horus.gpu_types import gpu_spec
from horus.predict.physical import estimate, shipped_params
from horus.predict.workload import Workload, left_out, rows_workload, table_sizes

GPU = "A100-40GB"


def totals(w: Workload, batch: int) -> np.ndarray:
    """(FLOPs, bytes, saved activations per sample, A100 iteration time) of ``w`` at ``batch``."""
    flops, byts = w.at_batch(batch)
    it = estimate(w, batch, gpu_spec(GPU), shipped_params()).iter_time_s
    return np.array([w.count @ flops, w.count @ byts, w.activation_bytes_per_sample, it])


def rel_error(pred: Workload, exact: Workload, batch: int) -> np.ndarray:
    p, e = totals(pred, batch), totals(exact, batch)
    return (p - e) / e


def leave_one_out(batch: int) -> list[tuple[str, int, str, np.ndarray]]:
    from horus.catalog import load_catalog

    return [(model, s, "interp" if inside else "extrap", rel_error(predicted, recorded, batch))
            for model in sorted(load_catalog()) for s, inside, predicted, recorded in left_out(model)]


def exact_cases(pairs: Sequence[str], batch: int) -> list[tuple[str, int, str, np.ndarray]]:
    from horus.graph.opcost import zoo_op_table
    from horus.predict.workload import catalog_workload

    out = []
    for pair in pairs:
        model, size = pair.split(":")
        exact = rows_workload(model, int(size), zoo_op_table(model, input_size=int(size)))
        sizes = table_sizes(model)
        how = "interp" if sizes[0] < int(size) < sizes[-1] else "extrap"
        out.append((model, int(size), how, rel_error(catalog_workload(model, int(size)), exact, batch)))
    return out


def show(title: str, rows: list[tuple[str, int, str, np.ndarray]]) -> None:
    print(f"\n{title}\n{'model':24s} {'size':>5s} {'how':6s} {'FLOPs':>8s} {'bytes':>8s} {'acts':>8s} {'iter':>8s}")
    for model, size, how, err in rows:
        print(f"{model:24s} {size:5d} {how:6s} " + " ".join(f"{100 * v:+7.1f}%" for v in err))
    for how in ("interp", "extrap"):
        errs = np.array([e for _, _, h, e in rows if h == how])
        if len(errs):
            mean, worst = 100 * np.abs(errs).mean(0), 100 * np.abs(errs).max(0)
            print(f"{how}: n={len(errs)}  mean |error| " + " ".join(f"{v:.1f}%" for v in mean)
                  + "  max " + " ".join(f"{v:.1f}%" for v in worst) + "  (FLOPs bytes acts iter)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exact", default="", help="comma-separated model:size pairs to extract with torch")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--skip-loo", action="store_true", help="skip the leave-one-out table")
    args = parser.parse_args(argv)
    if not args.skip_loo:
        show("leave one recorded size out", leave_one_out(args.batch))
    if args.exact:
        show("exact torch extraction at unrecorded sizes", exact_cases(args.exact.split(","), args.batch))
    return 0


if __name__ == "__main__":
    sys.exit(main())
