"""Where the held-out iteration-time error of the physical predictor comes from (issue 30).

    PYTHONPATH=src python scripts/iter_time_breakdown.py ../shared/data [--protocol gpu-out|dataset-out] [--rows]

Runs the same held-out predictions as ``horus predictor evaluate --reference`` (candidate ``physical-cli``: the
``JobSpec`` that ``horus predict`` builds with the run's input size, precision and optimizer) and prints:

* the pooled MAPE and each (dataset, model) group's share of it (points), with its geometric-mean
  predicted / measured ratio and the fraction of its rows that are under-predicted;
* the MAPE left after an *oracle* scale factor (the MAPE-optimal constant, chosen on the held-out rows
  themselves -- a diagnostic bound, never a predictor) per held-out GPU type, per (dataset, model) and per
  (dataset, GPU, model): what a perfect per-GPU calibration could reach at best, and how much error is in the
  shape across batch sizes that no per-group constant removes;
* the in-sample floor: the MAPE on the same rows when the constants are calibrated on *every* row, test rows
  included (again a diagnostic bound: what the model's form reaches when nothing is held out);
* with ``--rows``, every row (measured, predicted, ratio).

Nothing is fitted on held-out rows; the oracle figures are bounds, not predictions.
"""

from __future__ import annotations

import argparse
import math
from collections import defaultdict
from collections.abc import Callable, Sequence

import numpy as np

from horus.gpu_types import gpu_spec
from horus.predict.calibrate import calibrate
from horus.predict.evaluate import held_out_predictions
from horus.predict.measurements import Measurement, load_measurements
from horus.predict.physical import estimate


def oracle_scale_mape(ratios: Sequence[float]) -> float:
    """MAPE (%) of ``c x ratio`` with the best constant c (the optimum is at one of the 1 / ratio)."""
    r = np.asarray(ratios, dtype=float)
    return float(min(np.mean(np.abs(c * r - 1.0)) for c in 1.0 / r) * 100.0)


def _grouped(rows: Sequence[Measurement], ratio: np.ndarray,
             key: Callable[[Measurement], tuple[str, ...]]) -> dict[tuple[str, ...], list[float]]:
    out: dict[tuple[str, ...], list[float]] = defaultdict(list)
    for m, r in zip(rows, ratio):
        out[key(m)].append(float(r))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", help="directory laid out like ../shared/data")
    ap.add_argument("--protocol", default="gpu-out", choices=("gpu-out", "dataset-out"))
    ap.add_argument("--rows", action="store_true", help="print every held-out row")
    args = ap.parse_args()
    every = load_measurements(args.data)  # calibration also uses GPUMemNet's utilization rows
    pred_all = held_out_predictions(every, args.protocol, ["physical-cli"])[("physical-cli", "iter_time")]
    keep = [i for i, m in enumerate(every) if m.iter_time_s is not None]
    rows, pred = [every[i] for i in keep], pred_all[keep]
    meas = np.array([m.iter_time_s for m in rows])
    ratio = pred / meas
    n = len(rows)
    print(f"{args.protocol}: {n} rows, iteration-time MAPE {np.mean(np.abs(ratio - 1)) * 100:.1f} %")
    print("\nshare of the pooled MAPE by (dataset, model):")
    by_model = _grouped(rows, ratio, lambda m: (m.dataset, str(m.model)))
    for key, rs in sorted(by_model.items(), key=lambda kv: -sum(abs(r - 1) for r in kv[1])):
        r = np.array(rs)
        print(f"  {'/'.join(key):<32} n={len(r):3d}  {np.sum(np.abs(r - 1)) / n * 100:5.1f} pts  "
              f"MAPE {np.mean(np.abs(r - 1)) * 100:5.1f}  ratio {math.exp(np.mean(np.log(r))):.2f} "
              f"({r.min():.2f}-{r.max():.2f})  under {np.mean(r < 1) * 100:3.0f} %")
    print("\nMAPE left after an oracle (held-out-fitted, diagnostic only) scale per group:")
    for name, key in (("held-out GPU type (dataset, GPU)", lambda m: (m.dataset, m.gpu)),
                      ("(dataset, model)", lambda m: (m.dataset, str(m.model))),
                      ("(dataset, GPU, model)", lambda m: (m.dataset, m.gpu, str(m.model)))):
        groups = _grouped(rows, ratio, key)
        left = sum(oracle_scale_mape(rs) * len(rs) for rs in groups.values()) / n
        print(f"  per {name:<34} {left:5.1f} %")
    every_fit = calibrate(every, 0)
    inside = np.array([estimate(m.workload, m.batch, gpu_spec(m.gpu), every_fit, m.optimizer,
                                precision=m.precision).iter_time_s for m in rows]) / meas
    print(f"\nin-sample floor (calibrated on every row, test rows included): MAPE "
          f"{np.mean(np.abs(inside - 1)) * 100:.1f} %")
    if args.rows:
        print()
        for m, t, p in sorted(zip(rows, meas, pred), key=lambda x: (x[0].dataset, str(x[0].model), x[0].gpu,
                                                                   x[0].batch)):
            print(f"  {m.dataset:<7}{m.gpu:<9}{str(m.model):<24}b={m.batch:<7d}measured {t * 1e3:9.2f} ms  "
                  f"predicted {p * 1e3:9.2f} ms  ratio {p / t:5.2f}")


if __name__ == "__main__":
    main()
