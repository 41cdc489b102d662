"""Where the API's database reads run (inline on SQLite, off the event loop on a server database), the startup heap
the app freezes, and the wire form of an event made once for every stream."""

from __future__ import annotations

import asyncio
import gc
import threading

from fastapi.testclient import TestClient

from lamarck.api.app import create_app
from lamarck.api.db_work import run_db
from lamarck.api.event_tail import EventTail
from lamarck.platform.container import Container
from lamarck.platform.event_types import RunStopped
from lamarck.platform.events import BusEvent
from lamarck.platform.storage.database import Database


def test_sqlite_work_runs_on_the_event_loop_and_server_database_work_in_the_thread_pool(db: Database) -> None:
    def work(value: int) -> tuple[int, int]:
        return threading.get_ident(), value

    async def call() -> tuple[int, tuple[int, int]]:
        return threading.get_ident(), await run_db(db, work, 7)

    loop_thread, (work_thread, value) = asyncio.run(call())
    assert value == 7
    assert (work_thread == loop_thread) == db.url.startswith("sqlite")


def test_the_app_freezes_the_heap_it_started_with(container: Container) -> None:
    gc.unfreeze()
    assert gc.get_freeze_count() == 0
    try:
        with TestClient(create_app(container)) as client:
            assert client.get("/v1/health").status_code == 200
            assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


def test_an_event_is_encoded_once_for_all_streams(container: Container) -> None:
    for reason in ("one", "two"):
        container.bus.publish(RunStopped(generations_done=1, reason=reason), run_id="r1")
    first, second = container.bus.replay(after_id=0, limit=10)
    tail = EventTail(container.bus, poll_seconds=0.05, queue_size=4)
    calls: list[int] = []

    def encode(event: BusEvent) -> str:
        calls.append(event.id)
        return f"wire {len(calls)}"

    again = container.bus.replay(after_id=0, limit=10)[0]  # the same event read back by another stream
    assert [tail.encoded(first, encode), tail.encoded(again, encode), tail.encoded(second, encode)] == [
        "wire 1",
        "wire 1",
        "wire 2",
    ]
    assert calls == [first.id, second.id]
