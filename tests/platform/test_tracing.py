"""Traces people can read: model calls linked to their episode and step with their (redacted) text, GenAI spans read
back through an in-memory exporter, and an OTLP collector that is down costing one log line and no spans."""

from __future__ import annotations

import json
import logging
import re
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import litellm
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from pydantic import SecretStr
from sqlalchemy import select

from lamarck.agents.toolbox import Toolbox
from lamarck.curriculum.environment import ToolSpec
from lamarck.platform import tracing
from lamarck.platform.llm.gateway import GatewayError, LLMGateway
from lamarck.platform.sandbox import Sandbox
from lamarck.platform.settings import (
    GatewaySettings,
    ModelRoute,
    ModelRoutes,
    SandboxSettings,
    SettingsError,
    TracingSettings,
    load_settings,
)
from lamarck.platform.storage.database import Database
from lamarck.platform.storage.records import LLMCall
from lamarck.testing import ScriptedLLM, scripted_provider

ROUTE_KEY = "route-key-0123456789"


@pytest.fixture
def scripted() -> Iterator[ScriptedLLM]:
    with scripted_provider(ScriptedLLM()) as handler:
        yield handler


def _gateway(db: Database | None) -> LLMGateway:
    routes = ModelRoutes(
        executor=ModelRoute(model="scripted/exec", api_key=SecretStr(ROUTE_KEY), api_base="http://127.0.0.1:9"),
        critic=ModelRoute(model="scripted/critic"),
    )
    return LLMGateway(routes, GatewaySettings(retries=0, backoff_seconds=0.0), db=db)


def _calls(db: Database) -> list[LLMCall]:
    with db.session() as session:
        return list(session.scalars(select(LLMCall).order_by(LLMCall.created_at)))


def _named(spans: InMemorySpanExporter, prefix: str) -> list[ReadableSpan]:
    return [span for span in spans.get_finished_spans() if span.name.startswith(prefix)]


SECRET_PROMPT = (
    "Use sk-proj-AbCdEfGhIjKlMnOpQrStUvWx1234 and send Authorization: Bearer tok.en-value-9876543210 "
    f"with {ROUTE_KEY}. What is 2 + 3?"
)


def test_a_model_call_is_linked_to_its_episode_and_step_with_text_and_a_genai_span(
    scripted: ScriptedLLM, sqlite_db: Database, spans: InMemorySpanExporter
) -> None:
    scripted.script = ["CALL calculator: 2 + 3"]
    messages = [{"role": "system", "content": "You solve tasks."}, {"role": "user", "content": SECRET_PROMPT}]
    with tracing.call_context(run_id="run1", episode_id="ep1", step=2):
        result = _gateway(sqlite_db).complete("executor", messages, temperature=0.5, top_p=0.9, max_tokens=32, seed=4)
    assert result.text == "CALL calculator: 2 + 3"
    [call] = _calls(sqlite_db)
    assert (call.role, call.run_id, call.episode_id, call.step, call.ok) == ("executor", "run1", "ep1", 2, True)
    assert call.response == ["CALL calculator: 2 + 3"]
    assert call.prompt is not None and [m["role"] for m in call.prompt] == ["system", "user"]
    stored = json.dumps(call.prompt)
    assert "sk-proj" not in stored and "tok.en-value" not in stored and ROUTE_KEY not in stored
    assert "[REDACTED]" in stored and "What is 2 + 3?" in stored
    sent = scripted.calls[0]["messages"][1]["content"]
    assert ROUTE_KEY in sent  # only what is kept is redacted, never what the model is sent

    [span] = _named(spans, "chat ")
    assert span.name == "chat scripted/exec" and span.kind is SpanKind.CLIENT
    attributes = dict(span.attributes or {})
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.provider.name"] == "scripted" and attributes["gen_ai.system"] == "scripted"
    assert attributes["gen_ai.request.model"] == "scripted/exec"
    assert attributes["gen_ai.request.temperature"] == 0.5 and attributes["gen_ai.request.top_p"] == 0.9
    assert attributes["gen_ai.request.max_tokens"] == 32 and attributes["gen_ai.request.seed"] == 4
    assert attributes["gen_ai.response.model"]
    assert attributes["gen_ai.usage.input_tokens"] == result.prompt_tokens > 0
    assert attributes["gen_ai.usage.output_tokens"] == result.completion_tokens > 0
    assert attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert attributes["server.address"] == "127.0.0.1" and attributes["server.port"] == 9
    assert (attributes["lamarck.run.id"], attributes["lamarck.episode.id"], attributes["lamarck.step"]) == (
        "run1",
        "ep1",
        2,
    )
    assert ROUTE_KEY not in str(attributes) and "sk-proj" not in str(attributes)
    output = json.loads(str(attributes["gen_ai.output.messages"]))
    assert output[0]["parts"][0]["content"] == "CALL calculator: 2 + 3"
    assert span.context is not None and call.trace_id == f"{span.context.trace_id:032x}"


