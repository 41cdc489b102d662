"""The second slice's routes under input the database would refuse or the server would choke on: NUL characters, odd
ids, odd filters and cursors are each a 4xx with one line, never a 500."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from lamarck.platform.container import Container
from lamarck.platform.storage import repositories as repo

from .conftest import assert_refused_with_one_line, error_of

NUL_CURSOR = "WyIyMDI2LTAxLTAxVDAwOjAwOjAwIiwgIlx1MDAwMCJd"  # ["2026-01-01T00:00:00", "\u0000"]


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("get", "/v1/runs/%00/metrics", None),
        ("get", "/v1/runs/%00/capability", None),
        ("get", "/v1/runs/%00/episodes", None),
        ("get", "/v1/runs/r1/episodes?environment=%00", None),
        ("get", "/v1/runs/r1/episodes?environment=a%00b", None),
        ("get", f"/v1/runs/r1/episodes?cursor={NUL_CURSOR}", None),
        ("get", "/v1/runs/r1/episodes?generation=x", None),
        ("get", "/v1/runs/r1/metrics?points=100000", None),
        ("get", "/v1/episodes/%00", None),
        ("get", "/v1/episodes/compare?a=%00&b=x", None),
        ("get", "/v1/models/%00", None),
        ("get", "/v1/models/%00/lineage", None),
        ("get", f"/v1/models?cursor={NUL_CURSOR}", None),
        ("post", "/v1/models/%00/promote", None),
        ("post", "/v1/models/smollm2-135m/promote", {"reason": "a\u0000b"}),
        ("post", "/v1/models/smollm2-135m/promote", ["not", "an", "object"]),
        ("get", "/v1/harnesses?environment=%00", None),
        ("get", f"/v1/harnesses?cursor={NUL_CURSOR}", None),
        ("get", "/v1/harnesses/%00", None),
        ("get", "/v1/harnesses/diff?a=%00&b=x", None),
        ("post", "/v1/harnesses/%00/promote", None),
        ("post", "/v1/harnesses/rollback", {"environment": "\u0000"}),
        ("post", "/v1/harnesses/rollback", {"environment": "arithmetic", "extra": 1}),
        ("get", "/v1/skills/%00", None),
        ("get", "/v1/skills?cursor=%00", None),
        ("get", "/v1/lessons?q=%00", None),
        ("get", "/v1/lessons?q=x&environment=%00", None),
    ],
)
def test_odd_input_is_4xx(
    client: TestClient, keys: dict[str, dict[str, str]], method: str, path: str, body: object
) -> None:
    assert_refused_with_one_line(client, method, path, body, keys["admin"])


def test_a_nul_in_a_filter_of_a_real_run_is_4xx(
    client: TestClient, container: Container, keys: dict[str, dict[str, str]]
) -> None:
    with container.db.session() as session:
        run_id = repo.create_run(session, config={}).id
    for query in ("environment=%00", "environment=a%00b", "outcome=%00", f"cursor={NUL_CURSOR}"):
        response = client.get(f"/v1/runs/{run_id}/episodes?{query}", headers=keys["read"])
        error_of(response, 422)
