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
        with self.db.session() as session:
            return [_to_bus(e) for e in repo.events_after(session, after_id=after_id, run_id=run_id, limit=limit)]

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
        id=event.id, type=event.type, run_id=event.run_id, payload=event.payload, created_at=event.created_at
    )
