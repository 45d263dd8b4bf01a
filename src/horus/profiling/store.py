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
    """A pandas DataFrame from ``.parquet``, ``.csv`` or ``.jsonl``; checks ``required`` columns."""
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise HorusInputError(str(path), "no such file")
    try:
        if path.suffix == ".parquet":
            frame = pd.read_parquet(path)
        elif path.suffix == ".jsonl":
            frame = pd.DataFrame(read_jsonl(path))
        else:
            frame = pd.read_csv(path, comment="#")
    except (ValueError, OSError) as exc:
        raise HorusInputError(str(path), f"cannot read table ({exc})".replace("\n", " ")) from None
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise HorusInputError(str(path), f"missing column(s) {', '.join(missing)}")
    return frame
