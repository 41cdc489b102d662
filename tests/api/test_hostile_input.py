"""Input the database itself would refuse (NUL characters, odd ids) is a 4xx with one line, never a 500."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from .conftest import assert_refused_with_one_line


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("get", "/v1/tasks/%00", None),
        ("post", "/v1/tasks/%00/cancel", None),
        ("get", "/v1/runs/%00", None),
        ("get", "/v1/runs/a%00b/generations", None),
        ("post", "/v1/runs/%00/stop", None),
        ("post", "/v1/runs/%00/resume", None),
        ("get", "/v1/events?run_id=%00", None),
        ("get", "/v1/runs?cursor=WyIyMDI2LTAxLTAxVDAwOjAwOjAwIiwgIlx1MDAwMCJd", None),
        ("post", "/v1/tasks", {"prompt": "a\u0000b"}),
        ("post", "/v1/tasks", {"prompt": "x", "model_version": "\u0000"}),
        ("post", "/v1/tasks", {"prompt": "x", "harness_version": "\u0000"}),
        ("post", "/v1/tasks", {"prompt": "x", "environment": "arithmetic", "expected": "4\u00002"}),
        ("post", "/v1/runs", {"name": "\u0000", "config": {"environments": ["arithmetic"]}}),
        ("post", "/v1/runs", {"config": {"environments": ["arithmetic"], "model_version": "\u0000"}}),
        ("post", "/v1/runs", {"config": {"environments": ["arithmetic"], "harnesses": {"arithmetic": "\u0000"}}}),
    ],
)
def test_nul_characters_and_odd_ids_are_4xx(
    client: TestClient, keys: dict[str, dict[str, str]], method: str, path: str, body: object
) -> None:
    assert_refused_with_one_line(client, method, path, body, keys["admin"])
