"""Load a solo-profiling table (Parquet or CSV, ``horus.profiling.schema``) into features + targets.

Rows with ``status != "ok"`` (out-of-memory, errors) are dropped; repeats of one configuration
(model, batch, precision, GPU) are averaged. Graph features come from the file when it carries all
``FEATURE_NAMES`` columns, else from the shipped catalog (``horus.catalog.model_info``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from horus.catalog import FEATURE_NAMES, model_info
from horus.errors import HorusInputError
from horus.hashing import sha256_file
from horus.learn.features import build_features, config_features
from horus.learn.gpus import resolve_gpu
from horus.profiling.schema import TARGETS

CONFIG_KEYS: tuple[str, ...] = ("model", "batch_size", "precision", "gpu_name")
REQUIRED_COLUMNS: tuple[str, ...] = (*CONFIG_KEYS, "status", *TARGETS.values())
PRECISIONS: frozenset[str] = frozenset({"fp32", "amp"})


@dataclass(frozen=True)
class ProfileDataset:
    """One row per configuration: ``features`` (FEATURE_SCHEMA), ``targets`` (TARGETS keys), ``keys``."""

    features: pd.DataFrame
    targets: pd.DataFrame  # columns util (%), mem (MiB), iter_time (s)
    keys: pd.DataFrame  # model, family, batch_size, precision, gpu_name, gpu_type
    source: str
    sha256: str
    rows_read: int
    rows_not_ok: int

    def __len__(self) -> int:
        return len(self.features)

    @property
    def families(self) -> np.ndarray:
        return self.keys["family"].to_numpy()


def read_table(path: Path) -> pd.DataFrame:
    """Read Parquet (.parquet/.pq) or CSV; HorusInputError on a missing or unreadable file."""
    source = str(path)
    if not path.is_file():
        raise HorusInputError(source, "no such file (expected a Parquet or CSV profile table)")
    suffix = path.suffix.lower()
    try:
        if suffix in (".parquet", ".pq"):
            return pd.read_parquet(path)
        if suffix == ".csv":
            from horus.profiling.store import read_table as read_checked  # size, encoding, domains

            return read_checked(path)
    except HorusInputError:
        raise
    except Exception as exc:  # noqa: BLE001 - any parser failure is bad input
        raise HorusInputError(source, f"cannot read table ({type(exc).__name__}: {exc})".replace("\n", " ")) from None
    raise HorusInputError(source, f"unsupported file type {suffix!r}; expected .parquet, .pq or .csv")


def _numeric_column(frame: pd.DataFrame, column: str, source: str) -> pd.Series:
    values = pd.to_numeric(frame[column], errors="coerce")
    bad = ~np.isfinite(values.to_numpy(dtype=float))
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise HorusInputError(source, f"line {frame.index[row] + 2}, column {column!r}: expected a finite number, "
                                      f"got {_cell(frame[column].iloc[row])}")
    return values.astype(float)


def _cell(value: object) -> str:
    """A table cell for a message: empty/NaN said so, numpy scalars as plain Python values."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "an empty cell"
    return repr(value.item() if hasattr(value, "item") else value)


def load_profiles(path: str | Path) -> ProfileDataset:
    """Load, validate, filter and aggregate a profile table; join graph features and GPU features."""
    path = Path(path)
    source = str(path)
    raw = read_table(path)
    for column in REQUIRED_COLUMNS:
        if column not in raw.columns:
            raise HorusInputError(source, f"missing column {column!r} (profile schema: horus.profiling.schema)")
    raw = raw.reset_index(drop=True)
    ok = raw[raw["status"].astype(str) == "ok"].copy()
    if ok.empty:
        raise HorusInputError(source, "no rows with status 'ok'")
    precision = ok["precision"].astype(str)
    if not precision.isin(PRECISIONS).all():
        row = ok.index[~precision.isin(PRECISIONS)][0]
        raise HorusInputError(source, f"line {row + 2}, column 'precision': expected fp32 or amp, "
                                      f"got {ok.loc[row, 'precision']!r}")
    ok["batch_size"] = _numeric_column(ok, "batch_size", source).astype(int)
    ok["model"] = ok["model"].astype(str)
    ok["precision"] = precision
    for column in TARGETS.values():
        ok[column] = _numeric_column(ok, column, source)
        if (ok[column] < 0).any() or (column != TARGETS["util"] and (ok[column] <= 0).any()):
            row = ok.index[(ok[column] <= 0) if column != TARGETS["util"] else (ok[column] < 0)][0]
            raise HorusInputError(source, f"line {row + 2}, column {column!r}: expected a positive number, "
                                          f"got {ok.loc[row, column]!r}")
    has_features = all(c in ok.columns for c in FEATURE_NAMES)
    if has_features:
        for column in FEATURE_NAMES:
            ok[column] = _numeric_column(ok, column, source)
    has_family = "family" in ok.columns and ok["family"].notna().all()

    agg: dict[str, str] = {c: "mean" for c in TARGETS.values()}
    agg.update({c: "first" for c in (FEATURE_NAMES if has_features else ())})
    if has_family:
        agg["family"] = "first"
    grouped = ok.groupby(list(CONFIG_KEYS), sort=True, as_index=False).agg(agg)

    rows: list[dict[str, float]] = []
    families: list[str] = []
    gpu_types: list[str] = []
    for rec in grouped.to_dict("records"):
        gpu = resolve_gpu(str(rec["gpu_name"]), source=f"{source} column 'gpu_name'")
        if has_features:
            graph = {c: float(rec[c]) for c in FEATURE_NAMES}
        else:
            try:
                graph = model_info(rec["model"]).features(int(rec["batch_size"]))
            except HorusInputError:
                raise HorusInputError(source, f"column 'model': {rec['model']!r} is not in the model catalog and the "
                                              f"file has no feature columns ({', '.join(FEATURE_NAMES[:3])}, ...)")
        families.append(str(rec["family"]) if has_family else model_info(rec["model"]).family)
        gpu_types.append(gpu.name)
        rows.append({**graph, **config_features(rec["precision"], gpu)})

    features = build_features(pd.DataFrame(rows))
    targets = pd.DataFrame({name: grouped[column].to_numpy(dtype=float) for name, column in TARGETS.items()})
    keys = grouped[list(CONFIG_KEYS)].assign(family=families, gpu_type=gpu_types)
    return ProfileDataset(features, targets, keys, source, sha256_file(path), len(raw), len(raw) - len(ok))
