"""Write the model catalog (``horus.catalog.CATALOG_COLUMNS``) and its per-operator table for every zoo model.

    python -m horus.graph.build_catalog --out PATH [--ops-out PATH] [--models resnet50,gpt2] [--input-sizes 32,64]

Catalog rows hold per-sample values (batch 1) at each model's default input size. The per-operator table
(``horus.graph.opcost.OPS_COLUMNS``, default ``model_ops.csv`` next to ``--out``) holds each merged op's
FLOPs and bytes as fixed + per-sample parts, for the physical predictor, at every size of ``table_sizes``
(or of ``--input-sizes``, plus the default): image models at 32, 64, 128, 224 pixels and their default, never
below ``horus.graph.input_sizes.MIN_INPUT_SIZE``; sequence models at 32-512 tokens and their default, never
beyond their position table (recurrent nets at 32-128 steps); recommendation and RL models at their default only (their inputs are fixed by the
data set or the environment). ``horus.predict.workload.catalog_workload`` interpolates between these sizes.
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
IMAGE_SIZES = (32, 64, 128, 224)
SEQUENCE_LENGTHS = (32, 64, 128, 256, 512)
# Recurrent nets: truncated-BPTT lengths (35-128 in common use); recording costs grow faster than linearly with
# the number of steps and every per-step op scales alike, so longer ones extrapolate with exponent ~1.
RECURRENT_LENGTHS = (32, 64, 128)
# Longest sequence a model's position table holds (BERT: 512 positions; GPT-2: 1024; the translator's
# sinusoid table: 1024). Models not listed (T5: relative positions; recurrent nets) take any length.
MAX_SEQUENCE: dict[str, int] = {"bert_base": 512, "bert_large": 512, "bert_base_squad": 512, "gpt2": 1024,
                                "gpt2_medium": 1024, "gpt2_xl": 1024, "transformer": 1024}
DEFAULT_ONLY_FAMILIES = frozenset({"recommendation", "rl"})


def table_sizes(name: str, requested: Sequence[int] = ()) -> list[int]:
    """Input sizes at which the operator table of zoo model ``name`` is recorded (always including the default).

    ``requested`` replaces the family's list (still clipped to the model's valid range); default-only families
    ignore it.
    """
    from horus.graph.input_sizes import MIN_INPUT_SIZE
    from horus.zoo import get_entry

    entry = get_entry(name)
    default = entry.default_input_size
    if entry.family in DEFAULT_ONLY_FAMILIES:
        return [default]
    if name in MIN_INPUT_SIZE:
        sizes = [s for s in (requested or IMAGE_SIZES) if s >= MIN_INPUT_SIZE[name]]
    else:
        family_sizes = RECURRENT_LENGTHS if entry.family == "recurrent" else SEQUENCE_LENGTHS
        sizes = [s for s in (requested or family_sizes) if 1 <= s <= MAX_SEQUENCE.get(name, s)]
    return sorted({*sizes, default})


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
    parser.add_argument("--input-sizes", default="",
                        help="comma-separated input sizes of the operator table (default: per family, see module doc)")
    args = parser.parse_args(argv)
    try:
        requested = [int(v) for v in args.input_sizes.split(",") if v.strip()]
    except ValueError:
        parser.error(f"--input-sizes: not a comma-separated list of integers: {args.input_sizes!r}")
    if any(v < 1 for v in requested):
        parser.error(f"--input-sizes: sizes must be at least 1, got {args.input_sizes!r}")
    from horus.zoo import ZOO

    names = [n for n in args.models.split(",") if n] or sorted(ZOO)
    from horus.graph.opcost import OPS_COLUMNS, zoo_op_table

    rows, op_rows = [], []
    begin = time.perf_counter()
    for name in names:
        start = time.perf_counter()
        rows.append(catalog_row(name))
        sizes = table_sizes(name, requested)
        for size in sizes:
            op_rows += zoo_op_table(name, input_size=size)
        print(f"{name} at {sizes}: {time.perf_counter() - start:.1f} s", file=sys.stderr)
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
    print(f"wrote {len(rows)} models to {args.out} and {len(op_rows)} operator rows to {ops_out} "
          f"in {time.perf_counter() - begin:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
