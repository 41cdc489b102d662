"""The event bus over HTTP: a page of stored events as JSON, or a live server-sent stream that resumes after the
``Last-Event-ID`` a reconnecting client sends (each event's ``id:`` is its bus id, so nothing is missed or repeated).
Events are read back through their typed models (``BusEvent.parsed``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Header, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.sse import EventSourceResponse, ServerSentEvent

from lamarck.api.deps import ContainerDep, ReadKey
from lamarck.api.errors import ApiError, ErrorResponse
from lamarck.api.schemas import EventPage, EventPublic
from lamarck.api.text import ID_PATTERN
from lamarck.platform.event_types import EVENT_TYPES
from lamarck.platform.events import BusEvent, EventBus

router = APIRouter(prefix="/events", tags=["events"])

SCAN_BATCH = 500
RunId = Annotated[str | None, Query(pattern=ID_PATTERN, description="Only this run's events.")]
Types = Annotated[
    str | None, Query(max_length=2000, description="Comma-separated event types, e.g. run_started,episode_finished.")
]
After = Annotated[int, Query(ge=0, description="Only events with a larger id.")]
ERRORS: dict[int | str, dict[str, object]] = {code: {"model": ErrorResponse} for code in (401, 403, 422)}


def parse_types(types: str | None) -> frozenset[str] | None:
    if types is None:
        return None
    wanted = frozenset(t.strip() for t in types.split(",") if t.strip())
    unknown = sorted(wanted - set(EVENT_TYPES))
    if unknown or not wanted:
        raise ApiError(
            422, f"unknown event type {', '.join(map(repr, unknown)) or 'list'}: use {', '.join(sorted(EVENT_TYPES))}"
        )
    return wanted


def to_public(event: BusEvent) -> EventPublic:
    parsed = event.parsed()
    payload = parsed.model_dump(mode="json") if parsed is not None else event.payload
    return EventPublic(
        id=event.id,
        type=event.type,
        run_id=event.run_id,
        created_at=event.created_at,
        known=parsed is not None,
        payload=payload,
    )


def read_page(
    bus: EventBus, *, after: int, run_id: str | None, types: frozenset[str] | None, limit: int
) -> tuple[list[EventPublic], int]:
    """Up to ``limit`` matching events after ``after``, and the last id looked at (where the next read starts)."""
    found: list[EventPublic] = []
    last = after
    while len(found) < limit:
        batch = bus.replay(after_id=last, run_id=run_id, limit=SCAN_BATCH if types else limit - len(found))
        if not batch:
            break
        for event in batch:
            last = event.id
            if types is None or event.type in types:
                found.append(to_public(event))
                if len(found) == limit:
                    break
    return found, last


@router.get("", operation_id="listEvents", response_model=EventPage, responses=ERRORS, summary="Stored events")
def list_events(
    container: ContainerDep,
    _: ReadKey,
    run_id: RunId = None,
    types: Types = None,
    after: After = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> EventPage:
    events, last = read_page(container.bus, after=after, run_id=run_id, types=parse_types(types), limit=limit)
    return EventPage(events=events, next_after=last)


@router.get(
    "/stream",
    operation_id="streamEvents",
    response_class=EventSourceResponse,
    responses=ERRORS,
    summary="Events as server-sent events, resuming after Last-Event-ID",
)
async def stream_events(
    request: Request,
    container: ContainerDep,
    _: ReadKey,
    run_id: RunId = None,
    types: Types = None,
    after: After = 0,
    last_event_id: Annotated[
        int | None, Header(alias="Last-Event-ID", ge=0, description="Sent by a reconnecting client; wins over after.")
    ] = None,
    timeout: Annotated[
        float | None, Query(gt=0, le=86400, description="End the stream after this many seconds.")
    ] = None,
) -> AsyncIterator[ServerSentEvent]:
    wanted = parse_types(types)
    last = last_event_id if last_event_id is not None else after
    deadline = None if timeout is None else time.monotonic() + timeout
    poll = container.settings.api.sse_poll_seconds
    bus = container.bus
    while deadline is None or time.monotonic() < deadline:
        events, last = await run_in_threadpool(read_page, bus, after=last, run_id=run_id, types=wanted, limit=100)
        for event in events:
            yield ServerSentEvent(id=str(event.id), event=event.type, data=event)
        if not events:
            if await request.is_disconnected():
                return
            wait = poll if deadline is None else max(0.0, min(poll, deadline - time.monotonic()))
            await asyncio.sleep(wait)
