"""Vector memory over ChromaDB: a persistent directory in embedded mode, a Chroma server in distributed mode.

Every collection uses cosine distance and Lamarck's offline embedding function (never Chroma's default, which
downloads a model). Each collection is bounded (``MemorySettings``); see ``ChromaCollection.enforce_bound``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

import chromadb
import httpx
from chromadb.config import Settings as ChromaSettings

from lamarck.memory.base import EPISODES, LESSONS, MemoryUnavailable
from lamarck.memory.chroma_collection import ChromaCollection, ErrorGuard
from lamarck.memory.embeddings import MiniLMEmbedding

if TYPE_CHECKING:
    from chromadb.api import ClientAPI

    from lamarck.platform.settings import MemorySettings, Settings

__all__ = ["ChromaCollection", "ChromaMemory", "open_memory", "parse_chroma_url"]


class ChromaMemory:
    """The ``VectorMemory`` over one Chroma client; collections are created on first use and cached."""

    def __init__(
        self,
        client: ClientAPI,
        settings: MemorySettings,
        *,
        guard: ErrorGuard,
        embedding: MiniLMEmbedding | None = None,
    ) -> None:
        self._client = client
        self._settings = settings
        self._guard = guard
        self._embedding = embedding or MiniLMEmbedding(batch_size=settings.embedding_batch_size)
        self._collections: dict[str, ChromaCollection] = {}
        with guard("read Chroma's batch size"):
            self._batch = max(1, min(client.get_max_batch_size(), 5000))

    @classmethod
    def embedded(cls, path: Path, settings: MemorySettings | None = None) -> ChromaMemory:
        settings = settings or _default_memory_settings()
        guard = ErrorGuard(str(path), "fix LAMARCK_CHROMA_PATH or the directory's permissions")
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise guard.unavailable(exc) from None
        with guard("open the Chroma directory"):
            client = chromadb.PersistentClient(path=str(path), settings=_chroma_settings())
        return cls(client, settings, guard=guard)

    @classmethod
    def http(cls, url: str, settings: MemorySettings | None = None) -> ChromaMemory:
        settings = settings or _default_memory_settings()
        host, port, ssl = parse_chroma_url(url)
        guard = ErrorGuard(
            url, f"start the server (`chroma run --path DIR --host {host} --port {port}`) or fix LAMARCK_CHROMA_URL"
        )
        base = f"{'https' if ssl else 'http'}://{host}:{port}"
        try:  # Chroma's own client has no timeout: probe first, so a hung server fails instead of blocking
            httpx.get(f"{base}/api/v2/heartbeat", timeout=settings.http_timeout_seconds).raise_for_status()
        except httpx.HTTPError as exc:
            raise guard.unavailable(exc) from None
        with guard("connect to the Chroma server"):
            client = chromadb.HttpClient(host=host, port=port, ssl=ssl, settings=_chroma_settings())
        for session in _http_sessions(client):  # Chroma's client waits forever on a hung server; give it a deadline
            session.timeout = httpx.Timeout(settings.http_timeout_seconds)
        return cls(client, settings, guard=guard)

    @property
    def client(self) -> ClientAPI:
        return self._client

    @property
    def embedding(self) -> MiniLMEmbedding:
        return self._embedding

    @property
    def episodes(self) -> ChromaCollection:
        return self.collection(EPISODES)

    @property
    def lessons(self) -> ChromaCollection:
        return self.collection(LESSONS)

    def collection(self, name: str) -> ChromaCollection:
        cached = self._collections.get(name)
        if cached is not None:
            return cached
        full_name = f"{self._settings.collection_prefix}{name}"
        with self._guard(f"open collection {full_name}"):
            chroma = self._client.get_or_create_collection(
                full_name,
                embedding_function=self._embedding,  # type: ignore[arg-type]
                configuration={"hnsw": {"space": "cosine"}},
            )
        collection = ChromaCollection(
            chroma,
            name,
            max_entries=self._bound(name),
            headroom=self._settings.evict_headroom,
            guard=self._guard,
            batch=self._batch,
            embedding=self._embedding,
        )
        self._collections[name] = collection
        return collection

    def drop(self, name: str) -> None:
        """Delete a whole collection and its records."""
        self._collections.pop(name, None)
        with self._guard(f"drop collection {name}"):
            self._client.delete_collection(f"{self._settings.collection_prefix}{name}")

    def close(self) -> None:
        self._collections.clear()
        sessions = _http_sessions(self._client)
        self._client.close()  # type: ignore[attr-defined]
        for session in sessions:  # Chroma's client leaves its connection pools open
            session.close()

    def __enter__(self) -> ChromaMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _bound(self, name: str) -> int:
        if name == LESSONS:
            return self._settings.max_lessons
        if name == EPISODES:
            return self._settings.max_episodes
        return self._settings.max_entries


def open_memory(settings: Settings) -> ChromaMemory:
    """The vector memory the settings describe: a Chroma server if ``chroma_url`` is set, else ``chroma_path``."""
    if settings.chroma_url:
        return ChromaMemory.http(settings.chroma_url, settings.memory)
    assert settings.chroma_path is not None  # Settings derives it from data_dir
    return ChromaMemory.embedded(settings.chroma_path, settings.memory)


def parse_chroma_url(url: str) -> tuple[str, int, bool]:
    """``http://host:port`` -> (host, port, ssl)."""
    parsed = urlparse(url.strip())
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise MemoryUnavailable(f"LAMARCK_CHROMA_URL must look like http://HOST:PORT, not {url!r}: fix it")
    try:
        port = parsed.port
    except ValueError:
        raise MemoryUnavailable(f"LAMARCK_CHROMA_URL has a bad port in {url!r}: fix it") from None
    ssl = parsed.scheme == "https"
    return parsed.hostname, port or (443 if ssl else 8000), ssl


def _http_sessions(client: ClientAPI) -> list[httpx.Client]:
    """The httpx sessions inside Chroma's HTTP client and its admin client (private, hence the defensive lookup)."""
    owners = (client, getattr(client, "_admin_client", None))
    sessions = [getattr(getattr(owner, "_server", None), "_session", None) for owner in owners]
    return [session for session in sessions if isinstance(session, httpx.Client)]


def _chroma_settings() -> ChromaSettings:
    return ChromaSettings(anonymized_telemetry=False)


def _default_memory_settings() -> MemorySettings:
    from lamarck.platform.settings import MemorySettings

    return MemorySettings()
