"""Times in responses: always with their zone, so every one is an RFC 3339 ``date-time`` as the OpenAPI document says.
The records store UTC, but SQLite hands them back without a zone."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from pydantic import AfterValidator


def as_utc(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


UtcDatetime = Annotated[datetime, AfterValidator(as_utc)]
