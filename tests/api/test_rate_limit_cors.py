"""Per-key rate limits in memory (429 with Retry-After, other keys unaffected, tokens refilled with time; the Redis
limiter and the conformance suite both meet are in test_rate_limit_backends.py) and CORS (closed by default, open to
allow-listed origins only)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from lamarck.api.app import create_app
from lamarck.api.keys import Scope, create_key
from lamarck.api.rate_limit import MemoryRateLimiter
from lamarck.platform.container import Container
from lamarck.platform.settings import ApiSettings
from lamarck.platform.storage import repositories as repo

from .conftest import error_of

UI = "https://ui.example.org"


def _client(container: Container, **api: object) -> TestClient:
    container.settings = container.settings.model_copy(update={"api": container.settings.api.model_copy(update=api)})
    return TestClient(create_app(container, launcher=lambda run_id, action: 0))


@pytest.fixture
def limited(container: Container) -> Iterator[TestClient]:
    with _client(container, rate_limit_per_second=0.5, rate_limit_burst=2) as client:
        yield client


def _header(container: Container) -> dict[str, str]:
    return {"Authorization": f"Bearer {create_key(container.db, [Scope.READ])[1]}"}


def test_over_the_burst_is_429_with_retry_after_per_key(limited: TestClient, container: Container) -> None:
    now = [100.0]
    limiter: MemoryRateLimiter = limited.app.state.rate_limiter  # type: ignore[attr-defined]
    limiter.clock = lambda: now[0]
    first, second = _header(container), _header(container)
    assert [limited.get("/v1/info", headers=first).status_code for _ in range(2)] == [200, 200]
    refused = limited.get("/v1/info", headers=first)
    assert "requests a second" in error_of(refused, 429)
    assert refused.headers["Retry-After"] == "2"  # one token at 0.5 a second
    assert limited.get("/v1/info", headers=second).status_code == 200
    assert limited.get("/v1/health").status_code == 200  # no key, no bucket
    now[0] += 1.0
    assert limited.get("/v1/info", headers=first).headers["Retry-After"] == "1"
    now[0] += 1.0
    assert limited.get("/v1/info", headers=first).status_code == 200


def test_a_refused_request_changes_nothing(limited: TestClient, container: Container) -> None:
    limited.app.state.rate_limiter.clock = lambda: 0.0  # type: ignore[attr-defined]
    runs = {"Authorization": f"Bearer {create_key(container.db, [Scope.RUNS, Scope.READ])[1]}"}
    body = {"name": "x", "config": {"environments": ["arithmetic"]}}
    assert limited.get("/v1/runs", headers=runs).status_code == 200
    assert limited.get("/v1/runs", headers=runs).status_code == 200
    error_of(limited.post("/v1/runs", json=body, headers=runs), 429)
    with container.db.session() as session:
        assert repo.list_runs(session) == []


def test_no_limit_by_default(client: TestClient, keys: dict[str, dict[str, str]]) -> None:
    assert {client.get("/v1/info", headers=keys["read"]).status_code for _ in range(30)} == {200}


def test_cors_is_closed_by_default(client: TestClient, keys: dict[str, dict[str, str]]) -> None:
    response = client.get("/v1/info", headers={**keys["read"], "Origin": UI})
    assert response.status_code == 200 and "access-control-allow-origin" not in response.headers
    preflight = client.options("/v1/info", headers={"Origin": UI, "Access-Control-Request-Method": "GET"})
    assert "access-control-allow-origin" not in preflight.headers


def test_cors_allows_listed_origins_only(container: Container) -> None:
    read = _header(container)
    with _client(container, cors_origins=[UI]) as client:
        allowed = client.get("/v1/info", headers={**read, "Origin": UI})
        assert allowed.status_code == 200 and allowed.headers["access-control-allow-origin"] == UI
        preflight = client.options(
            "/v1/info",
            headers={
                "Origin": UI,
                "Access-Control-Request-Method": "GET",
                "Access-Control-Request-Headers": "Authorization",
            },
        )
        assert preflight.status_code == 200 and preflight.headers["access-control-allow-origin"] == UI
        evil = "https://evil.example.com"
        refused = client.get("/v1/info", headers={**read, "Origin": evil})
        assert "access-control-allow-origin" not in refused.headers
        assert "origin" in error_of(
            client.options("/v1/info", headers={"Origin": evil, "Access-Control-Request-Method": "GET"}), 400
        )
        error_denied = client.get("/v1/info", headers={"Origin": UI})  # a 401 still carries the CORS header
        assert error_denied.status_code == 401 and error_denied.headers["access-control-allow-origin"] == UI


@pytest.mark.parametrize("origin", ["*", "ui.example.org", "https://ui.example.org/app", "ftp://x.org"])
def test_a_cors_origin_must_be_exact(origin: str) -> None:
    with pytest.raises(ValidationError, match="exact origin"):
        ApiSettings(cors_origins=[origin])


def test_rate_limit_settings_are_bounded() -> None:
    with pytest.raises(ValidationError):
        ApiSettings(rate_limit_per_second=-1)
    assert MemoryRateLimiter(0).take("k").allowed and not MemoryRateLimiter(0).enabled
    assert MemoryRateLimiter(3).burst == 3.0
