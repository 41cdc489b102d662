from __future__ import annotations

import asyncio

import litellm
import pytest

from lamarck.platform.llm.provider import register_local_provider
from lamarck.platform.llm.serving import ServingEngine as LocalEngine

MESSAGES = [{"role": "user", "content": "Name three colors."}]


@pytest.fixture(scope="module", autouse=True)
def registered(local_engine: LocalEngine) -> None:
    register_local_provider(local_engine)
    register_local_provider(local_engine)  # idempotent


def test_completion_greedy() -> None:
    response = litellm.completion(model="lamarck/smollm2-135m", messages=MESSAGES, max_tokens=16, temperature=0)
    assert "Red" in response.choices[0].message.content
    assert response.choices[0].finish_reason == "stop"
    assert response.usage.prompt_tokens > 10 and 0 < response.usage.completion_tokens <= 12
    again = litellm.completion(model="lamarck/smollm2-135m", messages=MESSAGES, max_tokens=16, temperature=0)
    assert again.choices[0].message.content == response.choices[0].message.content


def test_params_honoured() -> None:
    kwargs = dict(
        model="lamarck/smollm2-135m", messages=MESSAGES, max_tokens=6, temperature=1.0, top_p=0.9, seed=11, n=2
    )
    first = litellm.completion(**kwargs)
    second = litellm.completion(**kwargs)
    assert len(first.choices) == 2
    assert [c.message.content for c in first.choices] == [c.message.content for c in second.choices]
    stopped = litellm.completion(model="lamarck/smollm2-135m", messages=MESSAGES, max_tokens=16, stop=["Blue"])
    assert "Blue" not in stopped.choices[0].message.content
    kept = litellm.completion(model="lamarck/smollm2-135m", messages=MESSAGES, max_tokens=16, stop_after=["Blue"])
    assert kept.choices[0].message.content.endswith("Blue") and kept.choices[0].finish_reason == "stop"


def test_acompletion() -> None:
    response = asyncio.run(litellm.acompletion(model="lamarck/smollm2-135m", messages=MESSAGES, max_tokens=4))
    assert response.usage.completion_tokens == 4 and response.choices[0].finish_reason == "length"


def test_streaming() -> None:
    chunks = list(litellm.completion(model="lamarck/smollm2-135m", messages=MESSAGES, max_tokens=16, stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert "Red" in text


def test_unknown_model() -> None:
    with pytest.raises(litellm.NotFoundError, match="lamarck models list"):
        litellm.completion(model="lamarck/nope", messages=MESSAGES, max_tokens=2)