def test_explicit_ids_win_over_the_context_and_calls_outside_one_have_none(
    scripted: ScriptedLLM, sqlite_db: Database, spans: InMemorySpanExporter
) -> None:
    scripted.script = ["a", "b"]
    gateway = _gateway(sqlite_db)
    with tracing.call_context(run_id="run1", episode_id="ep1", step=0):
        gateway.complete("critic", [{"role": "user", "content": "judge"}], episode_id="judged")
    gateway.complete("critic", [{"role": "user", "content": "free"}])
    first, second = _calls(sqlite_db)
    assert (first.run_id, first.episode_id, first.step) == ("run1", "judged", 0)
    assert (second.run_id, second.episode_id, second.step) == (None, None, None)


def test_with_text_off_no_text_is_kept(scripted: ScriptedLLM, sqlite_db: Database, spans: InMemorySpanExporter) -> None:
    tracing.configure(TracingSettings(store_text=False))
    scripted.script = ["ANSWER: 5"]
    _gateway(sqlite_db).complete("executor", [{"role": "user", "content": SECRET_PROMPT}])
    [call] = _calls(sqlite_db)
    assert call.prompt is None and call.response is None and call.prompt_tokens > 0
    [span] = _named(spans, "chat ")
    assert "gen_ai.input.messages" not in (span.attributes or {})
    assert "gen_ai.output.messages" not in (span.attributes or {})


def test_a_failed_call_is_an_error_span_and_a_linked_row(
    scripted: ScriptedLLM, sqlite_db: Database, spans: InMemorySpanExporter
) -> None:
    scripted.script = [litellm.exceptions.BadRequestError(message="bad", llm_provider="scripted", model="exec")]
    with tracing.call_context(episode_id="ep9", step=1), pytest.raises(GatewayError):
        _gateway(sqlite_db).complete("executor", [{"role": "user", "content": "x"}])
    [call] = _calls(sqlite_db)
    assert not call.ok and call.episode_id == "ep9" and call.step == 1 and call.response is None
    [span] = _named(spans, "chat ")
    assert span.status.status_code is StatusCode.ERROR
    assert (span.attributes or {})["error.type"] == "BadRequestError"


def test_tool_calls_are_execute_tool_spans(spans: InMemorySpanExporter) -> None:
    def add(expression: str) -> str:
        left, right = expression.split("+")
        return str(int(left) + int(right))

    tool = ToolSpec(
        name="calculator",
        description="adds",
        parameters={"type": "object", "properties": {"expression": {"type": "string"}}},
        fn=add,
    )
    toolbox = Toolbox(tools=[tool])
    with tracing.call_context(episode_id="ep1", step=3):
        assert toolbox.call("calculator", "2 + 3") == "5"
        assert toolbox.call("calculator", "two + 3").startswith("error: ValueError")
    good, bad = _named(spans, "execute_tool ")
    assert good.name == "execute_tool calculator"
    attributes = dict(good.attributes or {})
    assert attributes["gen_ai.operation.name"] == "execute_tool" and attributes["gen_ai.tool.name"] == "calculator"
    assert attributes["gen_ai.tool.call.result"] == "5" and json.loads(str(attributes["gen_ai.tool.call.arguments"]))
    assert attributes["lamarck.episode.id"] == "ep1" and attributes["lamarck.step"] == 3
    assert good.status.status_code is not StatusCode.ERROR
    assert bad.status.status_code is StatusCode.ERROR and (bad.attributes or {})["error.type"] == "tool_error"


