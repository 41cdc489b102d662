"""Events as a JSON page and as server-sent events that resume after Last-Event-ID with no gap and no duplicate."""

from __future__ import annotations

import json
import threading
import time

from fastapi.testclient import TestClient

from lamarck.platform.container import Container
from lamarck.platform.event_types import RunStopped, VerdictGiven
from lamarck.platform.storage import repositories as repo

from .conftest import error_of


def _verdict(index: int) -> VerdictGiven:
    return VerdictGiven(
        generation=1,
        episode_id=f"e{index}",
        passed=index % 2 == 0,
        reward=1.0 if index % 2 == 0 else 0.0,
        source="verifier",
        judge_passed=None,
        repaired_episode_id=None,
    )


def _sse(text: str) -> list[dict[str, str]]:
    """The events of an event-stream body: each with its id, event and data fields (comments skipped)."""
    events = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.split("\n"):
            if line and not line.startswith(":") and ":" in line:
                name, _, value = line.partition(":")
                fields[name] = value.removeprefix(" ")
        if "id" in fields:
            events.append(fields)
    return events


def test_list_filters_by_run_and_type_and_pages_with_after(
    client: TestClient, container: Container, keys: dict[str, dict[str, str]]
) -> None:
    for index in range(4):
        container.bus.publish(_verdict(index), run_id="run-a")
    container.bus.publish(RunStopped(generations_done=1, reason="asked"), run_id="run-b")
    with container.db.session() as session:
        repo.append_event(session, type="from_the_future", payload={"x": 1}, run_id="run-b")
    everything = client.get("/v1/events", headers=keys["read"]).json()
    assert [e["type"] for e in everything["events"]] == ["verdict"] * 4 + ["run_stopped", "from_the_future"]
    assert everything["events"][0]["payload"]["episode_id"] == "e0" and everything["events"][0]["known"] is True
    assert everything["events"][-1] == {**everything["events"][-1], "known": False, "payload": {"x": 1}}
    page = client.get("/v1/events?run_id=run-a&limit=3", headers=keys["read"]).json()
    assert [e["payload"]["episode_id"] for e in page["events"]] == ["e0", "e1", "e2"]
    rest = client.get(f"/v1/events?run_id=run-a&after={page['next_after']}", headers=keys["read"]).json()
    assert [e["payload"]["episode_id"] for e in rest["events"]] == ["e3"]
    stopped = client.get("/v1/events?types=run_stopped,lesson", headers=keys["read"]).json()["events"]
    assert [e["type"] for e in stopped] == ["run_stopped"] and stopped[0]["payload"]["reason"] == "asked"


def test_bad_event_queries_are_422(client: TestClient, keys: dict[str, dict[str, str]]) -> None:
    assert "unknown event type 'verdicts'" in error_of(
        client.get("/v1/events?types=verdicts", headers=keys["read"]), 422
    )
    error_of(client.get("/v1/events?after=-1", headers=keys["read"]), 422)
    error_of(client.get("/v1/events?after=abc", headers=keys["read"]), 422)
    error_of(client.get("/v1/events?limit=0", headers=keys["read"]), 422)
    error_of(client.get("/v1/events/stream", headers={**keys["read"], "Last-Event-ID": "x"}), 422)
    error_of(client.get("/v1/events/stream?timeout=1"), 401)


def test_stream_resumes_after_last_event_id_without_gap_or_duplicate(
    client: TestClient, container: Container, keys: dict[str, dict[str, str]]
) -> None:
    for index in range(3):
        container.bus.publish(_verdict(index), run_id="run-a")
    first = client.get("/v1/events/stream?timeout=0.5", headers=keys["read"])
    assert first.status_code == 200 and first.headers["content-type"].startswith("text/event-stream")
    seen = _sse(first.text)
    assert [e["event"] for e in seen] == ["verdict"] * 3
    assert [json.loads(e["data"])["id"] for e in seen] == [int(e["id"]) for e in seen]

    def publish_while_streaming() -> None:
        for index in range(3, 9):
            container.bus.publish(_verdict(index), run_id="run-a")
            time.sleep(0.02)

    writer = threading.Thread(target=publish_while_streaming)
    writer.start()
    resumed = client.get("/v1/events/stream?timeout=1.5", headers={**keys["read"], "Last-Event-ID": seen[-1]["id"]})
    writer.join()
    more = _sse(resumed.text)
    ids = [int(e["id"]) for e in seen + more]
    assert ids == sorted(set(ids)) and len(ids) == 9
    episodes = [json.loads(e["data"])["payload"]["episode_id"] for e in seen + more]
    assert episodes == [f"e{i}" for i in range(9)]
    filtered = _sse(client.get("/v1/events/stream?timeout=0.3&run_id=run-b", headers=keys["read"]).text)
    assert filtered == []
