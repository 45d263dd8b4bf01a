"""The HTTP API (FastAPI; OpenAPI at ``/docs``). Versioned under ``/v1``.

Every request but ``/healthz`` needs ``Authorization: Bearer <token>`` or a console session
cookie (401 without, 403 with a wrong one; tokens are never logged); reads go through without one
when the server runs with open reads. Who may do what (``horus.service.auth``): admin everything;
a user submits (into a queue whose ``users`` list it, or list none: else a 403) and sees, reads and cancels
its own jobs only (another user's job is a 404, and on
the cluster map another user's job is shown without id or name) and lists queues and priority classes,
which only an admin changes (``horus.service.tenancy_api``); an agent registers and heartbeats only as itself. Bad bodies are 422 responses naming the field; nothing a client sends produces a 500.
A write is authenticated before its body is read, and bodies are limited while they stream
(``horus.service.limits``); a store that cannot write makes 503s and a ``degraded`` ``/healthz``.
"""

from __future__ import annotations

import json
import logging
import re
import sqlite3
from typing import Annotated, Any, Literal, get_args

from fastapi import Depends, FastAPI, Header, HTTPException, Path, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect
from starlette.routing import Match

from horus import __version__
from horus.errors import HorusInputError, UnknownAgentError
from horus.service import models_onnx
from horus.service.auth import OPEN_READER, SESSION_COOKIE, Authenticator, Identity, Sessions, create_token
from horus.service.limits import RequestGate
from horus.service.listing import job_listing
from horus.service.scheduler import LiveScheduler
from horus.service.schemas import AgentJoin, AgentRegister, Heartbeat, JobProgress, JobSubmit, job_view
from horus.service.store import JOB_STATES, NewJob, StoreUnavailable, is_store_failure, one_line
from horus.service.tenants import NotAQueueUser

log = logging.getLogger("horus.service")

MAX_BODY_BYTES = 4 * 1024 * 1024  # every request but model uploads
BRIEF_FIELDS = ("id", "name", "owner", "state", "model", "num_gpus", "placement", "submitted", "queued_since",
                "started", "ended", "iterations", "iterations_done", "observed_rate", "reason", "waiting", "queue",
                "priority", "batch_size", "input_size", "precision", "optimizer")
JobId = Annotated[int, Path(ge=1, le=2**62, description="job id")]
PROGRESS_PATH = re.compile(r"/v1/jobs/[^/]+/progress")
JobState = Literal["queued", "running", "finished", "failed", "cancelled"]
assert get_args(JobState) == JOB_STATES
Auth = Annotated[str | None, Header(include_in_schema=False)]  # documented as the bearer security scheme


class ErrorItem(BaseModel):
    """One refused field: where (``loc``), why (``msg``, ``type``) and, when it is plain JSON, the value."""

    loc: list[str | int]
    msg: str
    type: str
    input: Any = None


class ErrorReply(BaseModel):
    """Every error response: ``detail`` is one line, or one item per refused field (400, 413 and 422 name it)."""

    detail: str | list[ErrorItem]


