"""Cursors for the lists paged newest first: the (created_at, id) of a page's last row, as ``GET /v1/runs`` gives."""

from __future__ import annotations

import base64
import binascii
import json
from datetime import datetime
from typing import Annotated

from fastapi import Query

from lamarck.api.errors import ApiError
from lamarck.api.routes.runs import decode_cursor

__all__ = ["Cursor", "Limit", "decode_cursor", "decode_name_cursor", "name_cursor", "next_cursor"]

Limit = Annotated[int, Query(ge=1, le=200, description="Rows per page.")]
Cursor = Annotated[str | None, Query(max_length=500, description="A previous page's next_cursor.")]


def next_cursor(created_at: datetime, row_id: str) -> str:
    raw = json.dumps([created_at.isoformat(), row_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def name_cursor(name: str) -> str:
    """A cursor for a list ordered by name (skills): the last name of the page, in the same opaque style."""
    return base64.urlsafe_b64encode(json.dumps(["name", name]).encode()).decode().rstrip("=")


def decode_name_cursor(cursor: str) -> str:
    try:
        kind, name = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if kind != "name" or not isinstance(name, str):
            raise ValueError(kind)
        return name
    except (binascii.Error, ValueError, TypeError):
        raise ApiError(422, f"cursor {cursor[:40]!r} is not one this server gave: pass a page's next_cursor") from None
