"""Health, info, auth (401/403), the one error shape, the body limit (413) and the OpenAPI document."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from lamarck.api.keys import Scope, create_key
from lamarck.platform.container import Container
from lamarck.platform.storage import api_repositories as api_repo
from lamarck.platform.storage.records import ApiKey, ApiTask

from .conftest import MAX_BODY, error_of


def _tasks(container: Container) -> int:
    with container.db.session() as session:
        return session.scalar(select(func.count()).select_from(ApiTask)) or 0


def test_health_needs_no_key(client: TestClient) -> None:
    response = client.get("/v1/health")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": "ok"}


def test_info_names_version_mode_environments_and_champion(client: TestClient, keys: dict[str, dict[str, str]]) -> None:
    response = client.get("/v1/info", headers=keys["read"])
    assert response.status_code == 200, response.text
    info = response.json()
    assert info["mode"] == "embedded" and info["champion"] == "smollm2-135m"
    assert "arithmetic" in info["environments"] and info["version"]
    assert "key" not in response.text.lower() and "database_url" not in response.text


def test_no_key_bad_key_revoked_key_are_401(client: TestClient, container: Container) -> None:
    assert "no API key" in error_of(client.get("/v1/info"), 401)
    assert client.get("/v1/info").headers["WWW-Authenticate"] == "Bearer"
    for bad in ("nonsense", "lmk_abc_def", "lmk_" + "x" * 40, ""):
        error_of(client.get("/v1/info", headers={"Authorization": f"Bearer {bad}"}), 401)
    key_id, key = create_key(container.db, [Scope.READ])
    wrong_secret = key[:-4] + ("AAAA" if not key.endswith("AAAA") else "BBBB")
    error_of(client.get("/v1/info", headers={"Authorization": f"Bearer {wrong_secret}"}), 401)
    assert client.get("/v1/info", headers={"Authorization": f"Bearer {key}"}).status_code == 200
    with container.db.session() as session:
        api_repo.revoke_api_key(session, key_id=key_id)
    assert "revoked" in error_of(client.get("/v1/info", headers={"Authorization": f"Bearer {key}"}), 401)


def test_keys_are_stored_hashed(container: Container) -> None:
    key_id, key = create_key(container.db, [Scope.TASKS])
    with container.db.session() as session:
        record = session.get(ApiKey, key_id)
        assert record is not None and record.scopes == ["tasks"]
        assert key not in (record.key_hash, record.id, record.name) and len(record.key_hash) == 64


def test_missing_scope_is_403_and_admin_has_every_scope(client: TestClient, keys: dict[str, dict[str, str]]) -> None:
    assert "'read' scope" in error_of(client.get("/v1/info", headers=keys["tasks"]), 403)
    assert "'tasks' scope" in error_of(client.post("/v1/tasks", json={"prompt": "x"}, headers=keys["read"]), 403)
    assert "'runs' scope" in error_of(client.post("/v1/runs/abc/stop", headers=keys["read"]), 403)
    assert client.get("/v1/info", headers=keys["admin"]).status_code == 200


def test_settings_key_has_every_scope(container: Container) -> None:
    from pydantic import SecretStr

    from lamarck.api.app import create_app

    container.settings.api.api_key = SecretStr("s3cret-settings-key")
    with TestClient(create_app(container)) as client:
        assert client.get("/v1/info", headers={"Authorization": "Bearer s3cret-settings-key"}).status_code == 200
        error_of(client.get("/v1/info", headers={"Authorization": "Bearer s3cret-settings-kex"}), 401)


def test_unknown_route_and_method_use_the_one_shape(client: TestClient, keys: dict[str, dict[str, str]]) -> None:
    assert "no route GET /v1/nothing" in error_of(client.get("/v1/nothing", headers=keys["read"]), 404)
    error_of(client.delete("/v1/info", headers=keys["read"]), 405)


def _chunks(size: int) -> Iterator[bytes]:
    sent = 0
    while sent < size:
        yield b" " * 512
        sent += 512


def test_body_over_the_limit_is_413_declared_or_chunked(
    client: TestClient, container: Container, keys: dict[str, dict[str, str]]
) -> None:
    big = {"prompt": "x" * (MAX_BODY + 10)}
    assert f"over {MAX_BODY} bytes" in error_of(client.post("/v1/tasks", json=big, headers=keys["tasks"]), 413)
    chunked = client.post(
        "/v1/tasks", content=_chunks(MAX_BODY * 2), headers={**keys["tasks"], "Content-Type": "application/json"}
    )
    assert "Content-Length" not in chunked.request.headers
    error_of(chunked, 413)
    assert _tasks(container) == 0


def test_openapi_has_stable_operation_ids_and_examples(client: TestClient) -> None:
    doc = client.get("/openapi.json").json()
    ids = {op["operationId"] for path in doc["paths"].values() for op in path.values()}
    assert {"createTask", "solveTask", "getTask", "cancelTask", "listEvents", "streamEvents", "listRuns"} <= ids
    assert doc["components"]["schemas"]["TaskCreate"]["examples"]
    assert "ApiKey" in doc["components"]["securitySchemes"]


def test_a_request_without_a_valid_key_is_401_before_its_body_is_judged(client: TestClient) -> None:
    malformed = client.post("/v1/tasks", content=b"{", headers={"Content-Type": "application/json"})
    error_of(malformed, 401)
    invalid = client.post("/v1/tasks", json={"samples": "many"}, headers={"Authorization": "Bearer lmk_bad_key"})
    error_of(invalid, 401)
    error_of(client.get("/v1/events?after=abc"), 401)


def test_keys_and_secret_settings_are_never_in_a_response_log_line_or_event(
    container: Container, caplog: pytest.LogCaptureFixture
) -> None:
    from pydantic import SecretStr

    from lamarck.api.app import create_app

    container.settings.api.api_key = SecretStr("settings-key-0123456789")
    container.settings.openai_api_key = SecretStr("sk-openai-0123456789")
    _, key = create_key(container.db, [Scope.ADMIN])
    secrets = (key, key.split("_", 2)[2], "settings-key-0123456789", "sk-openai-0123456789")
    caplog.set_level(logging.DEBUG)
    texts: list[str] = []
    with TestClient(create_app(container)) as client:
        for headers in ({"Authorization": f"Bearer {key}"}, {"Authorization": f"Bearer {key}x"}):
            for path in ("/v1/info", "/v1/events", "/v1/runs", "/v1/nothing", "/openapi.json"):
                texts.append(client.get(path, headers=headers).text)
            texts.append(client.post("/v1/tasks", json={"prompt": "x", "samples": 0}, headers=headers).text)
    texts += [record.getMessage() for record in caplog.records]
    texts += [json.dumps(event.payload) for event in container.bus.replay()]
    assert not [secret for secret in secrets for text in texts if secret in text]
