"""Training jobs through the API: the job log's events folded into one row per job (status, attempts, times, error,
the candidate with its gate decision), paged and filtered, on SQLite and PostgreSQL; bad input; and real jobs run
by a real embedded Celery worker, read back through the routes."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from lamarck.api.app import create_app
from lamarck.api.keys import Scope, create_key
from lamarck.platform.container import Container
from lamarck.platform.event_types import (
    JobDeferred,
    JobFailed,
    JobRetrying,
    JobStarted,
    JobSucceeded,
    TrainingMetrics,
    TrainingScheduled,
)
from lamarck.platform.settings import Settings, WorkerSettings
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database
from lamarck.platform.workers import EmbeddedWorker, app, configure
from lamarck.training.pipeline import distill_job_key

from .conftest import error_of

BASE = "smollm2-135m"  # promoted by the container fixture
DISTILL = "lamarck.train.distill"
DIGESTS = {name: (name * 64)[:64] for name in ("a", "b", "c", "d")}
CANDIDATE = f"{BASE}-ft-{DIGESTS['a'][:12]}"


def _job(key: str, attempt: int = 1, task: str = DISTILL) -> dict[str, Any]:
    return {"job": key, "task": task, "celery_id": uuid.uuid4().hex, "attempt": attempt, "redelivered": False}


def _history(container: Container) -> dict[str, str]:
    """Five training jobs in every state, a rollout job that is no training job, and the candidate one produced,
    gated. Returns the keys by name."""
    bus = container.bus
    keys = {name: distill_job_key(BASE, digest) for name, digest in DIGESTS.items()}
    keys["rehearsal"] = "rehearse:drill-1"

    def scheduled(name: str) -> None:
        bus.publish(TrainingScheduled(parent_version=BASE, dataset_digest=DIGESTS[name], rows=40, pairs=0))

    scheduled("a")  # succeeds on its first attempt and registers CANDIDATE
    bus.publish(JobStarted(**_job(keys["a"])))
    bus.publish(JobDeferred(**_job(keys["a"]), reason="lease busy", countdown=1.0))
    bus.publish(TrainingMetrics(version=CANDIDATE, loss=0.5))
    bus.publish(JobSucceeded(**_job(keys["a"]), result={"version_id": CANDIDATE, "created": True}))
    scheduled("b")  # retried once, then fails for good
    bus.publish(JobStarted(**_job(keys["b"])))
    bus.publish(JobRetrying(**_job(keys["b"]), error="OSError: disk full", countdown=2.0))
    bus.publish(JobStarted(**_job(keys["b"], attempt=2)))
    bus.publish(JobFailed(**_job(keys["b"], attempt=2), error="OSError: disk still full", final=True, retryable=True))
    scheduled("c")  # never started
    bus.publish(JobStarted(**_job("rollout:run1:0:3", task="lamarck.rollout.run")))
    bus.publish(JobStarted(**_job(keys["d"])))  # started with no scheduling event: parent and digest from its key
    bus.publish(JobStarted(**_job(keys["rehearsal"], task="lamarck.train.rehearse")))
    with container.db.session() as session:
        repo.register_model_version(
            session, version_id=CANDIDATE, base=BASE, parent_id=BASE, dataset_digest=DIGESTS["a"], status="candidate"
        )
        repo.add_evaluation(
            session, kind="gate", model_version=CANDIDATE, environment="arithmetic", score=0.4, n_tasks=10,
            decision={"candidate": CANDIDATE, "champion": BASE, "promote": False, "reason": "2 wins, 3 losses",
                      "p_value": 0.5, "alpha": 0.05, "look": 1, "environments": []},
        )  # fmt: skip
    return keys


def _all_pages(client: TestClient, headers: dict[str, str], query: str = "") -> list[dict[str, Any]]:
    jobs: list[dict[str, Any]] = []
    url = f"/v1/training-jobs?limit=2{query}"
    while url:
        page = client.get(url, headers=headers)
        assert page.status_code == 200, page.text
        jobs += page.json()["jobs"]
        cursor = page.json()["next_cursor"]
        url = f"/v1/training-jobs?limit=2{query}&cursor={cursor}" if cursor else ""
    return jobs


def test_jobs_fold_their_events_and_page_newest_first(
    client: TestClient, container: Container, keys: dict[str, dict[str, str]]
) -> None:
    names = _history(container)
    jobs = _all_pages(client, keys["read"])
    by_key = {job["key"]: job for job in jobs}
    assert [job["key"] for job in jobs] == [names[n] for n in ("rehearsal", "d", "c", "b", "a")]

    done = by_key[names["a"]]
    assert (done["status"], done["attempts"], done["error"], done["rows"]) == ("succeeded", 1, None, 40)
    assert (done["task"], done["parent_version"], done["dataset_digest"]) == (DISTILL, BASE, DIGESTS["a"])
    assert done["queued_at"] <= done["started_at"] <= done["ended_at"]
    assert done["candidate"]["id"] == CANDIDATE and done["candidate"]["status"] == "candidate"
    gate = done["candidate"]["gate"]
    assert (gate["promote"], gate["champion"], gate["reason"]) == (False, BASE, "2 wins, 3 losses")

    failed = by_key[names["b"]]
    assert (failed["status"], failed["attempts"], failed["error"]) == ("failed", 2, "OSError: disk still full")
    assert failed["ended_at"] is not None and failed["candidate"] is None
    queued = by_key[names["c"]]
    assert (queued["status"], queued["attempts"], queued["started_at"], queued["ended_at"]) == ("queued", 0, None, None)
    unscheduled = by_key[names["d"]]
    assert (unscheduled["status"], unscheduled["parent_version"], unscheduled["rows"]) == ("running", BASE, None)
    assert unscheduled["dataset_digest"] == DIGESTS["d"][:16]
    rehearsal = by_key[names["rehearsal"]]
    assert (rehearsal["task"], rehearsal["parent_version"], rehearsal["status"]) == (
        "lamarck.train.rehearse",
        None,
        "running",
    )

    assert [j["key"] for j in _all_pages(client, keys["read"], "&status=failed")] == [names["b"]]
    assert [j["key"] for j in _all_pages(client, keys["read"], "&status=running")] == [names["rehearsal"], names["d"]]
    assert len(_all_pages(client, keys["read"], f"&parent_version={BASE}")) == 4
    assert _all_pages(client, keys["read"], "&parent_version=other-version") == []

    shown = client.get(f"/v1/training-jobs/{names['a']}", headers=keys["read"])
    assert shown.status_code == 200 and shown.json() == done


def test_a_job_scheduled_again_after_it_failed_is_queued_again(
    client: TestClient, container: Container, keys: dict[str, dict[str, str]]
) -> None:
    names = _history(container)
    container.bus.publish(TrainingScheduled(parent_version=BASE, dataset_digest=DIGESTS["b"], rows=41, pairs=0))
    again = client.get(f"/v1/training-jobs/{names['b']}", headers=keys["read"]).json()
    assert (again["status"], again["ended_at"], again["attempts"], again["rows"]) == ("queued", None, 2, 41)


def test_bad_input_is_refused_with_one_line(
    client: TestClient, container: Container, keys: dict[str, dict[str, str]]
) -> None:
    _history(container)
    read = keys["read"]
    assert "no training job 'train:nope:0123'" in error_of(
        client.get("/v1/training-jobs/train:nope:0123", headers=read), 404
    )
    assert "next_cursor" in error_of(client.get("/v1/training-jobs?cursor=bm90LWEtY3Vyc29y", headers=read), 422)
    error_of(client.get("/v1/training-jobs?status=paused", headers=read), 422)
    error_of(client.get("/v1/training-jobs?parent_version=a%20b", headers=read), 422)
    error_of(client.get("/v1/training-jobs?limit=0", headers=read), 422)
    error_of(client.get("/v1/training-jobs/%00", headers=read), 422)
    nul_cursor = "WyJqb2IiLCAiXHUwMDAwIl0"  # ["job", "\u0000"]
    assert "next_cursor" in error_of(client.get(f"/v1/training-jobs?cursor={nul_cursor}", headers=read), 422)
    assert "use cursor, limit, parent_version, status" in error_of(
        client.get("/v1/training-jobs?state=failed", headers=read), 422
    )
    error_of(client.get("/v1/training-jobs"), 401)
    error_of(client.get("/v1/training-jobs", headers=keys["tasks"]), 403)


def test_openapi_names_the_routes_and_shows_an_example(client: TestClient) -> None:
    doc = client.get("/openapi.json").json()
    assert doc["paths"]["/v1/training-jobs"]["get"]["operationId"] == "listTrainingJobs"
    shown = doc["paths"]["/v1/training-jobs/{job}"]["get"]
    assert shown["operationId"] == "getTrainingJob"
    assert shown["responses"]["404"]["content"]["application/json"]["schema"]["$ref"].endswith("ErrorResponse")
    assert doc["components"]["schemas"]["TrainingJobPublic"]["examples"][0]["candidate"]["gate"]


def _wait(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.3)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


@pytest.mark.slow
def test_real_jobs_on_an_embedded_worker_read_back_through_the_api(sqlite_db: Database, tmp_path: Path) -> None:
    """A rehearsal job that registers a version and a poison one that fails after its attempts, run by a real
    Celery worker (its broker the SQLite database) through the real job guard; the API reads what the guard wrote."""
    settings = Settings(
        data_dir=tmp_path / "data",
        database_url=sqlite_db.url.replace("+pysqlite", ""),
        workers=WorkerSettings(max_attempts=2, retry_backoff_seconds=0.2, lease_ttl_seconds=4, heartbeat_seconds=1.0),
    )
    container = Container(settings, db=sqlite_db)
    read = {"Authorization": f"Bearer {create_key(sqlite_db, [Scope.READ])[1]}"}
    configure(app, settings)
    worker = EmbeddedWorker(settings, ["train"]).start()
    good, poison = uuid.uuid4().hex, uuid.uuid4().hex
    try:
        with TestClient(create_app(container)) as client:
            app.send_task("lamarck.train.rehearse", kwargs={"job": good, "steps": 1, "step_seconds": 0.0})
            app.send_task(
                "lamarck.train.rehearse", kwargs={"job": poison, "steps": 1, "step_seconds": 0.0, "fail": True}
            )

            def show(job: str, status: str) -> dict[str, Any]:
                response = client.get(f"/v1/training-jobs/rehearse:{job}", headers=read)
                found = response.json() if response.status_code == 200 else {}
                return found if found.get("status") == status else {}

            done = _wait(lambda: show(good, "succeeded"), 120, "the rehearsal to succeed")
            failed = _wait(lambda: show(poison, "failed"), 120, "the poison job to fail")
            listed = client.get("/v1/training-jobs?status=failed", headers=read).json()["jobs"]
    finally:
        worker.stop(timeout=20)
        container.close()
    assert done["attempts"] == 1 and done["candidate"]["status"] == "candidate" and done["candidate"]["gate"] is None
    assert (done["parent_version"], done["dataset_digest"]) == (BASE, good)  # from the version it registered
    assert failed["attempts"] == 2 and "fails on purpose" in failed["error"] and failed["candidate"] is None
    assert [job["key"] for job in listed] == [f"rehearse:{poison}"]
