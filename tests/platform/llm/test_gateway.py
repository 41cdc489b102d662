"""Gateway logic around litellm: routing, retries, recording. A scripted litellm provider stands in for the model."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import litellm
import pytest
from sqlalchemy import select

from lamarck.platform.llm.gateway import GatewayError, LLMGateway
from lamarck.platform.settings import GatewaySettings, ModelRoute, ModelRoutes
from lamarck.platform.storage.database import Database
from lamarck.platform.storage.records import LLMCall
from lamarck.testing import ScriptedLLM, scripted_provider


@pytest.fixture
def scripted() -> Iterator[ScriptedLLM]:
    with scripted_provider(ScriptedLLM()) as handler:
        yield handler


def _gateway(db: Database | None, retries: int = 2, **route: Any) -> LLMGateway:
    routes = ModelRoutes(
        executor=ModelRoute(model="scripted/exec", **route),
        critic=ModelRoute(model="scripted/critic"),
    )
    return LLMGateway(routes, GatewaySettings(retries=retries, backoff_seconds=0.0), db=db)


def _transient() -> Exception:
    return litellm.exceptions.ServiceUnavailableError(message="overloaded", llm_provider="scripted", model="exec")


def test_routes_by_role_and_records_the_call(scripted: ScriptedLLM, sqlite_db: Database) -> None:
    scripted.script = ["executor says hi", "critic says no"]
    gateway = _gateway(sqlite_db)
    assert gateway.complete("executor", [{"role": "user", "content": "hi"}], run_id="r1").text == "executor says hi"
    assert gateway.complete("critic", [{"role": "user", "content": "judge"}]).text == "critic says no"
    assert [call["model"] for call in scripted.calls] == ["exec", "critic"]
    with sqlite_db.session() as session:
        calls = list(session.scalars(select(LLMCall).order_by(LLMCall.created_at)))
    assert [(c.role, c.model, c.ok, c.run_id) for c in calls] == [
        ("executor", "scripted/exec", True, "r1"),
        ("critic", "scripted/critic", True, None),
    ]
    assert all(c.prompt_tokens > 0 and c.completion_tokens > 0 for c in calls)


def test_sampling_defaults_come_from_the_route_and_calls_override_them(scripted: ScriptedLLM) -> None:
    scripted.script = ["a", "b"]
    gateway = _gateway(None)
    gateway.complete("executor", [{"role": "user", "content": "x"}])
    gateway.complete("executor", [{"role": "user", "content": "x"}], temperature=0.9, max_tokens=7)
    first, second = (call["optional_params"] for call in scripted.calls)
    assert first.get("temperature") == 0.0 and first.get("max_tokens") == 256
    assert second.get("temperature") == 0.9 and second.get("max_tokens") == 7


def test_transient_errors_are_retried(scripted: ScriptedLLM, sqlite_db: Database) -> None:
    scripted.script = [_transient(), _transient(), "third time lucky"]
    result = _gateway(sqlite_db, retries=2).complete("executor", [{"role": "user", "content": "x"}])
    assert result.text == "third time lucky" and result.attempts == 3


def test_retries_are_bounded_and_the_failure_is_recorded(scripted: ScriptedLLM, sqlite_db: Database) -> None:
    scripted.script = [_transient(), _transient()]
    with pytest.raises(GatewayError) as info:
        _gateway(sqlite_db, retries=1).complete("executor", [{"role": "user", "content": "x"}])
    assert "after 2 attempts" in str(info.value) and "\n" not in str(info.value)
    with sqlite_db.session() as session:
        call = session.scalar(select(LLMCall))
    assert call is not None and not call.ok and call.attempts == 2


def test_async_twin(scripted: ScriptedLLM) -> None:
    import asyncio

    scripted.script = [_transient(), "async reply"]
    result = asyncio.run(_gateway(None).acomplete("executor", [{"role": "user", "content": "x"}]))
    assert result.text == "async reply" and result.attempts == 2


def test_unknown_role_and_empty_messages_are_one_line_errors() -> None:
    gateway = _gateway(None)
    with pytest.raises(GatewayError, match="unknown role 'planner': use one of curriculum, executor"):
        gateway.complete("planner", [{"role": "user", "content": "x"}])
    with pytest.raises(GatewayError, match="messages is empty"):
        gateway.complete("executor", [])


def test_unreachable_model_server_names_the_fix() -> None:
    gateway = LLMGateway(
        ModelRoutes(executor=ModelRoute(model="openai/anything", api_base="http://127.0.0.1:9/v1")),
        GatewaySettings(retries=1, backoff_seconds=0.0, timeout_seconds=5),
        default_api_key="unused",
    )
    with pytest.raises(GatewayError) as info:
        gateway.complete("executor", [{"role": "user", "content": "x"}])
    assert "LAMARCK_MODELS__EXECUTOR__API_BASE" in str(info.value)
    assert "\n" not in str(info.value)
