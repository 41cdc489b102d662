"""A scripted model behind a real litellm custom provider, for testing the logic around model calls."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import litellm
from litellm import CustomLLM, ModelResponse

Responder = Callable[[list[dict[str, Any]], int], list[str]]


class ScriptedLLM(CustomLLM):
    """Replies from a script (texts or exceptions, in order) or from a responder(messages, n) -> texts."""

    def __init__(self, responder: Responder | None = None) -> None:
        super().__init__()
        self.script: list[str | Exception] = []
        self.responder = responder
        self.calls: list[dict[str, Any]] = []

    def completion(self, *args: Any, **kwargs: Any) -> ModelResponse:
        self.calls.append(kwargs)
        n = int((kwargs.get("optional_params") or {}).get("n") or 1)
        if self.responder is not None:
            texts = self.responder(kwargs["messages"], n)
        else:
            item = self.script.pop(0)
            if isinstance(item, Exception):
                raise item
            texts = [item] * n
        prompt_tokens = sum(len(str(m.get("content") or "").split()) for m in kwargs["messages"])
        return ModelResponse(
            model=kwargs.get("model", "scripted"),
            choices=[
                {"index": i, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
                for i, text in enumerate(texts)
            ],
            usage={
                "prompt_tokens": prompt_tokens,
                "completion_tokens": sum(len(t.split()) for t in texts),
                "total_tokens": prompt_tokens + sum(len(t.split()) for t in texts),
            },
        )

    async def acompletion(self, *args: Any, **kwargs: Any) -> ModelResponse:
        return self.completion(*args, **kwargs)


@contextmanager
def scripted_provider(handler: ScriptedLLM, name: str = "scripted") -> Iterator[ScriptedLLM]:
    previous = list(litellm.custom_provider_map)
    litellm.custom_provider_map = [p for p in previous if p["provider"] != name] + [
        {"provider": name, "custom_handler": handler}
    ]
    litellm.utils.custom_llm_setup()
    try:
        yield handler
    finally:
        litellm.custom_provider_map = previous
