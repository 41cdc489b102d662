"""Memory fixtures: a real Chroma server for the session, and a ChromaMemory in each mode (embedded, HTTP)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from memory_chroma_server import ChromaServer

from lamarck.memory.chroma import ChromaMemory
from lamarck.platform.settings import MemorySettings

MODES = ("embedded", "http")


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChromaServer]:
    root = tmp_path_factory.mktemp("chroma-server")
    server = ChromaServer(root / "data", root / "server.log")
    yield server
    server.stop()


@pytest.fixture
def start_chroma_server(tmp_path: Path) -> Iterator[Callable[[], ChromaServer]]:
    """Starts extra servers for one test (e.g. to kill one mid-test); all are stopped afterwards."""
    servers: list[ChromaServer] = []

    def start() -> ChromaServer:
        server = ChromaServer(tmp_path / f"server-{len(servers)}", tmp_path / f"server-{len(servers)}.log")
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def memory_settings() -> MemorySettings:
    return MemorySettings(max_lessons=1000, max_episodes=1000, max_entries=5, evict_headroom=0.0)


@pytest.fixture(params=MODES)
def memory(request: pytest.FixtureRequest, tmp_path: Path, memory_settings: MemorySettings) -> Iterator[ChromaMemory]:
    """The same test against a persistent directory and against the session's Chroma server."""
    if request.param == "embedded":
        mem = ChromaMemory.embedded(tmp_path / "chroma", memory_settings)
        yield mem
        mem.close()
        return
    server: ChromaServer = request.getfixturevalue("chroma_server")
    prefix = f"t{uuid.uuid4().hex[:10]}_"  # each test gets its own collections on the shared server
    mem = ChromaMemory.http(server.url, memory_settings.model_copy(update={"collection_prefix": prefix}))
    yield mem
    for collection in mem.client.list_collections():
        if collection.name.startswith(prefix):
            mem.client.delete_collection(collection.name)
    mem.close()
