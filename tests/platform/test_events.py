from __future__ import annotations

import threading

import pytest

from lamarck.platform.event_types import EVENT_TYPES, JobProgress, RunStarted, RunStopped, TrainingMetrics, parse_event
from lamarck.platform.events import EventBus
from lamarck.platform.storage.database import Database


def _progress(step: int) -> JobProgress:
    return JobProgress(job="train:x", step=step, pid=1)


def test_replay_from_an_id(db: Database) -> None:
    bus = EventBus(db)
    ids = [bus.publish(_progress(i), run_id="r1").id for i in range(4)]
    bus.publish(RunStarted(config={}, next=["propose"], generation=0), run_id="r2")
    assert ids == sorted(ids) and len(set(ids)) == 4
    assert [e.payload["step"] for e in bus.replay(after_id=ids[1], run_id="r1")] == [2, 3]
    assert len(bus.replay()) == 5


def test_a_live_reader_sees_new_events_and_resumes_where_it_stopped(sqlite_db: Database) -> None:
    bus = EventBus(sqlite_db, poll_seconds=0.05)
    first = bus.publish(_progress(0), run_id="r")
    seen: list[int] = []

    def read() -> None:
        for event in bus.follow(after_id=0, run_id="r", timeout=5):
            seen.append(event.payload["step"])
            if event.payload["step"] == 2:
                return

    reader = threading.Thread(target=read)
    reader.start()
    bus.publish(_progress(1), run_id="r")
    bus.publish(_progress(2), run_id="r")
    reader.join(timeout=5)
    assert seen == [0, 1, 2]
    resumed = [e.payload["step"] for e in bus.follow(after_id=first.id, run_id="r", timeout=0)]
    assert resumed == [1, 2]


def test_a_reader_gets_back_the_model_the_writer_published(sqlite_db: Database) -> None:
    bus = EventBus(sqlite_db)
    sent = RunStopped(generations_done=3, reason="stop requested")
    stored = bus.publish(sent, run_id="r")
    assert stored.type == "run_stopped"
    assert bus.replay(run_id="r")[0].parsed() == sent
    metrics = bus.publish(TrainingMetrics(version="v1", loss=0.5, step=4)).parsed()
    assert isinstance(metrics, TrainingMetrics) and metrics.model_extra == {"loss": 0.5, "step": 4}


def test_the_bus_takes_only_event_models_and_a_writer_cannot_misspell_a_field(sqlite_db: Database) -> None:
    bus = EventBus(sqlite_db)
    with pytest.raises(TypeError, match="takes an event model"):
        bus.publish("run_stopped", run_id="r")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="generation_done"):
        RunStopped(generation_done=3)  # type: ignore[call-arg]
    assert bus.replay() == []


def test_stored_events_of_older_or_unknown_shapes_still_read() -> None:
    """A payload written before a field was added reads with its default; an unknown key of a closed type is
    dropped; an unknown type or a payload that does not validate is left for the reader to show raw."""
    older = parse_event("run_finished", {"generations_done": 2, "reason": None, "gone": 1})
    assert older is not None and older.generations_done == 2 and older.usage is None  # type: ignore[attr-defined]
    assert parse_event("no_such_event", {}) is None
    assert parse_event("run_stopped", {"generations_done": "many"}) is None


def test_every_event_type_has_a_distinct_name() -> None:
    assert len(EVENT_TYPES) == len({cls.__name__ for cls in EVENT_TYPES.values()})
    assert all(name == cls.TYPE for name, cls in EVENT_TYPES.items())
