"""One conformance suite for both session stores (in memory; in the database, on SQLite and PostgreSQL), and what only
the database store does: a session opened by one server is known to the next one on the same database."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from lamarck.api.keys import Principal, Scope
from lamarck.api.session import DatabaseSessionStore, MemorySessionStore, SessionStore
from lamarck.platform.storage.database import Database
from lamarck.platform.storage.records import UiSession

READER = Principal(key_id="k1", scopes=frozenset({Scope.READ}))
RUNNER = Principal(key_id="k2", scopes=frozenset({Scope.READ, Scope.RUNS}))


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


StoreFactory = Callable[[Clock], SessionStore]


@pytest.fixture(params=["memory", "database"])
def make_store(request: pytest.FixtureRequest, db: Database) -> StoreFactory:
    if request.param == "memory":
        return lambda clock: MemorySessionStore(ttl_seconds=60, clock=clock)
    return lambda clock: DatabaseSessionStore(db, ttl_seconds=60, clock=clock)


def test_a_session_gives_back_its_principal_and_nothing_else_does(make_store: StoreFactory) -> None:
    store = make_store(Clock())
    reader, runner = store.open(READER), store.open(RUNNER)
    assert reader != runner and len(reader) >= 40
    assert store.get(reader) == READER and store.get(runner) == RUNNER
    assert store.get("not-a-token") is None
    assert store.get(reader + "x") is None


def test_a_session_ends_when_closed_or_expired(make_store: StoreFactory) -> None:
    clock = Clock()
    store = make_store(clock)
    closed, expiring = store.open(READER), store.open(RUNNER)
    store.close(closed)
    store.close(closed)  # twice is no error
    store.close("never-opened")
    assert store.get(closed) is None and store.get(expiring) == RUNNER
    clock.now += 59
    assert store.get(expiring) == RUNNER
    clock.now += 1
    assert store.get(expiring) is None
    clock.now -= 30  # an expired session stays gone
    assert store.get(expiring) is None


def test_the_database_store_survives_a_restart_and_keeps_only_live_sessions(db: Database) -> None:
    clock = Clock()
    first = DatabaseSessionStore(db, ttl_seconds=60, clock=clock)
    token = first.open(RUNNER)
    old = first.open(READER)
    clock.now += 30
    restarted = DatabaseSessionStore(db, ttl_seconds=60, clock=clock)  # a new process on the same database
    assert restarted.get(token) == RUNNER
    clock.now += 31
    restarted.open(READER)  # opening drops the sessions that have ended
    with db.session() as session:
        stored = session.query(UiSession).all()
        assert len(stored) == 1 and stored[0].key_id == READER.key_id
        assert all(row.token_digest not in (token, old) for row in stored)  # only digests are kept
