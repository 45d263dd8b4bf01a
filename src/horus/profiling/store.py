"""Result files of a campaign directory: rows appended as JSON lines while running (so a killed
command keeps what it measured and a rerun resumes), then tables written as CSV, and Parquet when
pyarrow is importable. :func:`read_table` reads any of the three back (pandas).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from horus.errors import HorusInputError


def append_rows(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    with path.open("a") as fh:
        for row in rows:
            clean = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}
            fh.write(json.dumps(clean) + "\n")
            fh.flush()


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    rows = []
    for line_no, line in enumerate(path.read_text().splitlines(), start=1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                raise HorusInputError(str(path), f"line {line_no}: not a JSON object (truncated write?)") from None
    return rows


def write_tables(rows: list[dict[str, Any]], columns: Sequence[str], stem: Path) -> list[Path]:
    """Write ``stem.csv`` (always) and ``stem.parquet`` (when pyarrow is present); return the paths."""
    import pandas as pd

    frame = pd.DataFrame(rows, columns=list(columns))
    written = [stem.with_suffix(".csv")]
    frame.to_csv(written[0], index=False)
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return written
    frame.to_parquet(stem.with_suffix(".parquet"), index=False)
    written.append(stem.with_suffix(".parquet"))
    return written


def read_table(path: str | Path, required: Sequence[str] = ()) -> Any:
    """A pandas DataFrame from ``.parquet``, ``.csv`` or ``.jsonl``, checked before use.

    CSV files go through :mod:`horus.validation` (size, UTF-8/BOM, cell size, duplicate columns); every
    column named in ``COLUMN_DOMAINS`` / ``COLUMN_CHOICES`` must hold values of its domain (or be empty),
    and ``required`` columns must be present. Errors name the file, line and column.
    """
    import io

    import pandas as pd

    from horus.validation import MAX_TABLE_BYTES, decode_text, read_input_bytes

    path = Path(path)
    source = str(path)
    raw = read_input_bytes(path, "a measurement table (.csv, .parquet or .jsonl)", MAX_TABLE_BYTES)
    try:
        if path.suffix == ".parquet":
            frame = pd.read_parquet(io.BytesIO(raw))
        elif path.suffix == ".jsonl":
            frame = pd.DataFrame(read_jsonl(path))
        else:
            frame = _read_csv(decode_text(raw, source), source)
    except HorusInputError:
        raise
    except (ValueError, OSError, TypeError, OverflowError) as exc:
        raise HorusInputError(source, f"cannot read table ({exc})".replace("\n", " ")[:300]) from None
    except Exception as exc:  # noqa: BLE001 - pyarrow's many error types: all mean a broken file
        raise HorusInputError(source, f"cannot read table ({type(exc).__name__}: {exc})".replace("\n", " ")[:300]) \
            from None
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise HorusInputError(source, f"missing column(s) {', '.join(missing)}")
    check_columns(frame, source)
    return frame


def _read_csv(text: str, source: str) -> Any:
    """CSV text -> DataFrame; one header row, unique column names, cells of bounded size."""
    import csv
    import io

    import pandas as pd

    from horus.validation import MAX_CELL_CHARS

    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    if not lines:
        raise HorusInputError(source, "empty file (expected a header row)")
    header = next(csv.reader([lines[0]]))
    for i, name in enumerate(header):
        if name in header[:i]:
            raise HorusInputError(source, f"header: column {name!r} appears twice; expected each column once")
    previous = csv.field_size_limit(MAX_CELL_CHARS)
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        for record in reader:
            if record and not record[0].lstrip().startswith("#") and any(c.strip() for c in record) \
                    and len(record) != len(header):
                raise HorusInputError(source, f"line {reader.line_num}: expected {len(header)} fields, "
                                              f"got {len(record)}")
    except csv.Error as exc:
        too_long = "field larger" in str(exc)
        what = f"a cell longer than {MAX_CELL_CHARS:,} characters" if too_long else f"not valid CSV ({exc})"
        raise HorusInputError(source, f"line {reader.line_num}: {what}") from None
    finally:
        csv.field_size_limit(previous)
    try:
        return pd.read_csv(io.StringIO(text), comment="#", skip_blank_lines=True)
    except pd.errors.ParserError as exc:
        raise HorusInputError(source, f"not valid CSV ({str(exc).strip()})".replace("\n", " ")[:300]) from None


def check_columns(frame: Any, source: str) -> None:
    """Convert known columns to numbers in place and check their domains and choices (empty cells allowed)."""
    import numpy as np
    import pandas as pd

    from horus.validation import COLUMN_CHOICES, COLUMN_DOMAINS, COLUMN_NONEMPTY

    if frame.empty:
        raise HorusInputError(source, "no rows (expected at least one measurement)")
    for column in COLUMN_NONEMPTY:
        if column in frame.columns:
            missing = frame[column].isna().to_numpy() | (frame[column].astype(str).str.strip() == "").to_numpy()
            if missing.any():
                raise HorusInputError(source, f"line {int(np.flatnonzero(missing)[0]) + 2}, column {column!r}: "
                                              "expected a value, got an empty cell")
    for column, domain in COLUMN_DOMAINS.items():
        if column not in frame.columns:
            continue
        cells = frame[column]
        numeric = pd.api.types.is_numeric_dtype(cells) and not pd.api.types.is_bool_dtype(cells)
        text = None if numeric else cells.astype(str).str.strip()
        empty = cells.isna() if text is None else (cells.isna() | (text == "") | text.str.lower().isin(["nan", "none"]))
        values = pd.to_numeric(cells.where(~empty, np.nan), errors="coerce").to_numpy(dtype=float)
        with np.errstate(invalid="ignore"):
            bad = ~empty.to_numpy() & (~np.isfinite(values) | (values < domain.low) | (values > domain.high)
                                       | ((values != np.round(values)) if domain.integer else False))
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise HorusInputError(source, f"line {row + 2}, column {column!r}: expected {domain.describe()} "
                                          f"(or empty), got {cells.iloc[row]!r}")
        frame[column] = values
    for column, choices in COLUMN_CHOICES.items():
        if column not in frame.columns:
            continue
        values = frame[column].astype(str).str.strip()
        bad = ~values.isin(choices)
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0])
            raise HorusInputError(source, f"line {row + 2}, column {column!r}: expected one of {', '.join(choices)}, "
                                          f"got {frame[column].iloc[row]!r}")
        frame[column] = values
