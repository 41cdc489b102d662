"""Vector memory: episodes, lessons and other collections over ChromaDB, with an offline embedding function.

Importing this package is cheap; ``lamarck.memory.chroma`` (``open_memory``) pulls in Chroma and, on first
embedding, sentence-transformers.
"""

from lamarck.memory.base import (
    EPISODES,
    LESSONS,
    MemoryCollection,
    MemoryHit,
    MemoryRecord,
    MemoryStoreError,
    MemoryUnavailable,
    VectorMemory,
    Where,
)

__all__ = [
    "EPISODES",
    "LESSONS",
    "MemoryCollection",
    "MemoryHit",
    "MemoryRecord",
    "MemoryStoreError",
    "MemoryUnavailable",
    "VectorMemory",
    "Where",
]
