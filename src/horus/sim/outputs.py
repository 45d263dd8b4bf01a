"""Writing run outputs: tables (Parquet, CSV fallback), JSON, file hashes and the run manifest."""

from __future__ import annotations

import importlib.util
import json
import math
import platform
import re
import sys
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

import horus
from horus.hashing import sha256_file  # noqa: F401  (re-exported: runner and benchmarks use it from here)

HAVE_PYARROW = importlib.util.find_spec("pyarrow") is not None


def safe_name(name: str) -> str:
    """A file-system-safe folder name for a policy name."""
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", name) or "_"


def write_table(frame: pd.DataFrame, path_stem: Path) -> Path:
    """Write ``frame`` to ``<path_stem>.parquet``, or ``.csv`` when pyarrow is missing; return the path."""
    path_stem.parent.mkdir(parents=True, exist_ok=True)
    if HAVE_PYARROW:
        path = path_stem.with_suffix(".parquet")
        frame.to_parquet(path, index=False)
    else:
        path = path_stem.with_suffix(".csv")
        frame.to_csv(path, index=False)
    return path


def to_jsonable(value: object) -> object:
    """``value`` with numpy scalars made plain and NaN/inf made ``None`` (strict JSON)."""
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return None if not math.isfinite(float(value)) else float(value)  # JSON has no NaN
    if isinstance(value, Path):
        return str(value)
    return value


def write_json(data: object, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(to_jsonable(data), indent=2, sort_keys=False, default=str) + "\n")
    return path


def environment() -> dict[str, str]:
    """Versions and platform for the manifest."""
    versions = {"horus": horus.__version__, "python": sys.version.split()[0], "numpy": np.__version__,
                "pandas": pd.__version__, "platform": platform.platform()}
    if HAVE_PYARROW:
        import pyarrow

        versions["pyarrow"] = pyarrow.__version__
    return versions


def utc_timestamp() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
