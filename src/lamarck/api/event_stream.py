"""One subscriber's stream of events, with no gap and no duplicate: it catches up from the database after the
event it starts from, then takes live events from the process's tailer (``event_tail``), skipping those it already
read; when its queue overflowed, it catches up from the database again."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable

from fastapi.concurrency import run_in_threadpool

from lamarck.api.event_tail import Subscription
from lamarck.platform.events import BusEvent, EventBus

SCAN_BATCH = 500
PAGE = 100


def scan(
    bus: EventBus, *, after: int, run_id: str | None, types: frozenset[str] | None, limit: int
) -> tuple[list[BusEvent], BusEvent | None]:
    """Up to ``limit`` matching events after event ``after`` in delivery order, and the last event looked at (where
    the next read starts; None when there was nothing new)."""
    found: list[BusEvent] = []
    last: BusEvent | None = None
    while len(found) < limit:
        after_id = after if last is None else last.id
        batch = bus.replay(after_id=after_id, run_id=run_id, limit=SCAN_BATCH if types else limit - len(found))
        if not batch:
            break
        for event in batch:
            last = event
            if types is None or event.type in types:
                found.append(event)
                if len(found) == limit:
                    break
    return found, last


class LiveStream:
    def __init__(
        self,
        bus: EventBus,
        subscription: Subscription,
        *,
        run_id: str | None,
        types: frozenset[str] | None,
        deadline: float | None,
    ) -> None:
        self.bus = bus
        self.subscription = subscription
        self.run_id = run_id
        self.types = types
        self.deadline = deadline

    def _left(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    def _wanted(self, event: BusEvent) -> bool:
        return (self.run_id is None or event.run_id == self.run_id) and (self.types is None or event.type in self.types)

    async def events(self, start: int, *, wait: float, gone: Callable[[], Awaitable[bool]]) -> AsyncIterator[BusEvent]:
        """The matching events after event ``start`` until the deadline or until the client is ``gone``; ``wait`` is
        how long to wait for a live event before looking whether the client left."""
        last_id = start
        position = await run_in_threadpool(self.bus.position, start)
        catch_up = True
        while (left := self._left()) is None or left > 0:
            if catch_up or self.subscription.overflowed:
                self.subscription.restart()  # whatever it held, the database has too
                while (left := self._left()) is None or left > 0:
                    found, last = await run_in_threadpool(
                        scan, self.bus, after=last_id, run_id=self.run_id, types=self.types, limit=PAGE
                    )
                    if last is None:
                        break
                    last_id, position = last.id, max(position, last.position)
                    for event in found:
                        yield event
                catch_up = False
                continue
            live = await self.subscription.next(wait if left is None else max(0.0, min(wait, left)))
            if live is None:
                if await gone():
                    return
                continue
            if live.position <= position:
                continue
            last_id, position = live.id, live.position
            if self._wanted(live):
                yield live
