"""``horus queue create|list|delete`` and ``horus priority-class create|list|delete``: the live service's tenants,
over its API (changes need an admin token; a user may list). See docs/service.md, Queues (tenants)."""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

from horus.errors import HorusInputError
from horus.tenancy import MAX_USERS, PRIORITY_VALUE, QUOTA_GPUS, WEIGHT, check_name
from horus.validation import TOKEN_NAME, NumberArg


def register(subparsers: argparse._SubParsersAction) -> None:
    from horus.service.client import add_client_args

    q = subparsers.add_parser("queue", help="create, list or delete the live service's queues (tenants)",
                              description="Queues (tenants) of the live service: each is guaranteed GPUs, may "
                              "borrow idle GPUs up to a limit (reclaimed by preemption when their owners need them), "
                              "and shares borrowed GPUs by weight. No queue: no tenancy. Changes need an admin token.")
    sub = q.add_subparsers(dest="queue_command", metavar="ACTION", required=True)
    create = sub.add_parser("create", help="create (or replace) a queue")
    create.add_argument("name", help="queue name (1-63 letters, digits, '-', '_' or '.')")
    create.add_argument("--guaranteed", required=True, type=NumberArg(QUOTA_GPUS), metavar="N",
                        help="GPUs guaranteed to the queue (fractions allowed: a shared GPU is charged by share)")
    create.add_argument("--type", default="*", metavar="T",
                        help="GPU type the guarantee is of (default *: GPUs of any type)")
    create.add_argument("--borrow-limit", type=NumberArg(QUOTA_GPUS), metavar="N",
                        help="GPUs the queue may use beyond its guarantee (default: no limit but the cluster)")
    create.add_argument("--weight", type=NumberArg(WEIGHT), default=1.0, metavar="W",
                        help="fair-share weight among queues that borrow (default 1)")
    create.add_argument("--user", action="append", default=[], dest="users", metavar="NAME",
                        help="a user token that may submit into the queue (repeatable; none: every user; admins "
                             "always may)")
    create.set_defaults(func=run_queue_create)
    listing = sub.add_parser("list", help="list queues with their quotas and what each is charged now")
    listing.set_defaults(func=run_queue_list)
    delete = sub.add_parser("delete", help="delete a queue (refused while jobs of it are queued or running)")
    delete.add_argument("name", help="queue name")
    delete.set_defaults(func=run_queue_delete)
    for p in (create, listing, delete):
        add_client_args(p)

    c = subparsers.add_parser("priority-class", help="create, list or delete job priority classes",
                              description="Priority classes of the live service's jobs: within a queue, higher "
                              "values are admitted first and may preempt preemptible jobs of lower classes; only "
                              "preemptible jobs are reclaimed. 'normal' (0, preemptible) is built in.")
    sub = c.add_subparsers(dest="class_command", metavar="ACTION", required=True)
    create = sub.add_parser("create", help="create (or replace) a priority class")
    create.add_argument("name", help="class name (1-63 letters, digits, '-', '_' or '.')")
    create.add_argument("--value", required=True, type=NumberArg(PRIORITY_VALUE), help="larger is more important")
    create.add_argument("--no-preempt", action="store_true",
                        help="jobs of this class are never preempted for quota or priority")
    create.set_defaults(func=run_class_create)
    listing = sub.add_parser("list", help="list priority classes")
    listing.set_defaults(func=run_class_list)
    delete = sub.add_parser("delete", help="delete a priority class (refused while queued or running jobs use it)")
    delete.add_argument("name", help="class name")
    delete.set_defaults(func=run_class_delete)
    for p in (create, listing, delete):
        add_client_args(p)


def tenant_name(name: str, source: str) -> str:
    """A queue's or a priority class's name, else HorusInputError naming ``source``."""
    if not check_name(name):
        raise HorusInputError(source, f"expected 1-63 letters, digits, '-', '_' or '.', got {name[:70]!r}")
    return name


def _client(args: argparse.Namespace) -> Any:
    from horus.service.client import client_from

    return client_from(args)


def _print(args: argparse.Namespace, data: Any, line: str) -> int:
    print(json.dumps(data, indent=2) if args.json else line)
    return 0


