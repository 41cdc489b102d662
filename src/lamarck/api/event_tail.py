"""One tailer per process: a single task reads new events from the bus and fans them out to every open stream's
bounded queue, so N subscribers cost one database poll, not N.

A subscriber first catches up from the database on its own (from its ``Last-Event-ID``), then takes live events
from its queue, dropping any it already read (events compare by their delivery position, ``BusEvent.position``).
A subscriber too slow to keep its queue from filling is marked ``overflowed`` instead of holding the tailer back;
it catches up from the database again, where every event the tailer delivered already is.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from fastapi.concurrency import run_in_threadpool

from lamarck.platform.events import BusEvent, EventBus

log = logging.getLogger(__name__)

QUEUE_SIZE = 1000
READ_BATCH = 500
ENCODED_KEPT = 4096  # events whose wire form is kept for the next stream that sends them


class Subscription:
    """One stream's view of the tailer: a bounded queue of live events."""

    def __init__(self, size: int) -> None:
        self.queue: asyncio.Queue[BusEvent] = asyncio.Queue(maxsize=size)
        self.overflowed = False

    def offer(self, event: BusEvent) -> None:
        if self.overflowed:
            return
        try:
            self.queue.put_nowait(event)
        except asyncio.QueueFull:
            self.overflowed = True

    def restart(self) -> None:
        """Forget what is queued, before the subscriber catches up from the database again."""
        while not self.queue.empty():
            self.queue.get_nowait()
        self.overflowed = False

    async def next(self, timeout: float) -> BusEvent | None:
        """The next live event, or None when none came within ``timeout`` seconds."""
        if not self.queue.empty():  # no timer to arm for an event already here (most of them, under load)
            return self.queue.get_nowait()
        try:
            return await asyncio.wait_for(self.queue.get(), timeout)
        except TimeoutError:
            return None


class EventTail:
    """Started by the first subscriber and stopped when the last one leaves, so an app without open streams polls
    nothing. Bound to the event loop it was started on."""

    def __init__(self, bus: EventBus, *, poll_seconds: float, queue_size: int = QUEUE_SIZE) -> None:
        self.bus = bus
        self.poll_seconds = poll_seconds
        self.queue_size = queue_size
        self._subscribers: set[Subscription] = set()
        self._task: asyncio.Task[None] | None = None
        self._encoded: OrderedDict[int, str] = OrderedDict()

    @property
    def subscribers(self) -> int:
        return len(self._subscribers)

    def encoded(self, event: BusEvent, encode: Callable[[BusEvent], str]) -> str:
        """``encode(event)``, computed once for all of this process's streams: 200 streams of one event would
        otherwise validate and serialise it 200 times. Stored events never change, so the id is the key."""
        text = self._encoded.get(event.id)
        if text is None:
            text = self._encoded[event.id] = encode(event)
            if len(self._encoded) > ENCODED_KEPT:
                self._encoded.popitem(last=False)
        return text

    def subscribe(self) -> Subscription:
        subscription = Subscription(self.queue_size)
        self._subscribers.add(subscription)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        self._subscribers.discard(subscription)
        if not self._subscribers and self._task is not None:
            self._task.cancel()
            self._task = None

    async def _run(self) -> None:
        last: int | None = None
        while True:
            try:
                if last is None:
                    last = await run_in_threadpool(self.bus.head)
                batch = await run_in_threadpool(self.bus.replay, after_id=last, limit=READ_BATCH)
            except Exception:  # a database that went away: streams keep their place, the tailer tries again
                log.warning("event tailer: reading the bus failed; retrying", exc_info=True)
                batch = []
            for event in batch:
                for subscription in list(self._subscribers):
                    subscription.offer(event)
            if batch:
                last = batch[-1].id
            if len(batch) < READ_BATCH:
                await asyncio.sleep(self.poll_seconds)


def event_tail(state: Any, bus: EventBus, *, poll_seconds: float) -> EventTail:
    """The app's one tailer, made on first use and kept on ``app.state``."""
    tail: EventTail | None = getattr(state, "event_tail", None)
    if tail is None:
        tail = EventTail(bus, poll_seconds=poll_seconds)
        state.event_tail = tail
    return tail
