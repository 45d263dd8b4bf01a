"""Progress reports from inside a training job: ``horus.report(iteration)``.

The agent gives every job attempt ``HORUS_PROGRESS_FILE``; each report appends one JSON line
``{"iteration": N, "time": UNIX seconds}`` (the same format a script in another language can write
itself). Iterations count from the start of this attempt: the server adds ``HORUS_START_ITERATION``.
Without ``HORUS_PROGRESS_FILE`` but with ``HORUS_SERVER_URL`` and ``HORUS_JOB_TOKEN``, reports go to
``POST /v1/jobs/{id}/progress`` instead, at most once a second.
"""

from __future__ import annotations

import json
import os
import time
from typing import IO

_file: IO[str] | None = None
_last_post = 0.0


def report(iteration: float) -> None:
    global _file, _last_post
    path = os.environ.get("HORUS_PROGRESS_FILE")
    now = time.time()
    if path:
        if _file is None or _file.name != path:
            _file = open(path, "a", buffering=1)  # line-buffered: the agent sees every line
        _file.write(json.dumps({"iteration": float(iteration), "time": now}) + "\n")
        return
    url, token = os.environ.get("HORUS_SERVER_URL"), os.environ.get("HORUS_JOB_TOKEN")
    if url and token and now - _last_post >= 1.0:
        import urllib.request

        _last_post = now
        body = json.dumps({"attempt": int(os.environ.get("HORUS_ATTEMPT", "1")), "iteration": float(iteration)})
        request = urllib.request.Request(f"{url.rstrip('/')}/v1/jobs/{os.environ['HORUS_JOB_ID']}/progress",
                                         data=body.encode(), method="POST",
                                         headers={"Authorization": f"Bearer {token}",
                                                  "Content-Type": "application/json"})
        try:
            urllib.request.urlopen(request, timeout=2).close()
        except OSError:
            pass  # progress is telemetry: never fail the job over it
