"""Backend-neutral filters translate to Chroma's where syntax."""

from __future__ import annotations

import pytest

from lamarck.memory.filters import FilterError, to_chroma_where


def test_empty_filter_is_none() -> None:
    assert to_chroma_where(None) is None and to_chroma_where({}) is None


def test_single_equality() -> None:
    assert to_chroma_where({"outcome": "passed"}) == {"outcome": {"$eq": "passed"}}


def test_fields_ranges_and_lists_are_anded() -> None:
    where = {"environment": "arithmetic", "difficulty": {"$gte": 2, "$lte": 4}, "kind": ["lesson", "skill"]}
    assert to_chroma_where(where) == {
        "$and": [
            {"environment": {"$eq": "arithmetic"}},
            {"difficulty": {"$gte": 2}},
            {"difficulty": {"$lte": 4}},
            {"kind": {"$in": ["lesson", "skill"]}},
        ]
    }


def test_bool_values() -> None:
    assert to_chroma_where({"merged": False}) == {"merged": {"$eq": False}}


@pytest.mark.parametrize(
    "where",
    [
        {"$or": [{"a": 1}]},
        {"difficulty": {"$between": [1, 2]}},
        {"difficulty": {}},
        {"kind": []},
        {"kind": {"$in": "lesson"}},
        {"kind": {"$eq": ["a"]}},
        {"kind": None},
    ],
)
def test_bad_filters_name_the_field(where: dict) -> None:
    with pytest.raises(FilterError):
        to_chroma_where(where)
