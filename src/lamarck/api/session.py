"""Browser sessions for the web UI. A browser signs in once with an API key and then holds only an opaque token in an
HttpOnly, SameSite=Strict cookie; the key never reaches page JavaScript (and EventSource cannot send headers anyway).

Sessions live in the server's memory, keyed by the token's SHA-256: a restarted server forgets them and the page asks
to sign in again. A session carries the key's id and scopes, so a revoked key ends its sessions at the next request.
A request authenticated by cookie that changes something must also carry this site's ``Origin`` (the CSRF defence
besides SameSite=Strict)."""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from starlette.requests import Request

from lamarck.api.keys import SETTINGS_KEY_ID, Principal
from lamarck.platform.storage import api_repositories as api_repo
from lamarck.platform.storage.database import Database

COOKIE = "lamarck_session"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


@dataclass(frozen=True)
class _Entry:
    principal: Principal
    expires_at: float


class SessionStore:
    """Open sessions, each valid for ``ttl_seconds`` from sign-in; the oldest go first past ``max_sessions``."""

    def __init__(
        self,
        *,
        ttl_seconds: float = 12 * 3600,
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
        """The session's principal; None for a token unknown, signed out or expired."""
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
