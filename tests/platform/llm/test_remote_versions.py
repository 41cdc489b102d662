"""Model versions asked for by name: the naming rule, the server's answer for versions it has and lacks, and the
gateway's one-line error for a missing one (issue 17). The executor and gate over a real server:
tests/agents/test_executor_remote_versions.py."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import litellm
import openai
import pytest
from pydantic import ValidationError
from sqlalchemy import select

from lamarck.platform.llm.gateway import GatewayError, LLMGateway
from lamarck.platform.llm.server import missing_version
from lamarck.platform.llm.version_names import VersionCall, served_model, version_call
from lamarck.platform.settings import ROLES, GatewaySettings, ModelRoute, ModelRoutes, Settings
from lamarck.platform.storage.database import Database
from lamarck.platform.storage.records import LLMCall
from lamarck.testing import ScriptedLLM, scripted_provider
from model_fixtures import test_model_store_root
from remote_model_fixtures import RemoteModelServer, remote_models_fixture  # noqa: F401  (the fixture)

MODEL = "smollm2-135m"
MESSAGES = [{"role": "user", "content": "Name three colors."}]


def test_naming_rule() -> None:
    assert version_call(ModelRoute(), "v3") == VersionCall("lamarck/v3", lamarck_engine=True)
    remote_lamarck = ModelRoute(model="lamarck/smollm2-135m", api_base="http://models:8001/v1")
    assert version_call(remote_lamarck, "v3") == VersionCall("openai/v3", lamarck_engine=True)
    vllm = ModelRoute(model="openai/smollm2-135m", api_base="http://vllm:8000/v1", version_model="openai/{version}")
    assert version_call(vllm, " v3 ") == VersionCall("openai/v3", lamarck_engine=False)
    assert version_call(ModelRoute(model="openai/gpt-4o-mini"), "v3") is None  # a hosted model has no versions
    assert version_call(ModelRoute(model="openai/qwen", api_base="http://ollama:11434/v1"), "v3") is None


def test_a_lamarck_route_at_an_address_asks_that_server_for_its_model_in_every_role() -> None:
    remote = ModelRoute(model="lamarck/smollm2-135m", api_base="http://models:8001/v1")
    assert served_model(remote, remote.model) == "openai/smollm2-135m"
    assert served_model(remote, "openai/v3") == "openai/v3"  # a name the caller already addressed stays
    assert served_model(ModelRoute(), "lamarck/smollm2-135m") == "lamarck/smollm2-135m"  # in-process
    hosted = ModelRoute(model="openai/qwen", api_base="http://ollama:11434/v1")
    assert served_model(hosted, hosted.model) == "openai/qwen"


def test_version_model_must_name_the_version_once_and_nothing_else() -> None:
    for bad in ("openai/smollm2", "openai/{name}", "openai/{version}-{base}", "openai/{version", "{}"):
        with pytest.raises(ValidationError, match="version_model"):
            ModelRoute(model="openai/x", version_model=bad)
    assert (
        ModelRoute(model="openai/x", version_model=" hosted_vllm/{version} ").version_model == "hosted_vllm/{version}"
    )


def test_version_model_reads_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAMARCK_MODELS__EXECUTOR__VERSION_MODEL", "openai/{version}")
    assert Settings().models.executor.version_model == "openai/{version}"


def test_missing_version_message_says_what_to_do_and_what_there_is() -> None:
    message = missing_version("v9", [MODEL, *(f"v{i}" for i in range(10))])
    assert message.startswith("model version 'v9' is not in this server's model store: train or import it")
    assert "ask for one of: smollm2-135m, v0," in message and "(and 3 more)" in message and "\n" not in message
    assert missing_version("v9", []).endswith("ask for one of: none")


def test_a_version_the_server_refuses_is_a_one_line_error_naming_the_asked_model(sqlite_db: Database) -> None:
    refusal = litellm.exceptions.NotFoundError(
        message="OpenAIException - " + missing_version("v9", [MODEL]), llm_provider="scripted", model="v9"
    )
    gateway = LLMGateway(
        ModelRoutes(executor=ModelRoute(model="scripted/base")), GatewaySettings(retries=2), db=sqlite_db
    )
    with scripted_provider(ScriptedLLM()) as scripted:
        scripted.script = [refusal]
        with pytest.raises(GatewayError) as info:
            gateway.complete("executor", MESSAGES, model="scripted/v9")
    message = str(info.value)
    assert message.startswith("model scripted/v9 for role executor refused the call: model version 'v9' is not in")
    assert "ask for one of: smollm2-135m" in message and "litellm." not in message and "\n" not in message
    assert "fix LAMARCK_MODELS__EXECUTOR__MODEL" not in message  # the route's model is not what was wrong
    assert len(scripted.calls) == 1  # not retried: a missing version stays missing
    with sqlite_db.session() as session:
        call = session.scalar(select(LLMCall))
    assert call is not None and not call.ok and call.model == "scripted/v9"


@pytest.mark.slow
def test_the_server_serves_each_store_version_by_name_and_404s_the_rest(remote_models: RemoteModelServer) -> None:
    client = openai.OpenAI(base_url=remote_models.base_url, api_key="unused", max_retries=0)
    adapter = remote_models.adapter_version
    listed = [m.id for m in client.models.list().data]
    assert MODEL in listed and adapter in listed
    base = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=12)
    tuned = client.chat.completions.create(model=f"lamarck/{adapter}", messages=MESSAGES, max_tokens=12)
    assert (base.model, tuned.model) == (MODEL, adapter)
    assert base.choices[0].message.content != tuned.choices[0].message.content
    with pytest.raises(openai.NotFoundError) as info:
        client.chat.completions.create(model="never-trained", messages=MESSAGES, max_tokens=2)
    error = info.value.body
    assert isinstance(error, dict) and error["type"] == "model_not_found"
    assert error["message"].startswith("model version 'never-trained' is not in this server's model store")
    assert adapter in error["message"]


@pytest.mark.slow
def test_the_serve_model_command_serves_the_store_by_version_name(model_store: object, tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {
        **os.environ,
        "LAMARCK_DATA_DIR": str(tmp_path / "data"),
        "LAMARCK_MODEL_STORE_DIR": str(test_model_store_root()),
        "LAMARCK_ENGINE__SLOTS": "2",
        "LAMARCK_ENGINE__SLOT_TOKENS": "512",
    }
    command = [sys.executable, "-m", "lamarck.cli", "serve-model", "--port", str(port)]
    log = (tmp_path / "serve-model.log").open("wb")
    server = subprocess.Popen(command, env=env, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 300
        while True:
            assert server.poll() is None, (tmp_path / "serve-model.log").read_text()
            try:
                listed = [m["id"] for m in httpx.get(f"{url}/models").json()["data"]]
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "lamarck serve-model did not start"
                time.sleep(0.5)
        assert MODEL in listed
        body = {"model": MODEL, "messages": MESSAGES, "max_tokens": 4}
        answer = httpx.post(f"{url}/chat/completions", json=body, timeout=120).json()
        assert answer["model"] == MODEL and answer["choices"][0]["message"]["content"]
        missing = httpx.post(f"{url}/chat/completions", json={**body, "model": "lamarck/v404"}, timeout=60)
        assert missing.status_code == 404
        assert missing.json()["error"]["message"] == missing_version("v404", listed)
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


@pytest.mark.slow
def test_every_role_on_a_remote_lamarck_route_is_answered_by_that_server(
    remote_models: RemoteModelServer, sqlite_db: Database
) -> None:
    """Not only the executor: a critic, curriculum or harness-critic route ``lamarck/<name>`` with an ``api_base``
    reaches ``lamarck serve-model`` for ``<name>`` (litellm's in-process ``lamarck`` provider would ignore the
    address), and a name the server lacks is a one-line error in the server's words."""
    adapter = remote_models.adapter_version
    others = [role for role in ROLES if role != "executor"]
    names = {role: adapter if index % 2 else MODEL for index, role in enumerate(others)}
    routes = ModelRoutes(
        **{role: ModelRoute(model=f"lamarck/{name}", api_base=remote_models.base_url) for role, name in names.items()}
    )
    gateway = LLMGateway(routes, GatewaySettings(retries=0), db=sqlite_db)
    del remote_models.served[:]
    for role in others:
        result = gateway.complete(role, MESSAGES, max_tokens=6)
        assert result.model == f"openai/{names[role]}" and result.text and result.cost_usd == 0.0
    assert remote_models.served == [names[role] for role in others]  # the server answered each, by its name
    with sqlite_db.session() as session:
        calls = {(call.role, call.model, call.ok) for call in session.scalars(select(LLMCall))}
    assert calls == {(role, f"openai/{names[role]}", True) for role in others}

    lacking = LLMGateway(
        ModelRoutes(critic=ModelRoute(model="lamarck/never-trained", api_base=remote_models.base_url)),
        GatewaySettings(retries=0),
    )
    with pytest.raises(GatewayError) as info:
        lacking.complete("critic", MESSAGES, max_tokens=2)
    message = str(info.value)
    assert message.startswith(
        "model openai/never-trained for role critic refused the call: model version 'never-trained' is not in"
    )
    assert "\n" not in message
