"""Write the model catalog (``horus.catalog.CATALOG_COLUMNS``) and its per-operator table for every zoo model.

    python -m horus.graph.build_catalog --out PATH [--ops-out PATH] [--models resnet50,gpt2]

Rows hold per-sample values (batch 1) at each model's default input size. The per-operator table
(``horus.graph.opcost.OPS_COLUMNS``, default ``model_ops.csv`` next to ``--out``) holds each merged op's
FLOPs and bytes as fixed + per-sample parts, for the physical predictor.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from horus.catalog import CATALOG_COLUMNS, OP_KINDS

_BATCH = 2


def catalog_row(name: str) -> dict[str, object]:
    """One catalog row for zoo model ``name``: per-sample values (extracted at batch 2, halved).

    Batch 2 rather than 1 because training-mode batch norm rejects a single value per channel
    (e.g. Inception's auxiliary head); FLOPs and activations are linear in batch size.
    """
    import torch

    from horus.graph.extract import extract_zoo_features
    from horus.zoo import get_entry

    entry = get_entry(name)
    f = extract_zoo_features(name, batch_size=_BATCH)
    row: dict[str, object] = {
        "name": name, "family": entry.family, "params": int(f["params"]),
        "forward_flops_per_sample": int(f["forward_flops"] / _BATCH),
        "train_flops_per_sample": int(f["train_flops"] / _BATCH),
        "activation_bytes_per_sample": int(f["activation_bytes"] / _BATCH), "input_size": int(f["input_size"]),
        "depth": int(f["depth"]), **{f"n_{k}": int(f[f"n_{k}"]) for k in OP_KINDS},
        "source": f"horus.graph (torch {torch.__version__.split('+')[0]})",
    }
    return {column: row[column] for column in CATALOG_COLUMNS}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path, help="CSV file to write")
    parser.add_argument("--ops-out", type=Path, default=None,
                        help="per-operator CSV to write (default: model_ops.csv next to --out)")
    parser.add_argument("--models", default="", help="comma-separated zoo names (default: all)")
    args = parser.parse_args(argv)
    from horus.zoo import ZOO

    names = [n for n in args.models.split(",") if n] or sorted(ZOO)
    from horus.graph.opcost import OPS_COLUMNS, zoo_op_table

    rows, op_rows = [], []
    for name in names:
        start = time.perf_counter()
        rows.append(catalog_row(name))
        op_rows += zoo_op_table(name)
        print(f"{name}: {time.perf_counter() - start:.1f} s", file=sys.stderr)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=CATALOG_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    ops_out = args.ops_out or args.out.with_name("model_ops.csv")
    with ops_out.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=OPS_COLUMNS)
        writer.writeheader()
        writer.writerows(op_rows)
    print(f"wrote {len(rows)} models to {args.out} and {len(op_rows)} operator rows to {ops_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
