"""What embedding costs: model calls, texts embedded, cache hits and seconds, counted on the embedding function.

Kept apart from ``embeddings.py`` so that readers of the counters (the loop's nodes) do not import Chroma.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass


@dataclass(frozen=True)
class EmbeddingCost:
    calls: int = 0  # model invocations: one per embed() that had anything to compute
    texts: int = 0  # texts the model embedded
    cache_hits: int = 0  # texts answered without the model (cached, or repeated within one call)
    seconds: float = 0.0  # inside the model

    def __add__(self, other: EmbeddingCost) -> EmbeddingCost:
        return EmbeddingCost(
            self.calls + other.calls,
            self.texts + other.texts,
            self.cache_hits + other.cache_hits,
            self.seconds + other.seconds,
        )

    def __sub__(self, other: EmbeddingCost) -> EmbeddingCost:
        return EmbeddingCost(
            self.calls - other.calls,
            self.texts - other.texts,
            self.cache_hits - other.cache_hits,
            self.seconds - other.seconds,
        )


class EmbeddingStats:
    """Running totals, safe across threads; the difference of two snapshots is the cost of the work between them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._total = EmbeddingCost()

    def record(self, cost: EmbeddingCost) -> None:
        with self._lock:
            self._total = self._total + cost

    def snapshot(self) -> EmbeddingCost:
        with self._lock:
            return self._total


def stats_of(owner: object) -> EmbeddingStats | None:
    """The counters of the embedding function behind a vector memory or collection, if it keeps any."""
    stats = getattr(getattr(owner, "embedding", None), "stats", None)
    return stats if isinstance(stats, EmbeddingStats) else None
