"""One model call as people read it later: its ``chat {model}`` span (GenAI semantic conventions) and the links and
text its ``LLMCall`` row keeps.

The gateway opens a ``ChatTrace`` around a call, retries included, and tells it how the call ended. The run, episode
and step come from the caller's arguments, else from ``tracing.call_context``; the prompt and reply are redacted
(the gateway's own API keys and anything credential-shaped) and kept only while ``TracingSettings.store_text`` is on.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from lamarck.platform import tracing
from lamarck.platform.redaction import redact


@dataclass
class ChatTrace:
    role: str
    run_id: str | None
    episode_id: str | None
    step: int | None
    span: Span
    secrets: Sequence[str] = ()
    prompt: list[dict[str, Any]] | None = None
    response: list[str] | None = None
    _finished: bool = field(default=False, repr=False)

    @property
    def trace_id(self) -> str | None:
        context = self.span.get_span_context()
        return f"{context.trace_id:032x}" if context.is_valid else None

    def succeeded(
        self,
        response: Any,
        choices: list[str],
        finish_reasons: list[str],
        prompt_tokens: int,
        completion_tokens: int,
        attempts: int,
    ) -> None:
        if tracing.settings().store_text:
            self.response = [redact(choice, self.secrets) for choice in choices]
        span = self.span
        response_model = getattr(response, "model", None)
        if response_model:
            span.set_attribute("gen_ai.response.model", str(response_model))
        response_id = getattr(response, "id", None)
        if response_id:
            span.set_attribute("gen_ai.response.id", str(response_id))
        span.set_attribute("gen_ai.response.finish_reasons", finish_reasons)
        span.set_attribute("gen_ai.usage.input_tokens", prompt_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", completion_tokens)
        span.set_attribute("lamarck.attempts", attempts)
        if self.response is not None:
            output = [
                {"role": "assistant", "parts": [{"type": "text", "content": text}], "finish_reason": reason}
                for text, reason in zip(self.response, finish_reasons, strict=False)
            ]
            span.set_attribute("gen_ai.output.messages", tracing.clip(json.dumps(output)))

    def failed(self, exc: BaseException, reason: str, attempts: int) -> None:
        self.span.set_attribute("error.type", type(exc).__name__)
        self.span.set_attribute("lamarck.attempts", attempts)
        self.span.set_status(Status(StatusCode.ERROR, reason))


@contextmanager
def chat_trace(
    role: str,
    kwargs: dict[str, Any],
    *,
    run_id: str | None,
    episode_id: str | None,
    secrets: Sequence[str],
) -> Iterator[ChatTrace]:
    """The span and links for one model call made with litellm's ``kwargs``."""
    call = tracing.current_call()
    run_id = run_id or call.run_id
    episode_id = episode_id or call.episode_id
    model = str(kwargs["model"])
    attributes = _request_attributes(role, model, kwargs)
    attributes.update(tracing.context_attributes(tracing.CallContext(run_id, episode_id, call.step)))
    prompt = _kept_prompt(kwargs.get("messages") or [], secrets)
    if prompt is not None:
        attributes["gen_ai.input.messages"] = tracing.clip(json.dumps(_semconv_messages(prompt)))
    with tracing.tracer().start_as_current_span(f"chat {model}", kind=SpanKind.CLIENT, attributes=attributes) as span:
        yield ChatTrace(role, run_id, episode_id, call.step, span, tuple(secrets), prompt)


def _request_attributes(role: str, model: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    provider = model.split("/", 1)[0] if "/" in model else "openai"
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider,
        "gen_ai.system": provider,  # the attribute's older name, still what many backends read
        "gen_ai.request.model": model,
        "lamarck.role": role,
    }
    numbers = {
        "gen_ai.request.temperature": ("temperature", float),
        "gen_ai.request.top_p": ("top_p", float),
        "gen_ai.request.max_tokens": ("max_tokens", int),
        "gen_ai.request.seed": ("seed", int),
        "gen_ai.request.choice.count": ("n", int),
    }
    for attribute, (key, kind) in numbers.items():
        value = kwargs.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            attributes[attribute] = kind(value)
    stop = kwargs.get("stop")
    if isinstance(stop, str):
        stop = [stop]
    if isinstance(stop, list) and all(isinstance(item, str) for item in stop):
        attributes["gen_ai.request.stop_sequences"] = stop
    api_base = kwargs.get("api_base")
    if isinstance(api_base, str):
        parts = urlsplit(api_base)
        if parts.hostname:
            attributes["server.address"] = parts.hostname
        if parts.port:
            attributes["server.port"] = parts.port
    return attributes


def _kept_prompt(messages: list[dict[str, Any]], secrets: Sequence[str]) -> list[dict[str, Any]] | None:
    """The messages as the ``LLMCall`` row keeps them: role, name and redacted text; None when text is off."""
    if not tracing.settings().store_text:
        return None
    kept: list[dict[str, Any]] = []
    for message in messages:
        content = message.get("content")
        body = content if isinstance(content, str) else json.dumps(content, default=str)
        entry: dict[str, Any] = {"role": str(message.get("role", "")), "content": redact(body, secrets)}
        if message.get("name"):
            entry["name"] = str(message["name"])
        kept.append(entry)
    return kept


def _semconv_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"role": m["role"], "parts": [{"type": "text", "content": m["content"]}]} for m in messages]
