"""Real Celery workers (subprocesses) over a real Redis, and the embedded SQLite-broker worker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from lamarck.platform.events import EventBus
from lamarck.platform.settings import Settings, TrainingSettings, WorkerSettings
from lamarck.platform.storage.database import Database
from lamarck.platform.storage.records import ModelVersion
from lamarck.platform.workers import EmbeddedWorker, app, configure

pytestmark = pytest.mark.slow


def _settings(tmp_path: Path, db: Database, broker: str | None, **workers: Any) -> Settings:
    defaults: dict[str, Any] = {
        "lease_ttl_seconds": 4,
        "heartbeat_seconds": 1.0,
        "visibility_timeout_seconds": 600,
        "max_attempts": 3,
        "retry_backoff_seconds": 0.3,
        "concurrency": 1,
        "broker_key_prefix": f"lamarck-test-{uuid.uuid4().hex[:8]}:",
    }
    return Settings(
        data_dir=tmp_path / "data",
        database_url=db.url.replace("+pysqlite", ""),
        broker_url=broker,
        workers=WorkerSettings(**{**defaults, **workers}),
        training=TrainingSettings(),
    )


@pytest.fixture
def start_worker(tmp_path: Path, sqlite_db: Database) -> Iterator[Callable[..., EmbeddedWorker]]:
    started: list[EmbeddedWorker] = []

    def start(broker: str | None, **workers: Any) -> EmbeddedWorker:
        settings = _settings(tmp_path, sqlite_db, broker, **workers)
        configure(app, settings)
        worker = EmbeddedWorker(settings, ["train"]).start()
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop(timeout=20)


def _events(db: Database, job: str, kind: str | None = None) -> list[Any]:
    return [
        e
        for e in EventBus(db).replay(limit=100_000)
        if e.payload.get("job") == f"rehearse:{job}" and (kind is None or e.type == kind)
    ]


def _wait(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.3)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def _versions(db: Database, job: str) -> list[ModelVersion]:
    with db.session() as session:
        return list(session.query(ModelVersion).filter(ModelVersion.dataset_digest == job))


def test_killed_child_job_is_redelivered_and_completes_once(start_worker, sqlite_db: Database, redis_url: str) -> None:
    start_worker(redis_url)
    job = uuid.uuid4().hex
    app.send_task("lamarck.train.rehearse", kwargs={"job": job, "steps": 6, "step_seconds": 0.5})
    first = _wait(
        lambda: [e for e in _events(sqlite_db, job, "job.progress") if e.payload["step"] >= 1],
        90,
        "the job to make progress",
    )
    victim = first[0].payload["pid"]
    os.kill(victim, signal.SIGKILL)
    _wait(lambda: _events(sqlite_db, job, "job.succeeded"), 90, "the redelivered job to finish")
    time.sleep(1.0)
    assert len(_versions(sqlite_db, job)) == 1
    assert len(_events(sqlite_db, job, "job.succeeded")) == 1
    pids = {e.payload["pid"] for e in _events(sqlite_db, job, "job.progress")}
    assert victim in pids and len(pids) == 2  # the second run happened in a fresh child


def test_poison_job_ends_failed_after_max_attempts(start_worker, sqlite_db: Database, redis_url: str) -> None:
    start_worker(redis_url, max_attempts=3)
    job = uuid.uuid4().hex
    app.send_task("lamarck.train.rehearse", kwargs={"job": job, "steps": 1, "step_seconds": 0.0, "fail": True})
    failed = _wait(lambda: _events(sqlite_db, job, "job.failed"), 90, "the poison job to end failed")
    time.sleep(2.0)
    assert failed[0].payload["attempt"] == 3 and failed[0].payload["final"]
    assert "fails on purpose" in failed[0].payload["error"]
    assert len(_events(sqlite_db, job, "job.retrying")) == 2
    assert len(_events(sqlite_db, job, "job.started")) == 3
    assert _versions(sqlite_db, job) == []


def test_job_longer_than_visibility_timeout_never_runs_twice_at_once(
    start_worker, sqlite_db: Database, redis_url: str
) -> None:
    # kombu restores unacked Redis messages older than the visibility timeout (checked every ~10 s), so a job
    # that outlives it is delivered a second time while the first run still holds the lease.
    start_worker(redis_url, visibility_timeout_seconds=2, concurrency=2, lease_ttl_seconds=6)
    job = uuid.uuid4().hex
    app.send_task("lamarck.train.rehearse", kwargs={"job": job, "steps": 18, "step_seconds": 1.0})
    _wait(lambda: _events(sqlite_db, job, "job.succeeded"), 120, "the long job to finish")
    _wait(
        lambda: len(_events(sqlite_db, job, "job.succeeded")) >= 1 and not _pending_retry(sqlite_db, job),
        60,
        "the duplicate delivery to settle",
    )
    progress = _events(sqlite_db, job, "job.progress")
    assert len({e.payload["pid"] for e in progress}) == 1  # only the lease holder ever ran the body
    assert len(progress) == 18
    assert _events(sqlite_db, job, "job.deferred"), "the job was never delivered twice: visibility timeout not hit"
    assert len(_versions(sqlite_db, job)) == 1


def _pending_retry(db: Database, job: str) -> bool:
    events = _events(db, job)
    last_deferred = max((e.id for e in events if e.type == "job.deferred"), default=0)
    last_done = max((e.id for e in events if e.type == "job.succeeded"), default=0)
    return last_deferred > last_done


def test_embedded_worker_runs_jobs_without_redis(start_worker, sqlite_db: Database) -> None:
    started = time.monotonic()
    worker = start_worker(None)
    ready = time.monotonic() - started
    job = uuid.uuid4().hex
    sent = time.monotonic()
    app.send_task("lamarck.train.rehearse", kwargs={"job": job, "steps": 1, "step_seconds": 0.0})
    _wait(lambda: _events(sqlite_db, job, "job.succeeded"), 60, "the embedded job")
    latency = time.monotonic() - sent
    assert len(_versions(sqlite_db, job)) == 1
    assert worker.children()
    print(f"embedded worker ready in {ready:.1f}s; job round trip {latency:.2f}s")
    worker.stop(timeout=20)
    assert worker.process is None


OWNER = """
import sys, time
from pathlib import Path
from lamarck.platform.settings import Settings
from lamarck.platform.workers import EmbeddedWorker
worker = EmbeddedWorker(Settings(data_dir=Path(sys.argv[1]), database_url=sys.argv[2]), ["train"]).start()
print(worker.pid, flush=True)
time.sleep(600)
"""


def test_an_embedded_worker_leaves_when_its_owner_is_killed(tmp_path: Path, sqlite_db: Database) -> None:
    import psutil

    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(tmp_path / "data"), sqlite_db.url.replace("+pysqlite", "")],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        worker = int(owner.stdout.readline())  # type: ignore[union-attr]
        assert psutil.pid_exists(worker)
        owner.kill()  # SIGKILL: no stop() runs
        owner.wait(timeout=10)
        _wait(
            lambda: not psutil.pid_exists(worker) or psutil.Process(worker).status() == "zombie",
            60,
            "the orphaned worker to shut down",
        )
    finally:
        owner.kill()
