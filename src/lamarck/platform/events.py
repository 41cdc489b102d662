"""The event bus: typed events (``event_types.py``), persisted with monotonic ids so any reader can replay or resume.

Writers call ``publish`` with an event model, the only thing it accepts; the event is stored in SQL first, so a
late reader replays it with ``replay(after_id=...)`` and a live reader resumes from the last id it saw with
``follow``. Readers in the same process are woken at once; readers in other processes (distributed mode) notice
new rows on their next poll.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from lamarck.platform.event_types import Event, parse_event
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database


class BusEvent(BaseModel):
    id: int
    type: str
    run_id: str | None
    payload: dict[str, Any]
    created_at: datetime
    xid: int = 0  # the writing transaction; events are delivered in (xid, id) order (storage.event_order)

    @property
    def position(self) -> tuple[int, int]:
        """Where this event sits in delivery order."""
        return (self.xid, self.id)

    def parsed(self) -> Event | None:
        """The typed event; None for a type this version does not know (a reader shows it raw)."""
        return parse_event(self.type, self.payload)


class EventBus:
    def __init__(self, db: Database, *, poll_seconds: float = 0.5) -> None:
        self.db = db
        self.poll_seconds = poll_seconds
        self._published = threading.Condition()

    def publish(self, event: Event, *, run_id: str | None = None) -> BusEvent:
        if not isinstance(event, Event):
            raise TypeError(
                f"the bus takes an event model from lamarck.platform.event_types, not {type(event).__name__}"
            )
        payload = event.model_dump(mode="json")
        with self.db.session() as session:
            stored = repo.append_event(session, type=event.TYPE, payload=payload, run_id=run_id)
            published = _to_bus(stored)
        with self._published:
            self._published.notify_all()
        return published

    def replay(self, *, after_id: int = 0, run_id: str | None = None, limit: int = 1000) -> list[BusEvent]:
        """The events that follow event ``after_id`` in delivery order, once it is safe to deliver them: an id
        that commits late still comes, after the ones already read (``storage.event_order``)."""
        with self.db.session() as session:
            return [_to_bus(e) for e in repo.events_after(session, after_id=after_id, run_id=run_id, limit=limit)]

    def position(self, event_id: int) -> tuple[int, int]:
        """Where event ``event_id`` sits in delivery order (comparable with ``BusEvent.position``)."""
        with self.db.session() as session:
            return repo.event_position(session, event_id)

    def head(self) -> int:
        """The id of the last event a reader may deliver now; 0 when there is none."""
        with self.db.session() as session:
            return repo.last_safe_event_id(session)

    def follow(
        self,
        *,
        after_id: int = 0,
        run_id: str | None = None,
        timeout: float | None = None,
        stop: threading.Event | None = None,
    ) -> Iterator[BusEvent]:
        """Yield stored events after ``after_id``, then new ones as they arrive, until timeout or stop."""
        deadline = None if timeout is None else time.monotonic() + timeout
        last = after_id
        while True:
            batch = self.replay(after_id=last, run_id=run_id)
            for event in batch:
                last = event.id
                yield event
            if stop is not None and stop.is_set():
                return
            if deadline is not None and time.monotonic() >= deadline:
                return
            if not batch:
                wait = self.poll_seconds
                if deadline is not None:
                    wait = min(wait, max(0.0, deadline - time.monotonic()))
                with self._published:
                    self._published.wait(wait)


def _to_bus(event: Any) -> BusEvent:
    return BusEvent(
        id=event.id,
        type=event.type,
        run_id=event.run_id,
        payload=event.payload,
        created_at=event.created_at,
        xid=event.xid or 0,
    )
