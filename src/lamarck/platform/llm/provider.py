"""litellm custom provider ``lamarck``: ``litellm.completion(model="lamarck/<version>", ...)`` runs on the local
engine."""

from __future__ import annotations

import asyncio
import os
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch the cost map over the network

import litellm  # noqa: E402
from litellm.llms.custom_llm import CustomLLM, CustomLLMError  # noqa: E402
from litellm.types.llms.openai import ChatCompletionUsageBlock  # noqa: E402
from litellm.types.utils import Choices, GenericStreamingChunk, Message, ModelResponse, Usage  # noqa: E402

from lamarck.platform.llm.frontend import ChatMessages  # noqa: E402
from lamarck.platform.llm.model_store import ModelStoreError  # noqa: E402
from lamarck.platform.llm.sampling import Completion, SamplingParams  # noqa: E402
from lamarck.platform.llm.serving import ServingEngine  # noqa: E402

PROVIDER = "lamarck"
_lock = threading.Lock()


def params_from(optional: dict[str, Any]) -> SamplingParams:
    """OpenAI-style request parameters -> SamplingParams (unknown ones are ignored)."""
    stop = optional.get("stop") or []
    stop_after = optional.get("stop_after") or []
    max_tokens = optional.get("max_tokens") or optional.get("max_completion_tokens") or 256
    return SamplingParams(
        max_tokens=int(max_tokens),
        temperature=float(optional["temperature"]) if optional.get("temperature") is not None else 0.0,
        top_p=float(optional["top_p"]) if optional.get("top_p") is not None else 1.0,
        seed=int(optional["seed"]) if optional.get("seed") is not None else None,
        stop=[stop] if isinstance(stop, str) else list(stop),
        stop_after=[stop_after] if isinstance(stop_after, str) else list(stop_after),
        n=int(optional.get("n") or 1),
    )


def fill_response(response: ModelResponse, model: str, completions: list[Completion]) -> ModelResponse:
    response.choices = [
        Choices(index=i, finish_reason=c.finish_reason, message=Message(role="assistant", content=c.text))
        for i, c in enumerate(completions)
    ]
    prompt = completions[0].prompt_tokens if completions else 0
    generated = sum(c.completion_tokens for c in completions)
    # litellm's ModelResponse takes usage in __init__ and sets it as an attribute, but declares no such field
    response.usage = Usage(prompt_tokens=prompt, completion_tokens=generated, total_tokens=prompt + generated)  # type: ignore[attr-defined]
    response.model = f"{PROVIDER}/{model}"
    response.created = int(time.time())
    response._hidden_params["latency_s"] = max((c.latency_s for c in completions), default=0.0)
    return response


class LamarckLLM(CustomLLM):
    def __init__(self, engine: ServingEngine) -> None:
        super().__init__()
        self.engine = engine

    def _run(self, model: str, messages: ChatMessages, optional_params: dict[str, Any]) -> list[Completion]:
        try:
            return self.engine.chat(model, messages, params_from(optional_params))
        except ModelStoreError as exc:
            raise CustomLLMError(status_code=404, message=str(exc)) from exc
        except ValueError as exc:
            raise CustomLLMError(status_code=400, message=str(exc)) from exc

    def completion(
        self,
        model: str,
        messages: ChatMessages,
        api_base: str,
        custom_prompt_dict: dict[str, Any],
        model_response: ModelResponse,
        print_verbose: Any,
        encoding: Any,
        api_key: Any,
        logging_obj: Any,
        optional_params: dict[str, Any],
        *args: Any,
        **kwargs: Any,
    ) -> ModelResponse:
        return fill_response(model_response, model, self._run(model, messages, optional_params))

    async def acompletion(
        self,
        model: str,
        messages: ChatMessages,
        api_base: str,
        custom_prompt_dict: dict[str, Any],
        model_response: ModelResponse,
        print_verbose: Any,
        encoding: Any,
        api_key: Any,
        logging_obj: Any,
        optional_params: dict[str, Any],
        *args: Any,
        **kwargs: Any,
    ) -> ModelResponse:
        completions = await asyncio.to_thread(self._run, model, messages, optional_params)
        return fill_response(model_response, model, completions)

    def streaming(
        self,
        model: str,
        messages: ChatMessages,
        api_base: str,
        custom_prompt_dict: dict[str, Any],
        model_response: ModelResponse,
        print_verbose: Any,
        encoding: Any,
        api_key: Any,
        logging_obj: Any,
        optional_params: dict[str, Any],
        *args: Any,
        **kwargs: Any,
    ) -> Iterator[GenericStreamingChunk]:
        deltas, future = self.engine.stream_chat(model, messages, params_from(optional_params))
        for delta in deltas:
            yield _chunk(delta, None)
        done = future.result()
        yield _chunk("", done)

    # litellm declares astreaming as a coroutine returning an async iterator, yet iterates the method's result
    # directly: it must be an async generator, which mypy types differently
    async def astreaming(  # type: ignore[override]
        self,
        model: str,
        messages: ChatMessages,
        api_base: str,
        custom_prompt_dict: dict[str, Any],
        model_response: ModelResponse,
        print_verbose: Any,
        encoding: Any,
        api_key: Any,
        logging_obj: Any,
        optional_params: dict[str, Any],
        *args: Any,
        **kwargs: Any,
    ) -> AsyncIterator[GenericStreamingChunk]:
        iterator = self.streaming(
            model,
            messages,
            api_base,
            custom_prompt_dict,
            model_response,
            print_verbose,
            encoding,
            api_key,
            logging_obj,
            optional_params,
        )
        while (chunk := await asyncio.to_thread(next, iterator, None)) is not None:
            yield chunk


def _chunk(text: str, done: Completion | None) -> GenericStreamingChunk:
    usage: ChatCompletionUsageBlock | None = None
    if done is not None:
        usage = {
            "prompt_tokens": done.prompt_tokens,
            "completion_tokens": done.completion_tokens,
            "total_tokens": done.prompt_tokens + done.completion_tokens,
        }
    return GenericStreamingChunk(
        text=text,
        is_finished=done is not None,
        finish_reason=done.finish_reason if done else "",
        usage=usage,
        index=0,
        tool_use=None,
    )


def register_local_provider(engine: ServingEngine) -> None:
    """Route ``lamarck/<version>`` in litellm to ``engine``; calling again replaces the engine."""
    with _lock:
        handler = LamarckLLM(engine)
        others = [e for e in (litellm.custom_provider_map or []) if e.get("provider") != PROVIDER]
        litellm.custom_provider_map = [*others, {"provider": PROVIDER, "custom_handler": handler}]
        from litellm.utils import custom_llm_setup

        custom_llm_setup()  # litellm reads the handler from custom_provider_map on every call


def request_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex}"
