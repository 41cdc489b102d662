"""What a vector memory is: records, hits, filters, and the Protocols every backend implements.

A memory holds named collections (``episodes``, ``lessons``, and any other, e.g. ``skills``). Each record is a
text plus flat metadata; retrieval is by embedding similarity, optionally filtered by metadata.

Filters (``Where``) are backend-neutral: ``{"environment": "arithmetic", "outcome": "passed"}`` matches equal
values (all keys must match), a list matches any of its values, and a dict of operators gives ranges:
``{"difficulty": {"$gte": 2, "$lte": 4}}``. Operators: ``$eq $ne $gt $gte $lt $lte $in $nin``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeAlias, overload, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, field_validator

Scalar: TypeAlias = str | int | float | bool
Metadata: TypeAlias = dict[str, Scalar]
Condition: TypeAlias = Scalar | Sequence[Scalar] | Mapping[str, Scalar | Sequence[Scalar]]
Where: TypeAlias = Mapping[str, Condition]
Embedding: TypeAlias = Sequence[float]

EPISODES = "episodes"
LESSONS = "lessons"
OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin"})

# Metadata keys the memory maintains itself (a caller may set them too).
CREATED_AT = "created_at"  # unix seconds, set on first add
LAST_USED = "last_used"  # unix seconds, set on add and by touch()
UTILITY = "utility"  # caller's usefulness score; higher survives eviction longer (default 0.0)


class MemoryStoreError(RuntimeError):
    """A memory operation failed; the message is one line."""


class MemoryUnavailable(MemoryStoreError):
    """The vector store cannot be reached; the message is one line and names the fix."""


class MemoryRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str = Field(min_length=1)
    text: str
    metadata: Metadata = Field(default_factory=dict)

    @field_validator("metadata")
    @classmethod
    def _flat_finite(cls, value: Metadata) -> Metadata:
        for key, item in value.items():
            if not key or key.startswith("$"):
                raise ValueError(f"metadata key {key!r} must be non-empty and not start with '$'")
            if isinstance(item, float) and not math.isfinite(item):
                raise ValueError(f"metadata {key!r} must be a finite number, not {item}")
        return value


class MemoryHit(BaseModel):
    """One retrieved record. ``distance`` is cosine distance (0 = same direction, 2 = opposite)."""

    model_config = ConfigDict(frozen=True)

    record: MemoryRecord
    distance: float

    @property
    def score(self) -> float:
        """Cosine similarity, 1 - distance: higher is closer."""
        return 1.0 - self.distance


@runtime_checkable
class MemoryCollection(Protocol):
    """One bounded collection of records."""

    @property
    def name(self) -> str: ...

    @property
    def max_entries(self) -> int: ...

    def add(self, records: Sequence[MemoryRecord], embeddings: Sequence[Embedding] | None = None) -> None:
        """Insert new records; an id already stored raises MemoryStoreError (a repeated id within one call: the last
        wins). ``embeddings``, if given, are used instead of embedding the texts. Enforces the bound afterwards."""
        ...

    def upsert(self, records: Sequence[MemoryRecord], embeddings: Sequence[Embedding] | None = None) -> None:
        """Insert or replace records by id. Enforces the bound afterwards."""
        ...

    def get(self, ids: Sequence[str]) -> list[MemoryRecord]:
        """The records that exist, in the order of ``ids``; missing ids are skipped."""
        ...

    def delete(self, ids: Sequence[str]) -> None: ...

    def count(self) -> int: ...

    def update_metadata(self, ids: Sequence[str], metadata: Mapping[str, Scalar]) -> None:
        """Merge ``metadata`` into each existing record's metadata (text and embedding unchanged)."""
        ...

    def touch(self, ids: Sequence[str]) -> None:
        """Mark records as used now (``last_used``), so least-recently-used eviction spares them."""
        ...

    @overload
    def query(self, text: str, k: int = 5, where: Where | None = None) -> list[MemoryHit]: ...

    @overload
    def query(self, text: list[str], k: int = 5, where: Where | None = None) -> list[list[MemoryHit]]: ...

    def query(
        self, text: str | Sequence[str], k: int = 5, where: Where | None = None
    ) -> list[MemoryHit] | list[list[MemoryHit]]:
        """The ``k`` nearest records to a text (or to each of several texts), closest first; fewer if fewer match."""
        ...

    def embed(self, texts: Sequence[str]) -> list[Embedding]:
        """The collection's embeddings of ``texts``, in one call of its embedding function."""
        ...

    def query_vectors(
        self, embeddings: Sequence[Embedding], k: int = 5, where: Where | None = None
    ) -> list[list[MemoryHit]]:
        """Like ``query`` with several texts, for vectors already embedded (e.g. by ``embed``)."""
        ...

    def nearest(self, text: str, k: int = 5) -> list[MemoryHit]:
        """Unfiltered nearest neighbours with distances, for a curator deciding whether a lesson is a duplicate."""
        ...

    def lowest(self, field: str, k: int, where: Where | None = None) -> list[MemoryRecord]:
        """Up to ``k`` records with the smallest value of a metadata field (records without it come first)."""
        ...

    def eviction_candidates(self, k: int) -> list[MemoryRecord]:
        """The ``k`` records the eviction policy would remove first."""
        ...

    def enforce_bound(self) -> list[str]:
        """Evict records while the collection is over its bound; returns the evicted ids."""
        ...


@runtime_checkable
class VectorMemory(Protocol):
    @property
    def episodes(self) -> MemoryCollection: ...

    @property
    def lessons(self) -> MemoryCollection: ...

    def collection(self, name: str) -> MemoryCollection:
        """A named collection, created on first use (e.g. ``skills``)."""
        ...

    def close(self) -> None: ...


def eviction_key(metadata: Mapping[str, Scalar]) -> tuple[float, float, float]:
    """Sort key of the eviction policy: lowest utility first, then least recently used, then oldest."""
    created = _number(metadata.get(CREATED_AT), 0.0)
    return (_number(metadata.get(UTILITY), 0.0), _number(metadata.get(LAST_USED), created), created)


def _number(value: Scalar | None, default: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    return float(value)


@dataclass(frozen=True)
class LessonHandle:
    """A lesson offered to the executor: its id (for helpful/harmful counts) and its text."""

    id: str
    text: str


@dataclass(frozen=True)
class RetrievalQuery:
    """One task's look-up in a batch: its prompt, its environment, and how many results it wants."""

    text: str
    environment: str | None
    k: int


class LessonSource(Protocol):
    """Where the executor gets lessons for a task."""

    def retrieve(self, query: str, *, environment: str | None, k: int) -> list[LessonHandle]: ...


@runtime_checkable
class BatchLessonSource(LessonSource, Protocol):
    """A lesson source that answers many tasks at once, embedding their prompts in one call."""

    def retrieve_many(self, queries: Sequence[RetrievalQuery]) -> list[list[LessonHandle]]: ...
