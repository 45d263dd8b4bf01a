"""Reading trace CSVs with line numbers kept, and typed column access that fails with file + line + column."""

from __future__ import annotations

import csv
import hashlib
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import numpy as np
import pandas as pd

from horus.errors import HorusInputError
from horus.validation import MAX_CELL_CHARS, MAX_ROWS, MAX_TABLE_BYTES, Domain, decode_text, read_input_bytes


@dataclass
class CsvTable:
    """Columns of a CSV file as strings, plus each row's 1-based line number in the file."""

    source: str
    sha256: str
    columns: dict[str, list[str]]
    lines: np.ndarray
    header_line: int = 1

    def __len__(self) -> int:
        return len(self.lines)

    def has(self, column: str) -> bool:
        return column in self.columns

    def text(self, column: str) -> list[str]:
        return self.columns[column]

    def fail(self, row: int, column: str | None, message: str) -> NoReturn:
        where = f"line {int(self.lines[row])}" + (f", column {column!r}" if column else "")
        raise HorusInputError(self.source, f"{where}: {message}")

    def fail_header(self, message: str) -> NoReturn:
        raise HorusInputError(self.source, f"line {self.header_line}: {message}")

    def numbers(self, column: str, *, what: str = "a number", allow_empty: bool = False) -> np.ndarray:
        """Floats (NaN where empty, if allowed); fails on the first non-numeric or non-finite cell."""
        raw = self.columns[column]
        values = pd.to_numeric(pd.Series(raw, dtype=object), errors="coerce").to_numpy(dtype=float, copy=True)
        empty = np.fromiter((not cell for cell in raw), dtype=bool, count=len(raw))
        bad = ~np.isfinite(values) & ~empty
        if not allow_empty:
            bad |= empty
        if bad.any():
            row = int(np.argmax(bad))
            self.fail(row, column, f"expected {what}, got {raw[row]!r}")
        return values

    def check(self, column: str, bad: np.ndarray, values: Sequence[object], expected: str) -> None:
        """Fail at the first row where ``bad`` is true."""
        if bad.any():
            row = int(np.argmax(bad))
            self.fail(row, column, f"expected {expected}, got {values[row]!r}")

    def names(self, column: str, what: str) -> list[str | None]:
        """Queue or priority-class names (``horus.tenancy.check_name``), None where the cell is empty or the
        column is absent; fails at the first cell that is not such a name."""
        from horus.tenancy import NAME_MAX, check_name

        if column not in self.columns:
            return [None] * len(self)
        cells = self.columns[column]
        bad = {cell for cell in set(cells) if cell and not check_name(cell)}  # a few distinct names, many rows
        for row, cell in enumerate(cells):
            if cell in bad:
                self.fail(row, column, f"expected a {what} name of 1-{NAME_MAX} ASCII letters, digits, '-', '_' "
                                       f"or '.' (or nothing), got {cell!r}")
        return [cell or None for cell in cells]

    def positive_ints(self, column: str, *, minimum: int = 1, allow_empty: bool = False) -> np.ndarray:
        """Integral values >= ``minimum`` (as float array, NaN where empty if allowed)."""
        what = f"an integer >= {minimum}"
        values = self.numbers(column, what=what, allow_empty=allow_empty)
        with np.errstate(invalid="ignore"):
            bad = ~np.isnan(values) & ((values < minimum) | (values != np.round(values)))
        self.check(column, bad, self.columns[column], what)
        return values

    def bounded(self, column: str, domain: Domain, *, allow_empty: bool = False) -> np.ndarray:
        """Floats within ``domain`` (NaN where empty, if allowed); fails at the first cell outside it."""
        what = domain.describe()
        values = self.numbers(column, what=what, allow_empty=allow_empty)
        with np.errstate(invalid="ignore"):
            bad = ~np.isnan(values) & ((values < domain.low) | (values > domain.high))
            if domain.integer:
                bad |= ~np.isnan(values) & (values != np.round(values))
        self.check(column, bad, self.columns[column], what)
        return values

    def positive_floats(self, column: str, *, allow_zero: bool = False, allow_empty: bool = False) -> np.ndarray:
        what = "a number >= 0" if allow_zero else "a positive number"
        values = self.numbers(column, what=what, allow_empty=allow_empty)
        with np.errstate(invalid="ignore"):
            bad = ~np.isnan(values) & ((values < 0) if allow_zero else (values <= 0))
        self.check(column, bad, self.columns[column], what)
        return values


