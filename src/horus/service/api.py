"""The HTTP API (FastAPI; OpenAPI at ``/docs``). Versioned under ``/v1``.

Writes need ``Authorization: Bearer <token>`` (401 without, 403 with a wrong one; compared in
constant time; tokens are never logged). Reads need it too unless the server runs with open
reads. Bad bodies are 422 responses naming the field; nothing a client sends produces a 500.
"""

from __future__ import annotations

import hmac
import json
import logging
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Header, HTTPException, Path, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse

from horus import __version__
from horus.errors import HorusInputError, UnknownAgentError
from horus.service.models_onnx import MAX_ONNX_BYTES, catalog_row_from_onnx, register_catalog_row
from horus.service.scheduler import LiveScheduler
from horus.service.schemas import AgentRegister, Heartbeat, JobProgress, JobSubmit, job_view
from horus.service.store import JOB_STATES, NewJob

log = logging.getLogger("horus.service")

MAX_BODY_BYTES = 4 * 1024 * 1024  # every request but model uploads
JobId = Annotated[int, Path(ge=1, le=2**62, description="job id")]


def _error_item(error: Any) -> dict[str, Any]:
    item = {"loc": list(error.get("loc", ())), "msg": str(error.get("msg", "")), "type": str(error.get("type", ""))}
    try:
        text = json.dumps(error.get("input"), allow_nan=False)
    except (TypeError, ValueError):
        return item
    if len(text) <= 200:
        item["input"] = error.get("input")
    return item


