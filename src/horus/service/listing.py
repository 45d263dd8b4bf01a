"""``GET /v1/jobs`` bounded in bytes as well as in jobs.

Jobs are read from the store a batch at a time, newest first, and serialized one at a time; the page
stops before the job that would take it past ``MAX_LISTING_BYTES`` (a page always holds at least one
job). ``truncated`` says the byte budget cut the page short of ``limit``; ``next`` is the ``before``
of the following page (null: no more jobs), so a client pages with ``?before=<next>``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from horus.service.store import JobRow

MAX_LISTING_BYTES = 8 * 1024 * 1024
BATCH = 100  # rows read from the store at a time (a row is at most ~0.6 MiB: schemas' caps)


def _json(value: Any) -> bytes:
    """As ``JSONResponse`` encodes (compact, UTF-8, finite numbers only)."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


def job_listing(rows: Callable[[int | None, int], list[JobRow]], view: Callable[[JobRow], dict[str, Any]], *,
                limit: int, before: int | None, counts: dict[str, int], budget: int = MAX_LISTING_BYTES) -> bytes:
    """The JSON body ``{"jobs", "counts", "truncated", "next"}``. ``rows(before, n)``: at most ``n`` jobs with
    ids below ``before`` (None: any), newest first; ``view``: a job's JSON form."""
    parts: list[bytes] = []
    size = 0
    truncated = more = False
    cursor = before
    while not more:
        want = min(BATCH, limit - len(parts) + 1)  # one more than needed: are there more?
        batch = rows(cursor, want)
        for row in batch:
            if len(parts) == limit:
                more = True
                break
            part = _json(view(row))
            if parts and size + len(part) + 1 > budget:
                truncated = more = True
                break
            parts.append(part)
            size += len(part) + 1
            cursor = row.id
        if len(batch) < want:
            break
    tail = {"counts": counts, "truncated": truncated, "next": cursor if more else None}
    return b'{"jobs":[' + b",".join(parts) + b"]," + _json(tail)[1:]
