"""Text the database cannot store or look up: PostgreSQL refuses NUL characters in any string, so input holding one
is refused at the edge, with one line, instead of failing deep inside a query."""

from __future__ import annotations

import re

ID_PATTERN = r"^[A-Za-z0-9._:-]{1,64}$"  # every id the API hands out or looks up (hex ids, run and key ids)
NUL_MESSAGE = "text must not contain NUL characters (\\u0000): remove them"


def valid_id(value: str) -> bool:
    return re.fullmatch(ID_PATTERN, value) is not None


def has_nul(data: object) -> bool:
    """Whether a NUL character is in any string of ``data``, keys of mappings included."""
    if isinstance(data, str):
        return "\x00" in data
    if isinstance(data, dict):
        return any(has_nul(key) or has_nul(value) for key, value in data.items())
    if isinstance(data, list | tuple):
        return any(has_nul(item) for item in data)
    return False
