"""Text the database cannot store or look up: PostgreSQL refuses NUL characters in any string, so input holding one
is refused at the edge, with one line, instead of failing deep inside a query."""

from __future__ import annotations

import re

from pydantic import BaseModel, model_validator

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


class NulFreeBody(BaseModel):
    """A request body refused with one line when any of its strings, at any depth, holds a NUL."""

    @model_validator(mode="before")
    @classmethod
    def _no_nul(cls, data: object) -> object:
        if has_nul(data):
            raise ValueError(NUL_MESSAGE)
        return data


def given_reason(reason: str, kept_with: str) -> str:
    """A person's reason, stripped; one that is blank or holds a NUL is refused with what to do."""
    if has_nul(reason):
        raise ValueError(NUL_MESSAGE)
    if not reason.strip():
        raise ValueError(f"give a reason: it is kept with {kept_with}")
    return reason.strip()