def create_app(scheduler: LiveScheduler, token: str, *, open_reads: bool = False) -> FastAPI:
    app = FastAPI(title="Horus", version=__version__,
                  description="Interference-aware GPU cluster scheduler: submit training jobs, watch them run.")
    expected = token.encode()

    def check(authorization: str | None) -> None:
        if not authorization:
            raise HTTPException(401, "this request needs 'Authorization: Bearer <token>'",
                                headers={"WWW-Authenticate": "Bearer"})
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode(), expected):
            raise HTTPException(403, "wrong token")

    def write_auth(authorization: Annotated[str | None, Header()] = None) -> None:
        check(authorization)

    def read_auth(authorization: Annotated[str | None, Header()] = None) -> None:
        if not open_reads:
            check(authorization)

    Write = Depends(write_auth)
    Read = Depends(read_auth)

    @app.middleware("http")
    async def limit_body(request: Request, call_next: Any) -> Response:
        limit = MAX_ONNX_BYTES if request.url.path == "/v1/models" else MAX_BODY_BYTES
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > limit):
            return JSONResponse({"detail": f"request body larger than {limit} bytes"}, status_code=413)
        return await call_next(request)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        """422 naming each field; the offending value is echoed only when it is plain JSON (never NaN or inf)."""
        return JSONResponse({"detail": [_error_item(e) for e in exc.errors()]}, status_code=422)

    @app.exception_handler(HorusInputError)
    async def input_error(request: Request, exc: HorusInputError) -> JSONResponse:
        return JSONResponse({"detail": [{"loc": ["body", exc.source], "msg": exc.message, "type": "value_error"}]},
                            status_code=422)

    @app.get("/healthz", tags=["service"])
    def healthz() -> dict[str, Any]:
        return {"status": "ok", "version": __version__}

    @app.get("/metrics", tags=["service"], response_class=PlainTextResponse, dependencies=[Read])
    def metrics() -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST

        return Response(scheduler.metrics.render(), media_type=CONTENT_TYPE_LATEST)

    @app.post("/v1/jobs", tags=["jobs"], status_code=201, dependencies=[Write])
    def submit(body: JobSubmit, response: Response,
               idempotency_key: Annotated[str | None, Header(max_length=200)] = None) -> dict[str, Any]:
        """Queue a job. A retry with the same idempotency key (body field or header) returns the first job (200)."""
        key = body.idempotency_key or idempotency_key
        new = NewJob(model=body.model or "", batch_size=body.batch_size if body.model else 0,
                     num_gpus=body.num_gpus, command=body.command, env=body.env, cwd=body.cwd, name=body.name,
                     gpu_type=body.gpu_type, gpu_fraction=body.gpu_fraction, iterations=body.iterations,
                     idem_key=key)
        row, created = scheduler.submit(new)
        if not created:
            response.status_code = 200
        return job_view(row, prediction=scheduler.prediction(row))

    @app.get("/v1/jobs", tags=["jobs"], dependencies=[Read])
    def list_jobs(state: Annotated[list[str] | None, Query()] = None,
                  limit: Annotated[int, Query(ge=1, le=100_000)] = 1000) -> dict[str, Any]:
        """Jobs, newest first, optionally only in the given states."""
        for s in state or []:
            if s not in JOB_STATES:
                raise HTTPException(422, f"state: expected one of {', '.join(JOB_STATES)}, got {s[:40]!r}")
        rows = scheduler.store.jobs(states=state, limit=limit, newest_first=True)
        return {"jobs": [job_view(r, telemetry=scheduler.telemetry(r.job_id) if r.state == "running" else None,
                                  waiting=scheduler.wait_reason(r.job_id) if r.state == "queued" else None)
                         for r in rows], "counts": scheduler.store.counts()}

    @app.get("/v1/jobs/{job_id}", tags=["jobs"], dependencies=[Read])
    def get_job(job_id: JobId) -> dict[str, Any]:
        row = scheduler.store.job(job_id)
        if row is None:
            raise HTTPException(404, f"no job {job_id}")
        return job_view(row, prediction=scheduler.prediction(row), telemetry=scheduler.telemetry(row.job_id),
                        events=scheduler.store.events(job_id), waiting=scheduler.wait_reason(row.job_id))

    @app.post("/v1/jobs/{job_id}/cancel", tags=["jobs"], dependencies=[Write])
    def cancel(job_id: JobId) -> dict[str, Any]:
        """Cancel a queued or running job (a running one is stopped: SIGTERM, grace period, SIGKILL)."""
        row = scheduler.cancel(job_id)
        if row is None:
            raise HTTPException(404, f"no job {job_id}")
        return job_view(row)

    @app.post("/v1/jobs/{job_id}/progress", tags=["jobs"], status_code=204)
    def progress(job_id: JobId, body: JobProgress,
                 authorization: Annotated[str | None, Header()] = None) -> Response:
        """Progress reported by the job itself, with its job token (``HORUS_JOB_TOKEN``)."""
        if not authorization:
            raise HTTPException(401, "needs 'Authorization: Bearer <job token>'", headers={"WWW-Authenticate": "Bearer"})
        if not scheduler.job_progress(str(job_id), body.attempt, authorization.partition(" ")[2].strip(),
                                      body.iteration):
            raise HTTPException(403, "wrong job token")
        return Response(status_code=204)

    @app.get("/v1/cluster", tags=["cluster"], dependencies=[Read])
    def cluster() -> dict[str, Any]:
        """Every GPU with its residents, predicted and observed utilization and memory."""
        return scheduler.cluster_view()

    @app.post("/v1/models", tags=["models"], status_code=201, dependencies=[Write])
    async def upload_model(request: Request) -> dict[str, Any]:
        """Upload an ONNX graph (request body); submit jobs with the returned model name."""
        data = await request.body()
        name, row = catalog_row_from_onnx(data)
        with scheduler.lock:
            register_catalog_row(name, row)
            scheduler.store.add_model(name, row, scheduler.clock())
        return {"model": name, "batch_size": row["batch_size"], "params": row["params"]}

    @app.post("/v1/agents", tags=["agents"], dependencies=[Write])
    def register_agent(body: AgentRegister) -> dict[str, Any]:
        row = scheduler.register_agent(body.name, body.hostname, [g.model_dump() for g in body.gpus])
        return {"name": row.name, "lease_s": scheduler.lease_s}

    @app.post("/v1/agents/{name}/heartbeat", tags=["agents"], dependencies=[Write])
    def heartbeat(name: Annotated[str, Path(max_length=128)], body: Heartbeat) -> dict[str, Any]:
        try:
            desired = scheduler.heartbeat(name, [r.model_dump() for r in body.reports],
                                          [g.model_dump() for g in body.gpus])
        except UnknownAgentError:
            raise HTTPException(409, f"agent {name!r} is not registered (or missed its lease): register again") \
                from None
        return {"desired": desired}

    return app
