"""API keys: creation, hashing and checking. A key is ``lmk_<id>_<secret>``; only its SHA-256 is stored, and a
presented key is compared with the stored hash in constant time (``hmac.compare_digest``)."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from enum import StrEnum

from lamarck.platform.storage import api_repositories as api_repo
from lamarck.platform.storage.database import Database

PREFIX = "lmk"


class Scope(StrEnum):
    READ = "read"
    TASKS = "tasks"
    RUNS = "runs"
    MODELS = "models"
    ADMIN = "admin"  # implies every other scope


SETTINGS_KEY_ID = "settings"  # the id reported for the key from ApiSettings.api_key


@dataclass(frozen=True)
class Principal:
    """The authenticated caller: a key id (never the key) and its scopes."""

    key_id: str
    scopes: frozenset[Scope]

    def allows(self, scope: Scope) -> bool:
        return Scope.ADMIN in self.scopes or scope in self.scopes


def parse_scopes(values: list[str]) -> list[Scope]:
    known = ", ".join(s.value for s in Scope)
    scopes: list[Scope] = []
    for value in values:
        for part in value.split(","):
            if not part.strip():
                continue
            try:
                scopes.append(Scope(part.strip()))
            except ValueError:
                raise ValueError(f"unknown scope {part.strip()!r}: use one or more of {known}") from None
    if not scopes:
        raise ValueError(f"give a key at least one scope: {known}")
    return sorted(set(scopes), key=list(Scope).index)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def create_key(db: Database, scopes: list[Scope], *, name: str = "") -> tuple[str, str]:
    """A new key's id and the key itself, which is not stored and cannot be shown again."""
    key_id = secrets.token_hex(6)
    key = f"{PREFIX}_{key_id}_{secrets.token_urlsafe(32)}"
    with db.session() as session:
        api_repo.add_api_key(
            session, key_id=key_id, key_hash=hash_key(key), scopes=[s.value for s in scopes], name=name
        )
    return key_id, key


def authenticate(db: Database, presented: str, *, settings_key: str | None = None) -> Principal | None:
    """The principal of a presented key, or None for an unknown, malformed or revoked key."""
    if settings_key is not None and hmac.compare_digest(presented.encode(), settings_key.encode()):
        return Principal(SETTINGS_KEY_ID, frozenset(Scope))
    parts = presented.split("_", 2)
    if len(parts) != 3 or parts[0] != PREFIX or not parts[1].isalnum() or len(parts[1]) > 32:
        return None
    with db.session() as session:
        record = api_repo.find_api_key(session, key_id=parts[1])
        stored = record.key_hash if record is not None else hash_key(secrets.token_hex(16))
        matches = hmac.compare_digest(hash_key(presented), stored)
        if record is None or not matches or record.revoked_at is not None:
            return None
        return Principal(record.id, frozenset(Scope(s) for s in record.scopes if s in Scope.__members__.values()))