def read_csv_table(path: str | Path, fmt: str, required: Sequence[str], optional: Sequence[str] = (),
                   *, allow_extra: bool = True) -> CsvTable:
    """Read ``path`` (lines starting with ``#`` and blank lines are skipped) and check its header.

    Raises HorusInputError for a missing/unreadable/empty file, a missing (or, unless
    ``allow_extra``, unknown) column and rows with the wrong number of fields.
    """
    source = str(path)
    raw = read_input_bytes(path, f"a {fmt} CSV file", MAX_TABLE_BYTES)
    text = decode_text(raw, source)
    records, numbers = _records(text, source)
    keep = [i for i, rec in enumerate(records)
            if rec and not rec[0].lstrip().startswith("#") and (rec[0].strip() or any(c.strip() for c in rec))]
    header: list[str] | None = None
    header_line = 0
    if keep:
        header = [cell.strip() for cell in records[keep[0]]]
        header_line = numbers[keep[0]]
        for i, name in enumerate(header):
            if name in header[:i]:
                raise HorusInputError(source, f"line {header_line}: column {name!r} appears twice; expected "
                                              "each column once")
    rows = [records[i] for i in keep[1:]]
    lines = [numbers[i] for i in keep[1:]]
    if header is not None:
        for row, line in zip(rows, lines):
            if len(row) != len(header):
                raise HorusInputError(source, f"line {line}: expected {len(header)} fields "
                                              f"({', '.join(header)}), got {len(row)}")
    if header is None:
        raise HorusInputError(source, f"empty file (expected a header row with {', '.join(required)})")
    missing = [c for c in required if c not in header]
    if missing:
        raise HorusInputError(source, f"line {header_line}: missing column {missing[0]!r} "
                                      f"(a {fmt} trace needs {', '.join(required)})")
    if not allow_extra:
        unknown = [c for c in header if c not in required and c not in optional]
        if unknown:
            raise HorusInputError(source, f"line {header_line}: unknown column {unknown[0]!r} (allowed: "
                                          f"{', '.join([*required, *optional])})")
    if not rows:
        raise HorusInputError(source, f"line {header_line}: header only, no jobs")
    columns = {name: [cell.strip() for cell in cells] for name, cells in zip(header, zip(*rows))}
    return CsvTable(source, hashlib.sha256(raw).hexdigest(), columns, np.asarray(lines, dtype=np.int64), header_line)


def _records(text: str, source: str) -> tuple[list[list[str]], list[int]]:
    """CSV records and the 1-based line each starts on (fast path when no quoted field can span lines).

    Cells longer than ``MAX_CELL_CHARS`` and more than ``MAX_ROWS`` records are errors."""
    if text.count("\n") > MAX_ROWS:
        raise HorusInputError(source, f"more than {MAX_ROWS:,} lines; expected at most that many rows")
    reader = csv.reader(io.StringIO(text, newline=""))
    previous = csv.field_size_limit(MAX_CELL_CHARS)
    try:
        if '"' not in text:
            records = list(reader)  # one record per physical line, [] for blank lines
            return records, list(range(1, len(records) + 1))
        records, numbers = [], []
        start = 1
        for record in reader:
            records.append(record)
            numbers.append(start)
            start = reader.line_num + 1
        return records, numbers
    except csv.Error as exc:
        line = reader.line_num
        if "field larger" in str(exc):
            raise HorusInputError(source, f"line {line}: a cell longer than {MAX_CELL_CHARS:,} characters; "
                                          "expected short CSV cells") from None
        raise HorusInputError(source, f"line {line}: not valid CSV ({exc})") from None
    finally:
        csv.field_size_limit(previous)
