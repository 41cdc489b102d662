"""Cursors for the lists paged newest first: the (created_at, id) of a page's last row, as ``GET /v1/runs`` gives."""

from __future__ import annotations

import base64
import json
from datetime import datetime
from typing import Annotated

from fastapi import Query

from lamarck.api.routes.runs import decode_cursor

__all__ = ["Cursor", "Limit", "decode_cursor", "next_cursor"]

Limit = Annotated[int, Query(ge=1, le=200, description="Rows per page.")]
Cursor = Annotated[str | None, Query(max_length=500, description="A previous page's next_cursor.")]


def next_cursor(created_at: datetime, row_id: str) -> str:
    raw = json.dumps([created_at.isoformat(), row_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")
