"""A short scripted run of the real loop (the orchestrator tests' scripted model), read back through the API: the
metrics and capability agree with the episodes stored, and an episode shows the critic's verdict and lesson."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from fastapi.testclient import TestClient

from lamarck.platform.container import Container


def _support() -> ModuleType:
    """The orchestrator tests' scripted run (tests/agents is not a package, so it is loaded by path)."""
    path = Path(__file__).resolve().parents[1] / "agents" / "test_orchestrator_support.py"
    name = "test_orchestrator_support"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def test_a_scripted_run_read_through_the_api(
    client: TestClient, container: Container, keys: dict[str, dict[str, str]], tmp_path: Path
) -> None:
    support = _support()
    with support.scripted_orchestrator(container.db, tmp_path / "loop") as orchestrator:
        run_id = orchestrator.start(support.small_config())
        assert orchestrator.run(run_id).status == "finished"
    read = keys["read"]

    episodes: list[dict[str, object]] = []
    url = f"/v1/runs/{run_id}/episodes?limit=7"
    while url:
        page = client.get(url, headers=read).json()
        episodes += page["episodes"]
        url = f"/v1/runs/{run_id}/episodes?limit=7&cursor={page['next_cursor']}" if page["next_cursor"] else ""
    assert len({e["id"] for e in episodes}) == len(episodes) >= 16
    passed = sum(e["outcome"] == "passed" for e in episodes)

    metrics = client.get(f"/v1/runs/{run_id}/metrics", headers=read).json()
    buckets = metrics["overall"]["buckets"]
    assert metrics["generations"] == 2 and [b["attempts"] for b in buckets] == [8, 8]
    capability = client.get(f"/v1/runs/{run_id}/capability", headers=read).json()
    cells = [c for g in capability["generations"] for c in g["cells"]]
    assert sum(c["attempts"] for c in cells) == 16 and {c["environment"] for c in cells} == {"arithmetic"}
    repairs = passed - sum(c["successes"] for c in cells)  # the critic's repairs pass but are not attempts
    assert repairs >= 0 and sum(b["success_rate"] * b["attempts"] for b in buckets) == sum(
        c["successes"] for c in cells
    )

    judged = next(e for e in episodes if e["outcome"] == "failed")
    detail = client.get(f"/v1/episodes/{judged['id']}", headers=read).json()
    assert detail["verdict"] is not None and detail["verdict"]["passed"] is False
    assert detail["verdict"]["first_wrong_step"] == 1 and "operations" in (detail["verdict"]["lesson"] or "")
    assert any(s["kind"] == "model_output" or s["kind"] == "tool_call" for s in detail["steps"])
    assert detail["release"]["model_version"] == detail["model_version"]
