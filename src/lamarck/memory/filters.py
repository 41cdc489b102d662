"""Translate Lamarck's backend-neutral ``Where`` filters (see ``base``) into Chroma's ``where`` syntax."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lamarck.memory.base import OPERATORS, Scalar, Where


class FilterError(ValueError):
    """A filter Lamarck cannot express; the message names the offending key."""


def to_chroma_where(where: Where | None) -> dict[str, Any] | None:
    """``{"env": "a", "difficulty": {"$gte": 2, "$lte": 4}}`` -> ``{"$and": [{"env": {"$eq": "a"}}, ...]}``."""
    if not where:
        return None
    conditions: list[dict[str, Any]] = []
    for key, condition in where.items():
        if key.startswith("$"):
            raise FilterError(f"filter key {key!r}: top-level operators are not supported, give field conditions")
        conditions.extend(_field_conditions(key, condition))
    if len(conditions) == 1:
        return conditions[0]
    return {"$and": conditions}


def _field_conditions(key: str, condition: object) -> list[dict[str, Any]]:
    if _is_scalar(condition):
        return [{key: {"$eq": condition}}]
    if isinstance(condition, Mapping):
        if not condition:
            raise FilterError(f"filter on {key!r} is an empty operator dict")
        result = []
        for op, value in condition.items():
            if op not in OPERATORS:
                raise FilterError(f"filter on {key!r}: unknown operator {op!r} (use {', '.join(sorted(OPERATORS))})")
            if op in ("$in", "$nin"):
                value = _scalar_list(key, value)
            elif not _is_scalar(value):
                raise FilterError(f"filter on {key!r}: {op} needs a str, int, float or bool, got {value!r}")
            result.append({key: {op: value}})
        return result
    if isinstance(condition, Sequence) and not isinstance(condition, str | bytes):
        return [{key: {"$in": _scalar_list(key, condition)}}]
    raise FilterError(f"filter on {key!r}: expected a value, a list of values or an operator dict, got {condition!r}")


def _scalar_list(key: str, value: object) -> list[Scalar]:
    if isinstance(value, str | bytes) or not isinstance(value, Sequence) or not value:
        raise FilterError(f"filter on {key!r}: $in/$nin and lists need a non-empty list of values, got {value!r}")
    items = list(value)
    if not all(_is_scalar(item) for item in items):
        raise FilterError(f"filter on {key!r}: list values must be str, int, float or bool, got {value!r}")
    return items


def _is_scalar(value: object) -> bool:
    return isinstance(value, str | int | float | bool)
