"""Choosing the mode from Settings, and what a user sees when Chroma is down."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from memory_chroma_server import ChromaServer, free_port

from lamarck.memory.base import MemoryRecord, MemoryUnavailable
from lamarck.memory.chroma import ChromaMemory, open_memory, parse_chroma_url
from lamarck.platform.settings import MemorySettings, Settings


def test_open_memory_embedded_by_default(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", memory=MemorySettings(max_lessons=7))
    with open_memory(settings) as memory:
        assert memory.lessons.max_entries == 7
        memory.lessons.add([MemoryRecord(id="a", text="carry the one")])
    assert (tmp_path / "data" / "chroma").is_dir()


def test_open_memory_uses_the_server_when_chroma_url_is_set(chroma_server: ChromaServer, tmp_path: Path) -> None:
    memory_settings = MemorySettings(collection_prefix="modes_")
    settings = Settings(data_dir=tmp_path, chroma_url=chroma_server.url, memory=memory_settings)
    with open_memory(settings) as memory:
        memory.episodes.upsert([MemoryRecord(id="e", text="episode")])
        assert "modes_episodes" in {c.name for c in memory.client.list_collections()}
        memory.drop("episodes")
    assert not (tmp_path / "chroma").exists()


def test_unreachable_server_is_one_line_naming_the_fix(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(MemoryUnavailable) as caught:
        open_memory(Settings(data_dir=tmp_path, chroma_url=url))
    message = str(caught.value)
    assert "\n" not in message and url in message
    assert "chroma run" in message and "LAMARCK_CHROMA_URL" in message
    assert caught.value.__suppress_context__  # no chained stack trace behind it


def test_server_going_down_mid_session_is_one_line(start_chroma_server: Callable[[], ChromaServer]) -> None:
    server = start_chroma_server()
    memory = ChromaMemory.http(server.url, MemorySettings())
    lessons = memory.lessons
    lessons.add([MemoryRecord(id="a", text="carry the one")])
    server.stop()
    actions = (lessons.count, lambda: lessons.query("carry"), lambda: lessons.add([MemoryRecord(id="b", text="b")]))
    for action in actions:
        with pytest.raises(MemoryUnavailable) as caught:
            action()
        assert "\n" not in str(caught.value) and "LAMARCK_CHROMA_URL" in str(caught.value)
    memory.close()


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://127.0.0.1:8123", ("127.0.0.1", 8123, False)),
        ("http://chroma", ("chroma", 8000, False)),
        ("https://memory.example.org", ("memory.example.org", 443, True)),
    ],
)
def test_parse_chroma_url(url: str, expected: tuple[str, int, bool]) -> None:
    assert parse_chroma_url(url) == expected


@pytest.mark.parametrize("url", ["localhost:8000", "ftp://x:1", "http://:80", "http://host:notaport"])
def test_bad_chroma_url_is_one_line(url: str) -> None:
    with pytest.raises(MemoryUnavailable, match="LAMARCK_CHROMA_URL.*fix it"):
        parse_chroma_url(url)


def test_hung_server_times_out_as_unavailable() -> None:
    with socket.socket() as listener:  # accepts connections (backlog) but never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        started = time.monotonic()
        with pytest.raises(MemoryUnavailable, match="timed out"):
            ChromaMemory.http(url, MemorySettings(http_timeout_seconds=0.5))
        assert time.monotonic() - started < 5
