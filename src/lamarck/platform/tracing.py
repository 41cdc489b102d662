"""Traces: which episode, step and role each model call belongs to, and OpenTelemetry spans for what the loop does.

``call_context`` says, for the code inside it, which run, episode and step is being worked on; the gateway reads it
to link each ``LLMCall`` row and span, so agents need not thread ids through every call. It lives in a context
variable: set it in the thread (or task) that makes the call.

Spans follow the OpenTelemetry GenAI semantic conventions: ``chat {model}`` for a model call (made in the gateway),
``execute_tool {name}`` for a tool or skill call, ``invoke_agent {node}`` for a graph node, and ``sandbox.run_python``
for sandboxed code. They are made by this module's own ``TracerProvider`` (the process-wide OpenTelemetry global is
left to the application), which sends them to the OTLP collector that ``TracingSettings.otlp_endpoint`` names, and
nowhere when it is unset. ``configure`` is called by the composition root; what it sets holds for the process.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Span as ApiSpan
from opentelemetry.trace import SpanKind, Status, StatusCode

from lamarck.platform.otlp import HoldingExporter
from lamarck.platform.redaction import redact
from lamarck.platform.settings import TracingSettings

log = logging.getLogger(__name__)

TRACER_NAME = "lamarck"
MAX_ATTRIBUTE_CHARS = 16_000  # text put on a span; the LLMCall row keeps it whole


@dataclass(frozen=True)
class CallContext:
    run_id: str | None = None
    episode_id: str | None = None
    step: int | None = None


_NONE = CallContext()
_CALL: ContextVar[CallContext | None] = ContextVar("lamarck_call_context", default=None)


def current_call() -> CallContext:
    return _CALL.get() or _NONE


@contextmanager
def call_context(
    *, run_id: str | None = None, episode_id: str | None = None, step: int | None = None
) -> Iterator[CallContext]:
    """Inside, model calls and tool calls belong to this run, episode and step; fields left out keep the outer value."""
    outer = current_call()
    inner = CallContext(
        run_id=outer.run_id if run_id is None else run_id,
        episode_id=outer.episode_id if episode_id is None else episode_id,
        step=outer.step if step is None else step,
    )
    token = _CALL.set(inner)
    try:
        yield inner
    finally:
        _CALL.reset(token)


class _Processors(SpanProcessor):
    """The provider's one processor, forwarding to a list that ``configure`` and tests may change at any time (an
    SDK provider cannot drop a processor once added)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.items: tuple[SpanProcessor, ...] = ()

    def add(self, processor: SpanProcessor) -> None:
        with self._lock:
            self.items = (*self.items, processor)

    def remove(self, processor: SpanProcessor) -> None:
        with self._lock:
            self.items = tuple(item for item in self.items if item is not processor)

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        for item in self.items:
            item.on_start(span, parent_context=parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        for item in self.items:
            item.on_end(span)

    def shutdown(self) -> None:
        for item in self.items:
            item.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return all(item.force_flush(timeout_millis) for item in self.items)


class _Tracing:
    def __init__(self) -> None:
        self.settings = TracingSettings()
        self.processors = _Processors()
        self.provider = TracerProvider(resource=Resource.create({"service.name": self.settings.service_name}))
        self.provider.add_span_processor(self.processors)
        self.tracer = self.provider.get_tracer(TRACER_NAME)
        self.export: tuple[tuple[str, float, int], BatchSpanProcessor, HoldingExporter] | None = None
        self.lock = threading.Lock()


_STATE = _Tracing()


def configure(settings: TracingSettings) -> None:
    """Use these settings from now on: text on or off, and the OTLP collector (or none) spans go to."""
    with _STATE.lock:
        if settings.service_name != _STATE.settings.service_name:
            _STATE.provider = TracerProvider(resource=Resource.create({"service.name": settings.service_name}))
            _STATE.provider.add_span_processor(_STATE.processors)
            _STATE.tracer = _STATE.provider.get_tracer(TRACER_NAME)
        _STATE.settings = settings
        key = (settings.otlp_endpoint or "", settings.export_timeout_seconds, settings.held_spans)
        wanted = key if settings.otlp_endpoint else None
        current = _STATE.export[0] if _STATE.export else None
        if wanted == current:
            return
        if _STATE.export is not None:
            _, processor, _ = _STATE.export
            _STATE.processors.remove(processor)
            processor.shutdown()  # type: ignore[no-untyped-call]
            _STATE.export = None
        if settings.otlp_endpoint is not None:
            exporter = HoldingExporter(
                settings.otlp_endpoint,
                timeout_seconds=settings.export_timeout_seconds,
                held_spans=settings.held_spans,
            )
            processor = BatchSpanProcessor(exporter)
            _STATE.processors.add(processor)
            _STATE.export = (key, processor, exporter)
            log.info("tracing: spans go to the OTLP collector at %s", exporter.url)


def settings() -> TracingSettings:
    return _STATE.settings


def tracer() -> trace.Tracer:
    return _STATE.tracer


def exporter() -> HoldingExporter | None:
    """The OTLP exporter in use, or None when no collector is configured."""
    return _STATE.export[2] if _STATE.export else None


def add_span_processor(processor: SpanProcessor) -> None:
    """Also hand every span to ``processor`` (tests read spans back through an in-memory exporter this way)."""
    _STATE.processors.add(processor)


def remove_span_processor(processor: SpanProcessor) -> None:
    _STATE.processors.remove(processor)


def force_flush(timeout_millis: int = 30_000) -> bool:
    """Send every finished span now, held ones included; False when some could not be sent."""
    flushed = _STATE.processors.force_flush(timeout_millis)
    held = exporter()
    return (held.force_flush(timeout_millis) if held is not None else True) and flushed


def text(value: str, secrets: Sequence[str] = ()) -> str | None:
    """``value`` as it may be kept: redacted, or None when text is off."""
    return redact(value, secrets) if _STATE.settings.store_text else None


def clip(value: str) -> str:
    return value if len(value) <= MAX_ATTRIBUTE_CHARS else value[:MAX_ATTRIBUTE_CHARS] + " ...(truncated)"


def context_attributes(call: CallContext | None = None) -> dict[str, str | int]:
    call = call or current_call()
    found: dict[str, str | int | None] = {
        "lamarck.run.id": call.run_id,
        "lamarck.episode.id": call.episode_id,
        "lamarck.step": call.step,
    }
    return {name: value for name, value in found.items() if value is not None}


@contextmanager
def tool_span(name: str, argument: str, *, kind: str = "function") -> Iterator[ApiSpan]:
    """``execute_tool {name}``: one tool or skill call; the caller sets the result with ``tool_result``."""
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.type": kind,
        **context_attributes(),
    }
    kept = text(argument)
    if kept is not None:
        attributes["gen_ai.tool.call.arguments"] = clip(json.dumps({"input": kept}))
    with _STATE.tracer.start_as_current_span(
        f"execute_tool {name}", kind=SpanKind.INTERNAL, attributes=attributes
    ) as span:
        yield span