def run_queue_create(args: argparse.Namespace) -> int:
    name = tenant_name(args.name, "NAME")
    if not re.fullmatch(r"\*|[A-Za-z0-9_.\-]{1,64}", args.type):
        raise HorusInputError("--type", f"expected a GPU type name or '*', got {args.type[:70]!r}")
    users = queue_users(args.users)
    body = {"guaranteed": {args.type: args.guaranteed}, "borrow_limit": args.borrow_limit, "weight": args.weight,
            "users": users}
    client = _client(args)
    queue = client.request("PUT", f"/v1/queues/{name}", json=body)
    return _print(args, queue, f"queue {name}: guaranteed {args.guaranteed:g} GPUs ({args.type}), borrow limit "
                               f"{'none' if args.borrow_limit is None else f'{args.borrow_limit:g}'}, weight "
                               f"{args.weight:g}, users {_users(users)}")


def queue_users(names: list[str]) -> list[str]:
    """``--user`` values: distinct user-token names, else HorusInputError naming ``--user``."""
    if len(names) > MAX_USERS:
        raise HorusInputError("--user", f"expected at most {MAX_USERS} users, got {len(names)}")
    seen: set[str] = set()
    for name in names:
        if not TOKEN_NAME.fullmatch(name):
            raise HorusInputError("--user", f"expected 1-64 letters, digits, '_', '.' or '-', got {name[:70]!r}")
        if name in seen:
            raise HorusInputError("--user", f"{name!r} is given twice")
        seen.add(name)
    return names


def _users(users: list[str]) -> str:
    return ", ".join(users) if users else "every user"


def run_queue_list(args: argparse.Namespace) -> int:
    data = _client(args).request("GET", "/v1/queues")
    if args.json:
        return _print(args, data, "")
    from rich.console import Console
    from rich.table import Table

    table = Table(title="queues" if data["queues"] else "queues (none: no tenancy)")
    for col in ("name", "guaranteed", "borrow limit", "weight", "users", "charged", "reserved", "held", "running",
                "reclaimed"):
        table.add_column(col, justify="left" if col == "name" else "right")
    for q in data["queues"]:
        guaranteed = ", ".join(f"{v:g}" if k == "*" else f"{v:g} {k}" for k, v in q["guaranteed"].items())
        table.add_row(q["name"] + (" (default)" if q["default"] else ""), guaranteed,
                      "-" if q["borrow_limit"] is None else f"{q['borrow_limit']:g}", f"{q['weight']:g}",
                      _users(q.get("users") or []),
                      f"{q['charged_gpus']:.2f}", f"{q['reserved_gpus']:.2f}", str(q["held_jobs"]),
                      str(q["running_jobs"]), str(q["reclaimed"]))
    Console().print(table)
    return 0


def run_queue_delete(args: argparse.Namespace) -> int:
    name = tenant_name(args.name, "NAME")
    return _print(args, _client(args).request("DELETE", f"/v1/queues/{name}"), f"queue {name} deleted")


def run_class_create(args: argparse.Namespace) -> int:
    name = tenant_name(args.name, "NAME")
    body = {"value": int(args.value), "preemptible": not args.no_preempt}
    cls = _client(args).request("PUT", f"/v1/priority-classes/{name}", json=body)
    return _print(args, cls, f"priority class {name}: value {int(args.value)}"
                             + ("" if body["preemptible"] else ", not preemptible"))


def run_class_list(args: argparse.Namespace) -> int:
    data = _client(args).request("GET", "/v1/priority-classes")
    if args.json:
        return _print(args, data, "")
    print(f"{'name':<24} {'value':>8}  preemptible")
    for c in data["priority_classes"]:
        label = c["name"] + (" (default)" if c["default"] else "")
        print(f"{label:<24} {c['value']:>8}  {'yes' if c['preemptible'] else 'no'}")
    return 0


def run_class_delete(args: argparse.Namespace) -> int:
    name = tenant_name(args.name, "NAME")
    return _print(args, _client(args).request("DELETE", f"/v1/priority-classes/{name}"),
                  f"priority class {name} deleted")