def test_sandbox_runs_are_spans_with_their_exit_code(spans: InMemorySpanExporter) -> None:
    sandbox = Sandbox(SandboxSettings(mode="limits_only"))
    assert sandbox.run_python("print(1)").ok
    assert sandbox.run_python("raise SystemExit(3)").exit_code == 3
    ok, failed = _named(spans, "sandbox.run_python")
    assert (ok.attributes or {})["process.exit.code"] == 0 and ok.status.status_code is not StatusCode.ERROR
    assert (failed.attributes or {})["process.exit.code"] == 3 and failed.status.status_code is StatusCode.ERROR


def test_a_bad_endpoint_is_one_line_that_names_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAMARCK_TRACING__OTLP_ENDPOINT", "collector:4318")
    with pytest.raises(SettingsError) as info:
        load_settings()
    message = str(info.value)
    assert "\n" not in message and "LAMARCK_TRACING__OTLP_ENDPOINT" in message and "http://" in message
    monkeypatch.setenv("LAMARCK_TRACING__OTLP_ENDPOINT", "http://127.0.0.1:4318")
    assert load_settings().tracing.otlp_endpoint == "http://127.0.0.1:4318"


class _Collector(BaseHTTPRequestHandler):
    received: list[bytes] = []

    def do_POST(self) -> None:  # noqa: N802 (the http.server API)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).received.append(body)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _span_names(bodies: list[bytes]) -> list[str]:
    names: list[str] = []
    for body in bodies:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        names += [s.name for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
    return names


def test_a_collector_that_is_down_costs_one_log_line_and_no_spans(
    scripted: ScriptedLLM, sqlite_db: Database, spans: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    port = _closed_port()
    endpoint = f"http://127.0.0.1:{port}"
    tracing.configure(TracingSettings(otlp_endpoint=endpoint, export_timeout_seconds=1.0))
    exporter = tracing.exporter()
    assert exporter is not None and exporter.url == f"{endpoint}/v1/traces"
    scripted.script = ["ANSWER: 1", "ANSWER: 2"]
    gateway = _gateway(sqlite_db)
    with caplog.at_level(logging.INFO):
        assert gateway.complete("executor", [{"role": "user", "content": "one"}]).text == "ANSWER: 1"
        tracing.force_flush()
        assert gateway.complete("executor", [{"role": "user", "content": "two"}]).text == "ANSWER: 2"
        tracing.force_flush()
    assert len(_calls(sqlite_db)) == 2  # the run went on and recorded everything
    lines = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(lines) == 1, [r.getMessage() for r in lines]
    line = lines[0].getMessage()
    assert lines[0].name == "lamarck.platform.otlp" and "\n" not in line
    assert endpoint in line and "unreachable" in line and "LAMARCK_TRACING__OTLP_ENDPOINT" in line
    assert re.search(r"unreachable \(.+\)", line)  # the cause: refused, or timed out on a loaded machine
    assert exporter.down and exporter.held == 2

    _Collector.received = []
    server = HTTPServer(("127.0.0.1", port), _Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with caplog.at_level(logging.INFO, logger="lamarck.platform.otlp"):
            assert tracing.force_flush()
    finally:
        server.shutdown()
        server.server_close()
    assert exporter.held == 0 and not exporter.down
    assert _span_names(_Collector.received) == ["chat scripted/exec", "chat scripted/exec"]
    assert any("answers again: sent 2 held spans" in r.getMessage() for r in caplog.records)
