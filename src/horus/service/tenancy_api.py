"""HTTP routes of the tenancy: ``/v1/queues`` and ``/v1/priority-classes`` (list: admin and users; change:
admin only). A change is durable in the store before the reply, and the scheduler's core is rebuilt around it
(``LiveScheduler.put_queue``...). Deleting a queue or a class that queued or running jobs use is a 409."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Path, Response

from horus.service.api import READ_ERRORS, WRITE_ERRORS, errors
from horus.service.auth import Identity
from horus.service.scheduler import LiveScheduler
from horus.service.schemas import TENANT_NAME, PriorityClassBody, QueueBody
from horus.tenancy import parse_priority_class, parse_queue

Name = Annotated[str, Path(pattern=TENANT_NAME, description="1-63 letters, digits, '-', '_' or '.'")]
CHANGED = {200: {"description": "replaced"}, 201: {"description": "created"}}


def mount_tenancy(app: FastAPI, scheduler: LiveScheduler, reader: Callable[..., Identity],
                  writer: Callable[..., Identity], need: Callable[..., Identity]) -> None:
    """Add the tenancy's routes to ``app`` (``reader``/``writer``: the API's identifying dependencies)."""
    Reader, Writer = Depends(reader), Depends(writer)  # parameter defaults, as in horus.service.api

    @app.get("/v1/queues", tags=["tenancy"], responses=errors(*READ_ERRORS))
    def list_queues(who: Identity = Reader) -> dict[str, Any]:
        """Every queue with its guarantee, borrowing limit and weight, and from the scheduler's ledger what it is
        charged now (``charged_gpus``), what its admitted jobs waiting for placement reserve, its jobs held by its
        quota, and its reclaimed jobs. No queue: no tenancy (every job is scheduled as if there were none)."""
        need(who, "admin", "user")
        tenants = scheduler.tenants
        return {"queues": scheduler.queue_views(), "default_queue": tenants.default_queue,
                "charge": None if tenants.tenancy is None else tenants.tenancy.charge}

    @app.put("/v1/queues/{name}", tags=["tenancy"], responses={**CHANGED, **errors(*WRITE_ERRORS)})
    def put_queue(name: Name, body: QueueBody, response: Response, who: Identity = Writer) -> dict[str, Any]:
        """Create (201) or replace (200) a queue (admin). Running jobs keep running; a queue now above its
        borrowing limit gives back its least-attained jobs at the next scheduling step."""
        need(who, "admin")
        queue = parse_queue({"name": name, **body.model_dump()}, "body")
        if scheduler.put_queue(queue):
            response.status_code = 201
        return next(q for q in scheduler.queue_views() if q["name"] == name)

    @app.delete("/v1/queues/{name}", tags=["tenancy"], responses=errors(*WRITE_ERRORS, 404, 409))
    def delete_queue(name: Name, who: Identity = Writer) -> dict[str, Any]:
        """Delete a queue (admin); 409 while jobs of it are queued or running (jobs that name no queue are of the
        default queue). The last queue deleted, the service schedules without a tenancy."""
        need(who, "admin")
        _deleted(scheduler.delete_queue(name), "queue", name)
        return {"deleted": name}

    @app.get("/v1/priority-classes", tags=["tenancy"], responses=errors(*READ_ERRORS))
    def list_classes(who: Identity = Reader) -> dict[str, Any]:
        """Every priority class, highest value first (``normal``, value 0, preemptible, is built in; a stored class
        of that name replaces it)."""
        need(who, "admin", "user")
        return {"priority_classes": scheduler.class_views(), "default_priority": scheduler.tenants.default_priority}

    @app.put("/v1/priority-classes/{name}", tags=["tenancy"], responses={**CHANGED, **errors(*WRITE_ERRORS)})
    def put_class(name: Name, body: PriorityClassBody, response: Response, who: Identity = Writer) -> dict[str, Any]:
        """Create (201) or replace (200) a priority class (admin)."""
        need(who, "admin")
        cls = parse_priority_class({"name": name, **body.model_dump()}, "body")
        if scheduler.put_priority_class(cls):
            response.status_code = 201
        return next(c for c in scheduler.class_views() if c["name"] == name)

    @app.delete("/v1/priority-classes/{name}", tags=["tenancy"], responses=errors(*WRITE_ERRORS, 404, 409))
    def delete_class(name: Name, who: Identity = Writer) -> dict[str, Any]:
        """Delete a stored priority class (admin); 409 while queued or running jobs are of it; 404 for the
        built-in ``normal`` (nothing stored to delete) or an unknown name."""
        need(who, "admin")
        _deleted(scheduler.delete_priority_class(name), "priority class", name)
        return {"deleted": name}


def _deleted(busy: int | None, what: str, name: str) -> None:
    if busy is None:
        raise HTTPException(404, f"no {what} {name!r}")
    if busy:
        raise HTTPException(409, f"{what} {name!r} has {busy} queued or running job{'s' if busy > 1 else ''}: "
                                 "cancel them or let them finish first")
