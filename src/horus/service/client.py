"""A small HTTP client of the service API, used by the CLI verbs (``horus submit``, ``jobs``, ...)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from horus.errors import HorusInputError
from horus.service.server import DEFAULT_PORT, default_state_dir, read_token


def default_server() -> str:
    return os.environ.get("HORUS_SERVER", f"http://127.0.0.1:{DEFAULT_PORT}")


def find_token(token_file: Path | None) -> str | None:
    """``--token-file``, else ``$HORUS_TOKEN``, else the default state directory's token file (if any)."""
    if token_file is not None:
        return read_token(token_file)
    if os.environ.get("HORUS_TOKEN"):
        return os.environ["HORUS_TOKEN"].strip()
    path = default_state_dir() / "token"
    return read_token(path) if path.exists() else None


class Client:
    def __init__(self, server: str, token: str | None, timeout_s: float = 30.0) -> None:
        import httpx

        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.server = server.rstrip("/")
        self.http = httpx.Client(base_url=self.server, headers=headers, timeout=timeout_s)

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        import httpx

        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise HorusInputError("--server", f"cannot reach the Horus server at {self.server} "
                                              f"({type(exc).__name__}); is `horus serve` running?") from None
        if response.status_code >= 400:
            raise HorusInputError(f"{method} {path}", f"HTTP {response.status_code}: {_detail(response)}")
        return response.json() if response.content else None

    def submit(self, body: dict[str, Any]) -> dict[str, Any]:
        return self.request("POST", "/v1/jobs", json=body)

    def jobs(self, states: list[str] | None = None, limit: int = 1000, before: int | None = None) -> dict[str, Any]:
        """Up to ``limit`` jobs, newest first (older than job ``before``), following the pages the server cut at
        its byte budget; ``next`` (the last page's) is the ``before`` of more jobs, if any."""
        params: dict[str, Any] = {"limit": limit}
        if states:
            params["state"] = states
        if before is not None:
            params["before"] = before
        page = self.request("GET", "/v1/jobs", params=params)
        jobs = list(page["jobs"])
        while page.get("truncated") and page.get("next") and len(jobs) < limit:
            more = {**params, "limit": limit - len(jobs), "before": page["next"]}
            page = self.request("GET", "/v1/jobs", params=more)
            jobs += page["jobs"]
        return {**page, "jobs": jobs}

    def job(self, job_id: str) -> dict[str, Any]:
        return self.request("GET", f"/v1/jobs/{job_id}")

    def cancel(self, job_id: str) -> dict[str, Any]:
        return self.request("POST", f"/v1/jobs/{job_id}/cancel")

    def cluster(self) -> dict[str, Any]:
        return self.request("GET", "/v1/cluster")

    def upload_model(self, path: Path) -> dict[str, Any]:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise HorusInputError(str(path), f"cannot read ({exc.strerror})") from None
        return self.request("POST", "/v1/models", content=data,
                            headers={"Content-Type": "application/octet-stream"})


def _detail(response: Any) -> str:
    """One line from FastAPI's error body (``detail`` string or list of field errors)."""
    try:
        detail = response.json().get("detail")
    except ValueError:
        return response.text[:300]
    if isinstance(detail, list):
        parts = []
        for item in detail[:3]:
            loc = ".".join(str(p) for p in item.get("loc", []) if p != "body")
            parts.append(f"{loc}: {item.get('msg')}" if loc else str(item.get("msg")))
        return "; ".join(parts)
    return str(detail)
