"""``lamarck serve`` as a real uvicorn process: bound to 127.0.0.1, health without a key, a key from ``lamarck keys
create`` accepted, and a chunked body over the limit refused with 413 over real HTTP."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    env = {**os.environ, "LAMARCK_DATA_DIR": str(tmp_path / "data"), "LAMARCK_API__MAX_BODY_BYTES": "2048"}
    cli = [sys.executable, "-m", "lamarck.cli"]
    created = subprocess.run([*cli, "keys", "create", "--scope", "tasks"], env=env, capture_output=True, text=True)
    assert created.returncode == 0, created.stderr
    key = created.stdout.strip().splitlines()[-1]
    port = _free_port()
    process = subprocess.Popen(
        [*cli, "serve", "--port", str(port)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{base}/v1/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        else:
            raise AssertionError("lamarck serve did not answer /v1/health within 60 s")
        yield base, {"Authorization": f"Bearer {key}"}
    finally:
        process.terminate()
        output = process.communicate(timeout=30)[0].decode()
        assert key not in output  # the key is never in the server's log


def test_served_over_real_http(server: tuple[str, dict[str, str]]) -> None:
    base, headers = server
    assert httpx.get(f"{base}/v1/health").json() == {"status": "ok", "database": "ok"}
    assert httpx.post(f"{base}/v1/tasks", json={"prompt": 1}).status_code == 401

    def chunks() -> Iterator[bytes]:
        for _ in range(16):
            yield b" " * 512

    refused = httpx.post(
        f"{base}/v1/tasks", content=chunks(), headers={**headers, "Content-Type": "application/json"}, timeout=10
    )
    assert "Content-Length" not in refused.request.headers and refused.request.headers["Transfer-Encoding"] == "chunked"
    assert refused.status_code == 413 and refused.json()["error"]["code"] == "payload_too_large"
    bad = httpx.post(f"{base}/v1/tasks", json={"prompt": "x", "environment": "chemistry"}, headers=headers)
    assert bad.status_code == 422 and "unknown environment" in bad.json()["error"]["message"]
