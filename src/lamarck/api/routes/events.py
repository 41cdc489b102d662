"""The event bus over HTTP: a page of stored events as JSON, or a live server-sent stream that resumes after the
``Last-Event-ID`` a reconnecting client sends (each event's ``id:`` is its bus id, so nothing is missed or repeated).
Events are read back through their typed models (``BusEvent.parsed``)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.sse import EventSourceResponse, ServerSentEvent

from lamarck.api.db_work import run_db
from lamarck.api.deps import ContainerDep, ReadKey
from lamarck.api.errors import KEYED_ERRORS, ApiError, ErrorResponse, documented
from lamarck.api.event_stream import LiveStream, scan
from lamarck.api.event_tail import event_tail
from lamarck.api.query import known_query_only
from lamarck.api.schemas import EventPage, EventPublic
from lamarck.api.text import ID_PATTERN
from lamarck.platform.event_types import EVENT_TYPES
from lamarck.platform.events import BusEvent

router = APIRouter(
    prefix="/events", tags=["events"], responses=documented(*KEYED_ERRORS), dependencies=[Depends(known_query_only)]
)

RunId = Annotated[str | None, Query(pattern=ID_PATTERN, description="Only this run's events.")]
Types = Annotated[
    str | None, Query(max_length=2000, description="Comma-separated event types, e.g. run_started,episode_finished.")
]
After = Annotated[
    int,
    Query(ge=0, description="Only events after this one: an event id, or a page's `next_after` (0: from the start)."),
]
ERRORS: dict[int | str, dict[str, object]] = {code: {"model": ErrorResponse} for code in (401, 403, 422)}


def parse_types(types: Types = None) -> frozenset[str] | None:
    """The ``types`` filter, checked before a stream starts (a dependency), so a bad one is a 422, not a broken
    stream."""
    if types is None:
        return None
    wanted = frozenset(t.strip() for t in types.split(",") if t.strip())
    unknown = sorted(wanted - set(EVENT_TYPES))
    if unknown or not wanted:
        raise ApiError(
            422, f"unknown event type {', '.join(map(repr, unknown)) or 'list'}: use {', '.join(sorted(EVENT_TYPES))}"
        )
    return wanted


TypeFilter = Annotated[frozenset[str] | None, Depends(parse_types)]


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


def _wire_data(event: BusEvent) -> str:
    return to_public(event).model_dump_json()


@router.get("", operation_id="listEvents", response_model=EventPage, responses=ERRORS, summary="Stored events")
async def list_events(
    container: ContainerDep,
    _: ReadKey,
    wanted: TypeFilter,
    run_id: RunId = None,
    after: After = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> EventPage:
    events, last = await run_db(
        container.db, scan, container.bus, after=after, run_id=run_id, types=wanted, limit=limit
    )
    return EventPage(events=[to_public(e) for e in events], next_after=after if last is None else last.id)


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
    wanted: TypeFilter,
    run_id: RunId = None,
    after: After = 0,
    last_event_id: Annotated[
        int | None, Header(alias="Last-Event-ID", ge=0, description="Sent by a reconnecting client; wins over after.")
    ] = None,
    timeout: Annotated[
        float | None, Query(gt=0, le=86400, description="End the stream after this many seconds.")
    ] = None,
) -> AsyncIterator[ServerSentEvent]:
    deadline = None if timeout is None else time.monotonic() + timeout
    settings = container.settings.api
    tail = event_tail(request.app.state, container.bus, poll_seconds=settings.sse_poll_seconds)
    subscription = tail.subscribe()
    stream = LiveStream(container.bus, subscription, run_id=run_id, types=wanted, deadline=deadline)
    try:
        start = last_event_id if last_event_id is not None else after
        async for event in stream.events(start, wait=settings.sse_poll_seconds, gone=request.is_disconnected):
            yield ServerSentEvent(id=str(event.id), event=event.type, raw_data=tail.encoded(event, _wire_data))
    finally:
        tail.unsubscribe(subscription)
