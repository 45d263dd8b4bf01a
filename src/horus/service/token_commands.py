"""``horus token create|list|revoke``: named credentials of the live service, managed on the server's machine.

They write the state directory's store directly (SQLite in WAL mode: safe while ``horus serve`` runs;
a new or revoked token takes effect at its next request). The token is printed once; only its
SHA-256 hash is stored.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from horus.errors import HorusInputError
from horus.validation import path_arg


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("token", help="create, list or revoke credentials of users and agents",
                              description="Credentials of the live service. Roles: user (submits jobs; sees and "
                              "cancels only its own), agent (joins machines under its own name), join (lets machines "
                              "obtain their own agent credential, and nothing else), admin (everything, like the "
                              "token file).")
    sub = p.add_subparsers(dest="token_command", metavar="ACTION", required=True)
    create = sub.add_parser("create", help="create a named token and print it (once)")
    create.add_argument("--name", required=True, help="user or agent name (an agent token acts only as this agent)")
    create.add_argument("--role", required=True, choices=("user", "agent", "admin", "join"),
                        help="join: a token machines exchange once for their own agent credential "
                             "(horus agent --join-token-file)")
    create.add_argument("--out", type=path_arg, help="write the token to this file (mode 0600) instead of printing it")
    create.set_defaults(func=run_create)
    listing = sub.add_parser("list", help="list tokens (names, roles, when created or revoked; never the tokens)")
    listing.set_defaults(func=run_list)
    revoke = sub.add_parser("revoke", help="revoke a token (its console sessions end too)")
    revoke.add_argument("name")
    revoke.set_defaults(func=run_revoke)
    for q in (create, listing, revoke):
        q.add_argument("--state-dir", type=path_arg, help="the server's data directory (default $HORUS_STATE_DIR or "
                                                      "the user data dir)")


def _store(args: argparse.Namespace):  # noqa: ANN202 - Store, imported lazily
    from horus.service.server import default_state_dir
    from horus.service.store import Store, StoreError

    path = (args.state_dir or default_state_dir()) / "horus.db"
    shown = str(path) if len(str(path)) <= 200 else str(path)[:200] + "..."
    try:
        found = path.is_file()
    except OSError as exc:  # e.g. a name longer than the file system allows
        raise HorusInputError("--state-dir", f"{shown}: {exc.strerror or exc}; expected the server's data "
                                             "directory") from None
    if not found:
        raise HorusInputError("--state-dir", f"no Horus state at {shown} (start `horus serve` once, or name the "
                                             "server's --state-dir)")
    try:
        return Store(path)
    except StoreError as exc:
        raise HorusInputError("--state-dir", str(exc)) from None


def run_create(args: argparse.Namespace) -> int:
    from horus.service.auth import create_token

    store = _store(args)
    try:
        out = _open_out(args.out) if args.out is not None else None  # before the token exists: nothing half-done
        try:
            token = create_token(store, args.name, args.role)
        except BaseException:
            if out is not None:
                os.close(out)
                args.out.unlink(missing_ok=True)
            raise
    finally:
        store.close()
    if out is None:
        print(token)
        print(f"token of {args.role} {args.name!r}: shown once, only its hash is stored", file=sys.stderr)
    else:
        with os.fdopen(out, "w") as fh:
            fh.write(token + "\n")
        print(f"token of {args.role} {args.name!r} written to {args.out}", file=sys.stderr)
    return 0


def _open_out(path: Path) -> int:
    """A new file (mode 0600) for ``--out``, in a directory that exists; never an existing file."""
    from horus.validation import check_output_path

    shown = str(path) if len(str(path)) <= 200 else str(path)[:200] + "..."
    try:
        if path.exists() or path.is_symlink():
            raise HorusInputError("--out", f"{shown} exists; not overwritten")
        check_output_path(path, "--out", directory=False)
        if not path.parent.is_dir():
            raise HorusInputError("--out", f"{shown}: no directory {path.parent}; expected a file in an existing "
                                           "directory")
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:  # a name too long, a read-only place, a race with another writer
        raise HorusInputError("--out", f"{shown}: {exc.strerror or exc}; expected a new file in a writable "
                                       "directory") from None


def run_list(args: argparse.Namespace) -> int:
    store = _store(args)
    try:
        rows = store.tokens()
    finally:
        store.close()
    print(f"{'name':<24} {'role':<6} {'created':<20} revoked")
    for r in rows:
        revoked = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r["revoked"])) if r["revoked"] else "-"
        print(f"{r['name']:<24} {r['role']:<6} {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(r['created'])):<20} "
              f"{revoked}")
    return 0


def run_revoke(args: argparse.Namespace) -> int:
    store = _store(args)
    try:
        done = store.revoke_token(args.name, time.time())
    finally:
        store.close()
    if not done:
        raise HorusInputError("NAME", f"no unrevoked token named {args.name!r}")
    print(f"revoked {args.name!r}", file=sys.stderr)
    return 0
