"""One Chroma collection behind the ``MemoryCollection`` Protocol, and the guard that keeps errors to one line."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal, overload

import httpx
import numpy as np
from chromadb.errors import ChromaError

from lamarck.memory.base import (
    CREATED_AT,
    LAST_USED,
    Embedding,
    MemoryHit,
    MemoryRecord,
    MemoryStoreError,
    MemoryUnavailable,
    Metadata,
    Scalar,
    Where,
    eviction_key,
)
from lamarck.memory.filters import FilterError, to_chroma_where

if TYPE_CHECKING:
    from chromadb.api.models.Collection import Collection

    from lamarck.memory.embeddings import MiniLMEmbedding

log = logging.getLogger(__name__)

SCAN_PAGE = 5000


class ErrorGuard:
    """Turns Chroma and transport failures into one-line MemoryStoreError / MemoryUnavailable."""

    def __init__(self, target: str, fix: str) -> None:
        self.target = target
        self.fix = fix

    def unavailable(self, reason: object) -> MemoryUnavailable:
        return MemoryUnavailable(f"vector memory at {self.target} is unavailable ({_first_line(reason)}): {self.fix}")

    @contextmanager
    def __call__(self, action: str) -> Iterator[None]:
        try:
            yield
        except MemoryStoreError:
            raise
        except (httpx.TransportError, ConnectionError) as exc:
            raise self.unavailable(exc) from None
        except FilterError as exc:
            raise MemoryStoreError(f"{action}: {exc}") from None
        except (ChromaError, ValueError) as exc:
            if "could not connect" in str(exc).lower():
                raise self.unavailable(exc) from None
            raise MemoryStoreError(f"{action} failed: {_first_line(exc)}") from exc


class ChromaCollection:
    """One Chroma collection behind the ``MemoryCollection`` Protocol."""

    def __init__(
        self,
        collection: Collection,
        name: str,
        *,
        max_entries: int,
        headroom: float,
        guard: ErrorGuard,
        batch: int,
        embedding: MiniLMEmbedding,
    ) -> None:
        self._chroma = collection
        self._embedding = embedding
        self._name = name
        self._max_entries = max_entries
        self._headroom = headroom
        self._guard = guard
        self._batch = batch

    @property
    def name(self) -> str:
        return self._name

    @property
    def max_entries(self) -> int:
        return self._max_entries

    @property
    def embedding(self) -> MiniLMEmbedding:
        """The embedding function (its ``stats`` count what embedding costs)."""
        return self._embedding

    @property
    def chroma(self) -> Collection:
        """The underlying Chroma collection (for benchmarks and diagnostics)."""
        return self._chroma

    def add(self, records: Sequence[MemoryRecord], embeddings: Sequence[Embedding] | None = None) -> None:
        records = _unique(records)
        if not records:
            return
        with self._guard(f"add to {self._name}"):
            present = self._existing([r.id for r in records])
        if present:
            shown = ", ".join(sorted(present)[:5])
            raise MemoryStoreError(f"add to {self._name}: ids already present ({shown}); use upsert to replace them")
        self._write("add", records, embeddings)
        self.enforce_bound()

    def upsert(self, records: Sequence[MemoryRecord], embeddings: Sequence[Embedding] | None = None) -> None:
        records = _unique(records)
        if records:
            self._write("upsert", records, embeddings)
            self.enforce_bound()

    def get(self, ids: Sequence[str]) -> list[MemoryRecord]:
        if not ids:
            return []
        with self._guard(f"get from {self._name}"):
            result = self._chroma.get(ids=list(ids), include=["documents", "metadatas"])
        found = {
            rid: MemoryRecord(id=rid, text=doc or "", metadata=dict(meta or {}))
            for rid, doc, meta in zip(result["ids"], result["documents"] or [], result["metadatas"] or [], strict=True)
        }
        return [found[rid] for rid in dict.fromkeys(ids) if rid in found]

    def delete(self, ids: Sequence[str]) -> None:
        ids = list(dict.fromkeys(ids))
        with self._guard(f"delete from {self._name}"):
            for start in range(0, len(ids), self._batch):
                self._chroma.delete(ids=ids[start : start + self._batch])

    def count(self) -> int:
        with self._guard(f"count {self._name}"):
            return self._chroma.count()

    def update_metadata(self, ids: Sequence[str], metadata: Mapping[str, Scalar]) -> None:
        patch = MemoryRecord(id="patch", text="", metadata=dict(metadata)).metadata  # validates the values
        if not ids or not patch:
            return
        with self._guard(f"update metadata in {self._name}"):
            present = sorted(self._existing(list(ids)))
            for start in range(0, len(present), self._batch):
                chunk = present[start : start + self._batch]
                self._chroma.update(ids=chunk, metadatas=[dict(patch) for _ in chunk])  # Chroma merges keys

    def touch(self, ids: Sequence[str]) -> None:
        self.update_metadata(ids, {LAST_USED: time.time()})

    @overload
    def query(self, text: str, k: int = 5, where: Where | None = None) -> list[MemoryHit]: ...

    @overload
    def query(self, text: list[str], k: int = 5, where: Where | None = None) -> list[list[MemoryHit]]: ...

    def query(
        self, text: str | Sequence[str], k: int = 5, where: Where | None = None
    ) -> list[MemoryHit] | list[list[MemoryHit]]:
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        single = isinstance(text, str)
        texts = [text] if isinstance(text, str) else list(text)
        if not texts:
            return []
        hits = self._query({"query_texts": texts}, k, where)
        return hits[0] if single else hits

    def embed(self, texts: Sequence[str]) -> list[Embedding]:
        if not texts:
            return []
        with self._guard(f"embed for {self._name}"):
            return list(self._embedding.embed(list(texts)))

    def query_vectors(
        self, embeddings: Sequence[Embedding], k: int = 5, where: Where | None = None
    ) -> list[list[MemoryHit]]:
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        if len(embeddings) == 0:
            return []
        return self._query({"query_embeddings": np.asarray(embeddings, dtype=np.float32)}, k, where)

    def _query(self, queries: dict[str, Any], k: int, where: Where | None) -> list[list[MemoryHit]]:
        with self._guard(f"query {self._name}"):
            result = self._chroma.query(
                **queries,
                n_results=k,
                where=to_chroma_where(where),
                include=["documents", "metadatas", "distances"],
            )
        return [
            [
                MemoryHit(record=MemoryRecord(id=rid, text=doc or "", metadata=dict(meta or {})), distance=float(dist))
                for rid, doc, meta, dist in zip(ids, docs, metas, dists, strict=True)
            ]
            for ids, docs, metas, dists in zip(
                result["ids"],
                result["documents"] or [],
                result["metadatas"] or [],
                result["distances"] or [],
                strict=True,
            )
        ]

    def nearest(self, text: str, k: int = 5) -> list[MemoryHit]:
        return self.query(text, k)

    def lowest(self, field: str, k: int, where: Where | None = None) -> list[MemoryRecord]:
        ranked = sorted(self._scan(where), key=lambda item: (_field_key(item[1].get(field)), item[0]))
        return self.get([rid for rid, _ in ranked[: max(k, 0)]])

    def eviction_candidates(self, k: int) -> list[MemoryRecord]:
        return self.get(self._eviction_order(k))

    def enforce_bound(self) -> list[str]:
        """Evict while over the bound, down to ``max_entries * (1 - evict_headroom)`` (at least 1).

        Policy: lowest ``utility`` metadata first (missing counts as 0.0), then least recently used
        (``last_used``, set on add and by ``touch``; falls back to ``created_at``), then oldest, then by id.
        The headroom lets a steady stream of single adds at the bound rescan the collection only now and then.
        """
        size = self.count()
        if size <= self._max_entries:
            return []
        target = min(self._max_entries, max(1, math.floor(self._max_entries * (1.0 - self._headroom))))
        victims = self._eviction_order(size - target)
        self.delete(victims)
        log.info("evicted %d records from %s (bound %d, now %d)", len(victims), self._name, self._max_entries, target)
        return victims

    def _eviction_order(self, k: int) -> list[str]:
        ranked = sorted(self._scan(None), key=lambda item: (*eviction_key(item[1]), item[0]))
        return [rid for rid, _ in ranked[: max(k, 0)]]

    def _scan(self, where: Where | None) -> list[tuple[str, Metadata]]:
        """Every (id, metadata) pair matching ``where``, read page by page."""
        out: list[tuple[str, Metadata]] = []
        with self._guard(f"scan {self._name}"):
            chroma_where = to_chroma_where(where)
            offset = 0
            while True:
                page = self._chroma.get(where=chroma_where, include=["metadatas"], limit=SCAN_PAGE, offset=offset)
                out.extend(zip(page["ids"], [_scalars(m) for m in page["metadatas"] or []], strict=True))
                if len(page["ids"]) < SCAN_PAGE:
                    return out
                offset += SCAN_PAGE

    def _existing(self, ids: list[str]) -> set[str]:
        present: set[str] = set()
        for start in range(0, len(ids), self._batch):
            present.update(self._chroma.get(ids=ids[start : start + self._batch], include=[])["ids"])
        return present

    def _write(
        self, op: Literal["add", "upsert"], records: list[MemoryRecord], embeddings: Sequence[Embedding] | None
    ) -> None:
        if embeddings is not None and len(embeddings) != len(records):
            raise MemoryStoreError(f"{op} to {self._name}: {len(embeddings)} embeddings for {len(records)} records")
        now = time.time()
        metadatas = [{CREATED_AT: now, LAST_USED: now, **r.metadata} for r in records]
        write = self._chroma.add if op == "add" else self._chroma.upsert
        with self._guard(f"{op} to {self._name}"):
            for start in range(0, len(records), self._batch):
                end = start + self._batch
                kwargs: dict[str, Any] = {}
                if embeddings is not None:
                    kwargs["embeddings"] = np.asarray(embeddings[start:end], dtype=np.float32)
                write(
                    ids=[r.id for r in records[start:end]],
                    documents=[r.text for r in records[start:end]],
                    metadatas=metadatas[start:end],  # type: ignore[arg-type]
                    **kwargs,
                )


def _unique(records: Sequence[MemoryRecord]) -> list[MemoryRecord]:
    """The records with each id once; a later record with the same id wins."""
    return list({record.id: record for record in records}.values())


def _field_key(value: Scalar | None) -> tuple[int, float, str]:
    if value is None:
        return (0, 0.0, "")
    if isinstance(value, bool) or isinstance(value, int | float):
        return (1, float(value), "")
    return (2, 0.0, str(value))


def _first_line(value: object) -> str:
    text = str(value).strip() or type(value).__name__
    return text.splitlines()[0]


def _scalars(metadata: Mapping[str, object] | None) -> Metadata:
    """A record's metadata as written: Chroma's type allows vectors and lists, the memory stores only scalars."""
    return {key: value for key, value in (metadata or {}).items() if isinstance(value, str | int | float | bool)}