_WHY = {400: "the body could not be read", 401: "no credential", 403: "a wrong credential, or a role that may not "
        "do this", 404: "no such job (or another user's), queue or priority class", 409: "the request conflicts with itself or with the "
        "server's state", 413: "the body is too large", 422: "the request does not match this schema",
        503: "the store cannot be read or written now (Retry-After)"}


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for the error codes an operation can answer (all with ``ErrorReply``)."""
    return {code: {"model": ErrorReply, "description": _WHY[code]} for code in codes}


READ_ERRORS = (401, 403, 422, 503)
WRITE_ERRORS = (400, 401, 403, 413, 422, 503)


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
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    auth = Authenticator(scheduler.store, token)
    sessions = Sessions()

    def identify(request: Request, authorization: str | None, *, reading: bool) -> Identity:
        if authorization:
            scheme, _, value = authorization.partition(" ")
            who = auth.identify(value) if scheme.lower() == "bearer" else None
            if who is None:
                raise HTTPException(403, "wrong token")
            return who
        session = sessions.token(request.cookies.get(SESSION_COOKIE))
        who = auth.identify(session) if session else None
        if who is not None:
            if not reading and request.headers.get("x-horus-console") != "1":
                raise HTTPException(403, "a write with a console session needs the 'X-Horus-Console: 1' header")
            return who
        if reading and open_reads:
            return OPEN_READER
        raise HTTPException(401, "this request needs 'Authorization: Bearer <token>'",
                            headers={"WWW-Authenticate": "Bearer"})

    def writer(request: Request, authorization: Auth = None) -> Identity:
        return identify(request, authorization, reading=False)

    def reader(request: Request, authorization: Auth = None) -> Identity:
        return identify(request, authorization, reading=True)

    def need(who: Identity, *roles: str) -> Identity:
        if who.role not in roles:
            raise HTTPException(403, f"the {who.role} role cannot do this")
        return who

    Writer = Depends(writer)  # noqa: N806 - used as a parameter default: `who: Identity = Writer`
    Reader = Depends(reader)  # noqa: N806

    def own_job(who: Identity, job_id: int) -> Any:
        """The job, if this caller may see it (otherwise 404: its existence is not revealed)."""
        row = scheduler.store.job(job_id)
        if row is None or not who.owns(row.owner):
            raise HTTPException(404, f"no job {job_id}")
        return row

    async def admit(request: Request) -> None:
        """An API write is authenticated from its headers before its body is read (401/403 however large the
        body); the route's dependency checks again. A job's progress carries a job token, checked with its body."""
        path = request.scope["path"]
        if request.method in ("GET", "HEAD", "OPTIONS") or not path.startswith("/v1/"):
            return
        authorization = request.headers.get("authorization")
        if PROGRESS_PATH.fullmatch(path):
            if not authorization:
                raise HTTPException(401, "needs 'Authorization: Bearer <job token>'",
                                    headers={"WWW-Authenticate": "Bearer"})
            return
        await run_in_threadpool(identify, request, authorization, reading=False)  # may read the store

    app.add_middleware(RequestGate, admit=admit,
                       limit_for=lambda path: models_onnx.MAX_ONNX_BYTES if path == "/v1/models" else MAX_BODY_BYTES)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        """422 naming each field; the offending value is echoed only when it is plain JSON (never NaN or inf)."""
        return JSONResponse({"detail": [_error_item(e) for e in exc.errors()]}, status_code=422)

    @app.exception_handler(HorusInputError)
    async def input_error(request: Request, exc: HorusInputError) -> JSONResponse:
        return JSONResponse({"detail": [{"loc": ["body", exc.source], "msg": exc.message, "type": "value_error"}]},
                            status_code=422)

    @app.exception_handler(405)
    async def method_not_allowed(request: Request, exc: Exception) -> JSONResponse:
        """405 whose ``Allow`` lists every method of the path (Starlette lists only those of its first route)."""
        methods: set[str] = set()
        for route in app.router.routes:
            if isinstance(getattr(route, "methods", None), set) and route.matches(request.scope)[0] != Match.NONE:
                methods |= route.methods
        return JSONResponse({"detail": "Method Not Allowed"}, status_code=405,
                            headers={"Allow": ", ".join(sorted(methods))})

    @app.exception_handler(StoreUnavailable)
    async def store_unavailable(request: Request, exc: StoreUnavailable) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=503, headers={"Retry-After": "5"})

    @app.exception_handler(sqlite3.DatabaseError)
    async def store_failed(request: Request, exc: sqlite3.DatabaseError) -> JSONResponse:
        """A read the store could not make (I/O error, corrupt page): 503 with one line; a constraint or
        programming error is a bug (500)."""
        if not is_store_failure(exc):
            raise exc
        return JSONResponse({"detail": f"the store failed ({one_line(exc)})"}, status_code=503,
                            headers={"Retry-After": "5"})

    @app.get("/healthz", tags=["service"], responses={503: {"description": "degraded: the store cannot write"}})
    def healthz() -> JSONResponse:
        """``ok``, or ``degraded`` (503) while the store cannot write (disk full, read-only, I/O error)."""
        problem = scheduler.store.write_error
        if problem is None:
            return JSONResponse({"status": "ok", "version": __version__})
        return JSONResponse({"status": "degraded", "version": __version__, "store": f"cannot write: {problem}"},
                            status_code=503)

    @app.get("/metrics", tags=["service"], response_class=PlainTextResponse, responses=errors(401, 403, 503))
    def metrics(who: Identity = Reader) -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST

        need(who, "admin", "user")
        return Response(scheduler.metrics.render(), media_type=CONTENT_TYPE_LATEST)

    @app.post("/v1/jobs", tags=["jobs"], status_code=201,
              responses={200: {"description": "a retry: the job first submitted with this idempotency key"},
                         **errors(*WRITE_ERRORS, 409)})
    def submit(body: JobSubmit, response: Response, who: Identity = Writer,
               idempotency_key: Annotated[str | None, Header(max_length=200)] = None) -> dict[str, Any]:
        """Queue a job (owned by the caller). A retry with the same idempotency key (body field or header) by the
        same caller returns the first job (200). 409: a name in both env and secret_env, a model the server does
        not know, more GPUs (of the type asked for) than the cluster has, a queue or priority class that does
        not exist, an input size below the model's smallest, or input_size / precision / optimizer without a model.
        403: a user token submitting into a queue (named, or the default) whose ``users`` do not list it."""
        need(who, "admin", "user")
        clash = body.clash()
        if clash:
            raise HTTPException(409, f"secret_env: {clash}")
        key = body.idempotency_key or idempotency_key
        new = NewJob(model=body.model or "", batch_size=body.batch_size if body.model else 0,
                     num_gpus=body.num_gpus, command=body.command, env={**body.env, **body.secret_env},
                     cwd=body.cwd, name=body.name, gpu_type=body.gpu_type, gpu_fraction=body.gpu_fraction,
                     iterations=body.iterations, idem_key=key, owner=who.name, secret_keys=tuple(body.secret_env),
                     queue=body.queue, priority=body.priority, input_size=body.input_size,
                     precision=body.precision, optimizer=body.optimizer)
        try:
            row, created = scheduler.submit(new, user=None if who.is_admin else who.name)
        except HorusInputError as exc:  # valid by the schema, refused by the server's state (cluster, models)
            raise HTTPException(409, f"{exc.source}: {exc.message}") from None
        except NotAQueueUser as exc:  # nothing stored
            raise HTTPException(403, str(exc)) from None
        if not created:
            response.status_code = 200
        return job_view(row, prediction=scheduler.prediction(row), tenant=scheduler.tenant_of(row))

    @app.get("/v1/jobs", tags=["jobs"], responses=errors(*READ_ERRORS))
    def list_jobs(who: Identity = Reader, state: Annotated[list[JobState] | None, Query()] = None,
                  limit: Annotated[int, Query(ge=1, le=100_000)] = 1000,
                  brief: Annotated[bool, Query(description="only the fields a listing shows (no command, "
                                                           "env, events)")] = False,
                  before: Annotated[int | None, Query(ge=1, le=2**62, description="only jobs with smaller ids: "
                                                     "the previous page's `next`")] = None) -> Response:
        """Jobs the caller may see (a user: its own), newest first, optionally only in the given states. At most
        8 MiB of jobs per response: ``truncated`` says that budget cut the page short of ``limit``, ``next`` is the
        ``before`` of the next page (null: no more)."""
        need(who, "admin", "user")
        owner = None if who.is_admin else who.name

        def view(r: Any) -> dict[str, Any]:
            v = job_view(r, telemetry=scheduler.telemetry(r.job_id) if r.state == "running" else None,
                         waiting=scheduler.wait_reason(r.job_id) if r.state == "queued" else None,
                         hide_env=who is OPEN_READER, tenant=scheduler.tenant_of(r))
            return {k: v[k] for k in BRIEF_FIELDS if k in v} if brief else v

        # plain JSON of plain values, one job at a time: no FastAPI per-field encoder, and bounded in bytes
        body = job_listing(lambda below, n: scheduler.store.jobs(states=state, limit=n, newest_first=True,
                                                                 owner=owner, before=below),
                           view, limit=limit, before=before, counts=scheduler.store.counts(owner=owner))
        return Response(body, media_type="application/json")

    @app.get("/v1/jobs/{job_id}", tags=["jobs"], responses=errors(*READ_ERRORS, 404))
    def get_job(job_id: JobId, who: Identity = Reader) -> dict[str, Any]:
        need(who, "admin", "user")
        row = own_job(who, job_id)
        view = job_view(row, prediction=scheduler.prediction(row), telemetry=scheduler.telemetry(row.job_id),
                        events=scheduler.store.events(job_id), waiting=scheduler.wait_reason(row.job_id),
                        hide_env=who is OPEN_READER, tenant=scheduler.tenant_of(row),
                        observation=scheduler.observation(row))
        view["history"] = scheduler.history(row.job_id)
        return view

    @app.post("/v1/jobs/{job_id}/cancel", tags=["jobs"], responses=errors(*WRITE_ERRORS, 404))
    def cancel(job_id: JobId, who: Identity = Writer) -> dict[str, Any]:
        """Cancel a queued or running job (a running one is stopped: SIGTERM, grace period, SIGKILL)."""
        need(who, "admin", "user")
        own_job(who, job_id)
        row = scheduler.cancel(job_id)
        if row is None:
            raise HTTPException(404, f"no job {job_id}")
        return job_view(row, tenant=scheduler.tenant_of(row))

    @app.post("/v1/jobs/{job_id}/progress", tags=["jobs"], status_code=204, responses=errors(*WRITE_ERRORS))
    def progress(job_id: JobId, body: JobProgress, authorization: Auth = None) -> Response:
        """Progress reported by the job itself, with its job token (``HORUS_JOB_TOKEN``; any other is a 403)."""
        if not authorization:
            raise HTTPException(401, "needs 'Authorization: Bearer <job token>'", headers={"WWW-Authenticate": "Bearer"})
        if not scheduler.job_progress(str(job_id), body.attempt, authorization.partition(" ")[2].strip(),
                                      body.iteration):
            raise HTTPException(403, "wrong job token")
        return Response(status_code=204)

    @app.get("/v1/cluster", tags=["cluster"], responses=errors(*READ_ERRORS))
    def cluster(who: Identity = Reader) -> dict[str, Any]:
        """Every GPU with its residents, predicted and observed utilization and memory (a user sees other users'
        residents only as ``null``)."""
        need(who, "admin", "user")
        return scheduler.cluster_view(viewer=None if who.is_admin else who.name)

    @app.get("/v1/colocations", tags=["cluster"], responses=errors(*READ_ERRORS))
    def colocations(who: Identity = Reader, limit: Annotated[int, Query(ge=1, le=100_000)] = 1000) -> dict[str, Any]:
        """The co-location ledger, newest first: every set of jobs that shared a GPU, predicted and observed
        combined normalized throughput, how long, and how it ended (a user sees only sets with a job of its own)."""
        need(who, "admin", "user")
        return {"sets": scheduler.ledger_view(limit, viewer=None if who.is_admin else who.name)}

    @app.get("/v1/whoami", tags=["service"], responses=errors(*READ_ERRORS))
    def whoami(who: Identity = Reader) -> dict[str, Any]:
        return {"name": who.name, "role": who.role}

    uploads = models_onnx.upload_folder(scheduler.store.path.parent)

    @app.post("/v1/models", tags=["models"], status_code=201, responses=errors(*WRITE_ERRORS),
              openapi_extra={"requestBody": {"required": True, "description": "an ONNX graph (a serialized "
                             "ModelProto); anything else is a 422 naming the model file",
                             "content": {"application/octet-stream": {
                                 "schema": {"type": "string", "format": "binary", "minLength": 1,
                                            "maxLength": models_onnx.MAX_ONNX_BYTES}}}}})
    async def upload_model(request: Request, who: Identity = Writer) -> dict[str, Any]:
        """Upload an ONNX graph (request body, at most 512 MiB); submit jobs with the returned model name. The
        body streams to a file and a separate process parses it: the API and the agents' heartbeats go on."""
        need(who, "admin", "user")
        try:
            path, name = await models_onnx.receive_upload(request.stream(), uploads)
        except ClientDisconnect:
            raise HTTPException(400, "the client went away during the upload") from None
        except models_onnx.UploadTooLarge:
            raise HTTPException(413, f"request body larger than {models_onnx.MAX_ONNX_BYTES} bytes",
                                headers={"Connection": "close"}) from None
        except OSError as exc:
            raise HTTPException(503, f"cannot store the upload ({exc.strerror})") from None
        try:
            row = (await run_in_threadpool(scheduler.store.models)).get(name)  # the same file again: known
            if row is None:
                row = await models_onnx.analyse_upload(path, name)
        finally:
            models_onnx.discard_upload(path)

        def add() -> None:
            with scheduler.lock:
                models_onnx.register_catalog_row(name, row)
                scheduler.store.add_model(name, row, scheduler.clock())

        await run_in_threadpool(add)  # the scheduler's lock only for the registration, never on the event loop
        return {"model": name, "batch_size": row["batch_size"], "params": row["params"]}

    @app.post("/v1/agents/join", tags=["agents"], responses=errors(*WRITE_ERRORS, 409))
    def join(body: AgentJoin, who: Identity = Writer) -> dict[str, Any]:
        """Exchange a join token for a credential bound to agent ``name`` (shown once; 409 if the name has one)."""
        need(who, "admin", "join")
        try:
            token = create_token(scheduler.store, body.name, "agent")
        except HorusInputError as exc:
            if "exists" not in exc.message:
                raise HTTPException(422, f"name: {exc.message}") from None
            raise HTTPException(409, f"the name {body.name!r} already has a credential; an admin revokes it first "
                                     f"(horus token revoke {body.name})") from None
        log.info("agent %s joined (credential issued to %s)", body.name, who.name)
        return {"name": body.name, "token": token}

    @app.post("/v1/agents", tags=["agents"], responses=errors(*WRITE_ERRORS, 409))
    def register_agent(body: AgentRegister, who: Identity = Writer) -> dict[str, Any]:
        """Register (or re-register) an agent and its GPUs (409: a GPU index described twice)."""
        if not who.may_act_as_agent(body.name):
            raise HTTPException(403, f"this credential cannot register agent {body.name!r}")
        clash = body.clash()
        if clash:
            raise HTTPException(409, clash)
        row = scheduler.register_agent(body.name, body.hostname, [g.model_dump() for g in body.gpus],
                                       reports=[r.model_dump() for r in body.reports])
        return {"name": row.name, "lease_s": scheduler.lease_s, **scheduler.fencing()}

    @app.post("/v1/agents/{name}/heartbeat", tags=["agents"], responses=errors(*WRITE_ERRORS, 409))
    def heartbeat(name: Annotated[str, Path(max_length=128)], body: Heartbeat, who: Identity = Writer) -> dict[str, Any]:
        if not who.may_act_as_agent(name):
            raise HTTPException(403, f"this credential cannot act as agent {name!r}")
        try:
            desired = scheduler.heartbeat(name, [r.model_dump() for r in body.reports],
                                          [g.model_dump() for g in body.gpus])
        except UnknownAgentError:
            raise HTTPException(409, f"agent {name!r} is not registered (or missed its lease): register again") \
                from None
        return {"desired": desired, **scheduler.fencing()}

    from horus.service.console import mount_console
    from horus.service.tenancy_api import mount_tenancy

    mount_tenancy(app, scheduler, reader, writer, need)
    mount_console(app, auth, sessions)
    return app


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's schema, plus the bearer scheme every operation but ``/healthz`` needs (the job's own token for
    ``progress``; a console session cookie works too, see ``horus.service.console``)."""
    if app.openapi_schema is None:
        schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        schema.setdefault("components", {})["securitySchemes"] = {
            "bearer": {"type": "http", "scheme": "bearer", "description": "a token: the admin token file's, or "
                       "one made by `horus token create` (roles admin, user, agent, join)"}}
        error = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorReply"}}}
        for path, item in schema.get("paths", {}).items():
            for operation in item.values():
                operation["security"] = [] if path == "/healthz" else [{"bearer": []}]
                for code, response in operation.get("responses", {}).items():
                    if code.isdigit() and int(code) in _WHY:  # errors are JSON, whatever the success is
                        response["content"] = error
        app.openapi_schema = schema
    return app.openapi_schema
