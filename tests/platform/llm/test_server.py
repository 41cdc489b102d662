from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import httpx
import litellm
import openai
import pytest
import uvicorn

from lamarck.platform.llm.server import create_app
from lamarck.platform.llm.serving import ServingEngine as LocalEngine

MESSAGES = [{"role": "user", "content": "Name three colors."}]


@pytest.fixture(scope="module")
def base_url(local_engine: LocalEngine) -> Iterator[str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(local_engine), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + 30
    while not server.started:
        assert time.time() < deadline, "server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/v1"
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture
def client(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0)


def test_models(client: openai.OpenAI) -> None:
    assert "smollm2-135m" in [m.id for m in client.models.list().data]


def test_chat_completion(client: openai.OpenAI) -> None:
    response = client.chat.completions.create(model="smollm2-135m", messages=MESSAGES, max_tokens=16)
    assert "Red" in response.choices[0].message.content
    tokens = response.usage.completion_tokens
    assert 0 < tokens <= 16 and response.choices[0].finish_reason == ("length" if tokens == 16 else "stop")


def test_stop_after_extension(client: openai.OpenAI) -> None:
    response = client.chat.completions.create(
        model="smollm2-135m", messages=MESSAGES, max_tokens=16, extra_body={"stop_after": ["Red"]}
    )
    assert response.choices[0].message.content.endswith("Red") and response.choices[0].finish_reason == "stop"
    with pytest.raises(openai.BadRequestError, match="stop_after.0. is not a valid regular expression"):
        client.chat.completions.create(
            model="smollm2-135m", messages=MESSAGES, max_tokens=4, extra_body={"stop_after": ["(unclosed"]}
        )


def test_streaming(client: openai.OpenAI) -> None:
    full = client.chat.completions.create(model="lamarck/smollm2-135m", messages=MESSAGES, max_tokens=16)
    stream = client.chat.completions.create(model="lamarck/smollm2-135m", messages=MESSAGES, max_tokens=16, stream=True)
    chunks = list(stream)
    assert len(chunks) > 3
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == full.choices[0].message.content
    assert chunks[-1].choices[0].finish_reason == full.choices[0].finish_reason


def test_litellm_openai_provider(base_url: str) -> None:
    response = litellm.completion(
        model="openai/smollm2-135m", api_base=base_url, api_key="unused", messages=MESSAGES, max_tokens=16
    )
    assert "Red" in response.choices[0].message.content


def test_unknown_model_404(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError, match="lamarck models list"):
        client.chat.completions.create(model="nope", messages=MESSAGES, max_tokens=2)


def test_bad_request_400(base_url: str) -> None:
    response = httpx.post(f"{base_url}/chat/completions", json={"model": "smollm2-135m", "messages": []})
    assert response.status_code == 400
    assert "messages" in response.json()["error"]["message"]
    response = httpx.post(
        f"{base_url}/chat/completions", json={"model": "smollm2-135m", "messages": MESSAGES, "temperature": -1}
    )
    assert response.status_code == 400
