"""Property tests of the OpenAPI document with schemathesis: every operation, valid and invalid input, the built-in
checks (no 5xx, responses match the schema and its documented status codes, content types and headers, invalid
input is rejected, a missing or wrong key is refused rather than ignored), against the app over a real database
(SQLite and PostgreSQL). Derandomized and bounded, so CI sees the same cases each run.

Left out: the event stream, which is a stream and not a response (test_events*.py cover it), and the check that
schema-valid input is accepted, since a schema cannot say which cursors the server issued or which environments and
event types exist, so those are refused with a 422 whose message says what to send. A body over the size limit is a
rejection too (413)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance
from starlette.types import ASGIApp, Receive, Scope, Send

from lamarck.api.app import create_app
from lamarck.platform.container import Container
from lamarck.platform.settings import Settings

from .conftest import error_of

MAX_EXAMPLES = 25
REJECTIONS = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429"]


class CurrentApp:
    """The app of the running test (over its database), behind one object the schema can be bound to at import."""

    def __init__(self) -> None:
        self.app: ASGIApp | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert self.app is not None, "no app: the test binds one"
        await self.app(scope, receive, send)


def _document() -> dict[str, Any]:
    """The OpenAPI document, which depends on the code alone (no database is opened)."""
    with tempfile.TemporaryDirectory() as data_dir:
        return create_app(Container(Settings(data_dir=data_dir))).openapi()


CURRENT = CurrentApp()
config = schemathesis.Config.from_dict({"checks": {"negative_data_rejection": {"expected-statuses": REJECTIONS}}})
schema = schemathesis.openapi.from_dict(_document(), config=config).exclude(path="/v1/events/stream")
schema.app = CURRENT


@pytest.fixture
def bound(client: TestClient) -> Iterator[None]:
    CURRENT.app = client.app
    yield
    CURRENT.app = None


@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_the_api_keeps_its_openapi_promises(
    case: schemathesis.Case, bound: None, keys: dict[str, dict[str, str]]
) -> None:
    case.call_and_validate(headers=keys["admin"], excluded_checks=[positive_data_acceptance])


def test_what_schemathesis_found_stays_fixed(client: TestClient, keys: dict[str, dict[str, str]]) -> None:
    """An unknown query parameter is refused (after the key is checked), a 405 names every method of its path, and
    every time has its zone (SQLite returns them without one)."""
    misspelt = client.get("/v1/runs?stauts=pending", headers=keys["read"])
    assert "query field stauts: this route takes no such parameter: use cursor, limit, status" in error_of(
        misspelt, 422
    )
    error_of(client.get("/v1/runs?stauts=pending"), 401)
    assert client.get("/v1/runs?limit=5", headers=keys["read"]).status_code == 200
    refused = client.request("OPTIONS", "/v1/runs", headers=keys["read"])
    error_of(refused, 405)
    assert refused.headers["Allow"] == "GET, POST"
    assert client.request("OPTIONS", "/v1/tasks/wait", headers=keys["read"]).headers["Allow"] == "POST"
    created = client.get("/v1/models", headers=keys["read"]).json()["models"][0]["created_at"]
    assert created.endswith(("Z", "+00:00")), created
