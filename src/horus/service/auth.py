"""Who is calling: named credentials with a role, and console sessions.

Roles: ``admin`` (the server's token file, and any admin token created later) may do everything;
``user`` submits jobs and sees, cancels and reads only its own; ``agent`` may only register and
heartbeat as the agent of its own name (an admin token may act as any agent, so ``horus agent
--token-file <server token>`` keeps working). Tokens are random (32 bytes), shown once when created
and stored as SHA-256 hashes (``tokens`` table), so a copy of the store reveals none.

Console sessions are random ids kept in memory (lost on restart: sign in again), sent as an
HttpOnly, SameSite=Strict cookie; a write made with a session must also carry the
``X-Horus-Console`` header, which a cross-site form cannot set.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from dataclasses import dataclass

from horus.errors import HorusInputError
from horus.service.store import ROLES, Store, StoreError
from horus.validation import TOKEN_NAME as NAME_PATTERN

ADMIN = "admin"
SESSION_COOKIE = "horus_session"
SESSION_TTL_S = 12 * 3600.0
MAX_SESSIONS = 10_000


@dataclass(frozen=True)
class Identity:
    """An authenticated caller."""

    name: str
    role: str

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"

    def owns(self, owner: str | None) -> bool:
        """May this caller see and act on a job of ``owner``? (admin: every job; a user: its own.)"""
        return self.is_admin or (self.role == "user" and owner == self.name)

    def may_act_as_agent(self, agent: str) -> bool:
        return self.is_admin or (self.role == "agent" and agent == self.name)


OPEN_READER = Identity("(open reads)", "admin")  # with --open-reads, reads without a token see everything


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class Authenticator:
    """Maps a bearer token to an ``Identity``: the admin token of the token file, or a stored credential."""

    def __init__(self, store: Store, admin_token: str) -> None:
        self.store = store
        self._admin = admin_token.encode()

    def identify(self, token: str) -> Identity | None:
        token = token.strip()
        if not token:
            return None
        if hmac.compare_digest(token.encode(), self._admin):
            return Identity(ADMIN, "admin")
        found = self.store.token_by_hash(token_hash(token))
        return None if found is None else Identity(*found)


def create_token(store: Store, name: str, role: str, now: float | None = None) -> str:
    """Create a named credential; returns the token (the store keeps only its hash)."""
    if role not in ROLES:
        raise HorusInputError("--role", f"expected one of {', '.join(ROLES)}, got {role!r}")
    if not NAME_PATTERN.fullmatch(name) or name == ADMIN:
        raise HorusInputError("--name", "expected 1-64 letters, digits, '_', '.' or '-' (not 'admin'), "
                                        f"got {name[:70]!r}")
    token = secrets.token_urlsafe(32)
    try:
        store.add_token(name, role, token_hash(token), time.time() if now is None else now)
    except StoreError as exc:
        raise HorusInputError("--name", str(exc)) from None
    return token


class Sessions:
    """Console sessions: random id -> (the token it was opened with, expiry), in memory. The token is
    identified again on every request, so revoking it ends its sessions too."""

    def __init__(self, ttl_s: float = SESSION_TTL_S) -> None:
        self.ttl_s = ttl_s
        self._sessions: dict[str, tuple[str, float]] = {}
        self._lock = threading.Lock()

    def open(self, token: str) -> str:
        sid = secrets.token_urlsafe(32)
        now = time.monotonic()
        with self._lock:
            if len(self._sessions) >= MAX_SESSIONS:
                self._sessions = {k: v for k, v in self._sessions.items() if v[1] > now}
                while len(self._sessions) >= MAX_SESSIONS:
                    self._sessions.pop(next(iter(self._sessions)))
            self._sessions[sid] = (token, now + self.ttl_s)
        return sid

    def token(self, sid: str | None) -> str | None:
        if not sid:
            return None
        with self._lock:
            found = self._sessions.get(sid)
            if found is None:
                return None
            if found[1] < time.monotonic():
                del self._sessions[sid]
                return None
            return found[0]

    def close(self, sid: str | None) -> None:
        with self._lock:
            self._sessions.pop(sid or "", None)
