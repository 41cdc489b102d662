"""Browser sessions for the web UI. A browser signs in once with an API key and then holds only an opaque token in an
HttpOnly, SameSite=Strict cookie; the key never reaches page JavaScript (and EventSource cannot send headers anyway).

Sessions are kept by the token's SHA-256, never the token. The app keeps them in its database
(``DatabaseSessionStore``), so a restarted server, or any other API process on the same database, still knows a
browser that signed in; ``MemorySessionStore`` keeps them in one process (a restart signs everyone out). A session
carries the key's id and scopes, so a revoked key ends its sessions at the next request. A request authenticated by
cookie that changes something must also carry this site's ``Origin`` (the CSRF defence besides SameSite=Strict)."""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from starlette.requests import Request

from lamarck.api.keys import SETTINGS_KEY_ID, Principal, Scope
from lamarck.platform.storage import api_repositories as api_repo
from lamarck.platform.storage.database import Database

COOKIE = "lamarck_session"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
SESSION_TTL_SECONDS = 12 * 3600


class SessionStore(Protocol):
    """Open sessions, each valid for ``ttl_seconds`` from sign-in (the cookie's max-age too)."""

    ttl_seconds: float

    def open(self, principal: Principal) -> str:
        """A new session for ``principal``; returns the token the cookie carries."""
        ...

    def get(self, token: str) -> Principal | None:
        """The session's principal; None for a token unknown, signed out or expired."""
        ...

    def close(self, token: str) -> None:
        """Signs the session out (a token unknown is no error)."""
        ...


@dataclass(frozen=True)
class _Entry:
    principal: Principal
    expires_at: float


class MemorySessionStore:
    """Sessions in this process's memory; the oldest go first past ``max_sessions``."""

    def __init__(
        self,
        *,
        ttl_seconds: float = SESSION_TTL_SECONDS,
        max_sessions: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl_seconds = ttl_seconds
        self.max_sessions = max_sessions
        self._clock = clock
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.Lock()

    def open(self, principal: Principal) -> str:
        token = secrets.token_urlsafe(32)
        with self._lock:
            self._entries[_digest(token)] = _Entry(principal, self._clock() + self.ttl_seconds)
            while len(self._entries) > self.max_sessions:
                self._entries.popitem(last=False)
        return token

    def get(self, token: str) -> Principal | None:
        key = _digest(token)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            if entry.expires_at <= self._clock():
                del self._entries[key]
                return None
            return entry.principal

    def close(self, token: str) -> None:
        with self._lock:
            self._entries.pop(_digest(token), None)


class DatabaseSessionStore:
    """Sessions in the ``ui_sessions`` table. The clock is wall time (seconds since the epoch), since an expiry must
    mean the same thing to the next process; sessions that have ended are deleted as new ones open."""

    def __init__(
        self, db: Database, *, ttl_seconds: float = SESSION_TTL_SECONDS, clock: Callable[[], float] = time.time
    ) -> None:
        self.db = db
        self.ttl_seconds = ttl_seconds
        self._clock = clock

    def open(self, principal: Principal) -> str:
        token = secrets.token_urlsafe(32)
        now = self._clock()
        with self.db.session() as session:
            api_repo.add_ui_session(
                session,
                token_digest=_digest(token),
                key_id=principal.key_id,
                scopes=sorted(scope.value for scope in principal.scopes),
                expires_at=now + self.ttl_seconds,
                now=now,
            )
        return token

    def get(self, token: str) -> Principal | None:
        with self.db.session() as session:
            found = api_repo.find_ui_session(session, token_digest=_digest(token), now=self._clock())
            if found is None:
                return None
            return Principal(key_id=found.key_id, scopes=frozenset(Scope(value) for value in found.scopes))

    def close(self, token: str) -> None:
        with self.db.session() as session:
            api_repo.delete_ui_session(session, token_digest=_digest(token))


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def own_origin(request: Request) -> str:
    """This server's origin as the browser sees it (scheme and the Host it addressed)."""
    host = request.headers.get("host", "")
    return f"{request.url.scheme}://{host}"


def same_origin(request: Request) -> bool:
    """Whether the request's ``Origin`` header names this server; browsers send it on every cross-site write."""
    origin = request.headers.get("origin")
    return origin is not None and secrets.compare_digest(origin.encode(), own_origin(request).encode())


def key_still_valid(db: Database, principal: Principal) -> bool:
    """False once the session's key is revoked (or gone), so revoking a key signs its browsers out."""
    if principal.key_id == SETTINGS_KEY_ID:
        return True
    with db.session() as session:
        record = api_repo.find_api_key(session, key_id=principal.key_id)
        return record is not None and record.revoked_at is None