def tool_result(span: ApiSpan, observation: str, *, failed: bool) -> None:
    kept = text(observation)
    if kept is not None:
        span.set_attribute("gen_ai.tool.call.result", clip(kept))
    if failed:
        span.set_attribute("error.type", "tool_error")
        span.set_status(Status(StatusCode.ERROR, observation.splitlines()[0][:200] if observation else "tool error"))


@contextmanager
def node_span(node: str, *, run_id: str | None, generation: int | None) -> Iterator[ApiSpan]:
    """``invoke_agent {node}``: one node of the loop's graph, the parent of the calls its agent makes."""
    attributes: dict[str, Any] = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": node}
    if run_id is not None:
        attributes["lamarck.run.id"] = run_id
    if generation is not None:
        attributes["lamarck.generation"] = generation
    with _STATE.tracer.start_as_current_span(
        f"invoke_agent {node}", kind=SpanKind.INTERNAL, attributes=attributes
    ) as span:
        yield span


@contextmanager
def sandbox_span(mode: str) -> Iterator[ApiSpan]:
    """``sandbox.run_python``: one sandboxed run; the caller sets the outcome with ``sandbox_result``."""
    attributes: dict[str, Any] = {"lamarck.sandbox.mode": mode, **context_attributes()}
    with _STATE.tracer.start_as_current_span(
        "sandbox.run_python", kind=SpanKind.INTERNAL, attributes=attributes
    ) as span:
        yield span


def sandbox_result(span: ApiSpan, exit_code: int | None, limit_hit: str | None, wall_seconds: float) -> None:
    if exit_code is not None:
        span.set_attribute("process.exit.code", exit_code)
    span.set_attribute("lamarck.sandbox.wall_seconds", round(wall_seconds, 4))
    if limit_hit is not None:
        span.set_attribute("lamarck.sandbox.limit_hit", limit_hit)
    if exit_code != 0 or limit_hit is not None:
        span.set_attribute("error.type", limit_hit or "exit_code")
        span.set_status(Status(StatusCode.ERROR, f"exit code {exit_code}, limit {limit_hit or 'none'}"))
