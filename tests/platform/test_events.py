from __future__ import annotations

import threading

from lamarck.platform.events import EventBus
from lamarck.platform.storage.database import Database


def test_replay_from_an_id(db: Database) -> None:
    bus = EventBus(db)
    ids = [bus.publish("episode_finished", {"i": i}, run_id="r1").id for i in range(4)]
    bus.publish("run_started", {}, run_id="r2")
    assert ids == sorted(ids) and len(set(ids)) == 4
    assert [e.payload["i"] for e in bus.replay(after_id=ids[1], run_id="r1")] == [2, 3]
    assert len(bus.replay()) == 5


def test_a_live_reader_sees_new_events_and_resumes_where_it_stopped(sqlite_db: Database) -> None:
    bus = EventBus(sqlite_db, poll_seconds=0.05)
    first = bus.publish("a", run_id="r")
    seen: list[str] = []

    def read() -> None:
        for event in bus.follow(after_id=0, run_id="r", timeout=5):
            seen.append(event.type)
            if event.type == "c":
                return

    reader = threading.Thread(target=read)
    reader.start()
    bus.publish("b", run_id="r")
    bus.publish("c", run_id="r")
    reader.join(timeout=5)
    assert seen == ["a", "b", "c"]
    resumed = [e.type for e in bus.follow(after_id=first.id, run_id="r", timeout=0)]
    assert resumed == ["b", "c"]
