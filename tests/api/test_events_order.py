"""PostgreSQL commits sequence ids out of order: an event whose lower id commits later is still delivered, once, by
the JSON list and by the live stream (the tailer's fan-out), and a slow subscriber loses nothing when its queue
overflows."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from lamarck.api.event_stream import LiveStream
from lamarck.api.event_tail import EventTail
from lamarck.platform.container import Container
from lamarck.platform.event_types import RunStopped
from lamarck.platform.events import EventBus
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database

from .test_events import _sse, _verdict


@pytest.fixture
def db(postgres_db: Database) -> Database:
    """Only PostgreSQL: SQLite lets one writer in at a time, so its ids cannot commit out of order."""
    return postgres_db


def _payload(reason: str) -> dict[str, object]:
    return RunStopped(generations_done=0, reason=reason).model_dump(mode="json")


def test_a_lower_id_that_commits_later_is_delivered_once_by_list_and_stream(
    client: TestClient, container: Container, keys: dict[str, dict[str, str]]
) -> None:
    slow = Session(container.db.engine)  # writer A: takes the lower id, commits last
    first_id: list[int] = []

    def writers() -> None:
        first_id.append(repo.append_event(slow, type=RunStopped.TYPE, payload=_payload("slow"), run_id="r").id)
        with container.db.session() as fast:  # writer B: the higher id, committed at once
            second = repo.append_event(fast, type=RunStopped.TYPE, payload=_payload("fast"), run_id="r").id
        assert second > first_id[0]
        time.sleep(0.6)
        seen_meanwhile.append(client.get("/v1/events", headers=keys["read"]).json())
        slow.commit()
        slow.close()

    seen_meanwhile: list[dict[str, object]] = []
    writer = threading.Thread(target=writers)
    writer.start()
    streamed = _sse(client.get("/v1/events/stream?timeout=2.5", headers=keys["read"]).text)
    writer.join()

    assert seen_meanwhile == [{"events": [], "next_after": 0}]  # B's row waits for A's, which might still commit
    listed = client.get("/v1/events?after=0", headers=keys["read"]).json()["events"]
    assert [e["payload"]["reason"] for e in listed] == ["slow", "fast"]
    assert [e["payload"]["reason"] for e in map(lambda e: json.loads(e["data"]), streamed)] == ["slow", "fast"]
    assert [int(e["id"]) for e in streamed] == [e["id"] for e in listed]
    assert listed[0]["id"] == first_id[0]
    resumed = _sse(
        client.get("/v1/events/stream?timeout=0.3", headers={**keys["read"], "Last-Event-ID": streamed[0]["id"]}).text
    )
    assert [e["id"] for e in resumed] == [streamed[1]["id"]]
    assert client.get(f"/v1/events?after={listed[1]['id']}", headers=keys["read"]).json()["events"] == []


def test_an_id_read_before_a_lower_one_commits_is_not_passed_by_the_cursor(postgres_db: Database) -> None:
    """The cursor is a position in (transaction, id) order: a reader that resumes after an event never skips an
    event of a transaction that ended later, even one with a lower id."""
    bus = EventBus(postgres_db)
    early = Session(postgres_db.engine)
    late = Session(postgres_db.engine)
    repo.append_event(early, type=RunStopped.TYPE, payload=_payload("early"))  # transaction 1 starts writing
    low = repo.append_event(late, type=RunStopped.TYPE, payload=_payload("late, lower id"))
    high = repo.append_event(early, type=RunStopped.TYPE, payload=_payload("early, higher id"))
    assert low.id < high.id
    early.commit()
    first = bus.replay()  # transaction 1 ended before transaction 2: its events are final, in id order
    assert [e.payload["reason"] for e in first] == ["early", "early, higher id"]
    assert bus.head() == high.id
    late.commit()
    rest = bus.replay(after_id=first[-1].id)  # an id cursor would be past the lower id for good
    assert [e.id for e in rest] == [low.id]
    assert [e.id for e in bus.replay()] == [e.id for e in first + rest]
    assert bus.head() == low.id
    early.close()
    late.close()


def test_a_subscriber_whose_queue_overflows_catches_up_without_gap_or_duplicate(postgres_db: Database) -> None:
    bus = EventBus(postgres_db)
    for index in range(3):
        bus.publish(_verdict(index), run_id="r")

    async def read_slowly() -> list[int]:
        tail = EventTail(bus, poll_seconds=0.01, queue_size=2)
        subscription = tail.subscribe()
        stream = LiveStream(bus, subscription, run_id="r", types=None, deadline=time.monotonic() + 3)

        async def still_here() -> bool:
            return False

        def publish_more() -> None:
            for index in range(3, 40):
                bus.publish(_verdict(index), run_id="r" if index % 5 else "other")

        got: list[int] = []
        writer = asyncio.get_running_loop().run_in_executor(None, publish_more)
        async for event in stream.events(0, wait=0.05, gone=still_here):
            got.append(int(event.payload["episode_id"][1:]))
            await asyncio.sleep(0.01)  # slower than the tailer: the queue of 2 overflows
            if len(got) == 30:
                break
        await writer
        tail.unsubscribe(subscription)
        return got

    assert asyncio.run(read_slowly()) == [i for i in range(40) if i < 3 or i % 5][:30]
