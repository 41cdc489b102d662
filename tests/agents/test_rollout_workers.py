"""Queued rollouts on real ``lamarck worker --queues rollout`` processes: PostgreSQL, Redis, a Chroma server and the
executor's model served over HTTP (a scripted model behind ``lamarck serve-model``'s app, a fixed delay per call).

A run of two generations starts on two workers; one is killed with SIGKILL in the middle of a rollout, the other takes
the job the broker gives back and the rest, and the run finishes with every episode recorded once. And a
small run whose worker rolls out on the real local model (SmolLM2 in the worker's own engine).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from test_orchestrator_support import responder, scripted_gateway, small_config

from lamarck.agents.orchestrator import Orchestrator, RunOutcome
from lamarck.memory.chroma import open_memory
from lamarck.platform.container import Container
from lamarck.platform.events import EventBus
from lamarck.platform.llm.model_store import ModelStore
from lamarck.platform.llm.sampling import Completion, SamplingParams
from lamarck.platform.sandbox import Sandbox
from lamarck.platform.settings import (
    DEFAULT_MODEL_VERSION,
    MemorySettings,
    SandboxSettings,
    Settings,
    WorkerSettings,
)
from lamarck.platform.storage.database import Database
from lamarck.platform.storage.records import Episode, LLMCall, RunStepDone, Verdict
from lamarck.testing import ScriptedLLM, scripted_provider
from memory.memory_chroma_server import ChromaServer  # type: ignore[import-not-found]

pytestmark = pytest.mark.slow

DELAY = 1.0  # seconds per executor call at the model server: a rollout lasts long enough to be killed inside


class ScriptedEngine:
    """What ``lamarck serve-model``'s app needs of an engine, answering from the orchestrator tests' script."""

    def __init__(self, delay: float) -> None:
        self.respond = responder(delay)

    def versions(self) -> list[str]:
        return [DEFAULT_MODEL_VERSION]

    def chat(self, model: str, messages: Any, params: SamplingParams | None = None) -> list[Completion]:
        n = params.n if params is not None else 1
        prompt = sum(len(str(m.get("content") or "").split()) for m in messages)
        return [
            Completion(
                text=text,
                finish_reason="stop",
                prompt_tokens=prompt,
                completion_tokens=len(text.split()),
                latency_s=0.0,
            )
            for text in self.respond(messages, n)
        ]


@pytest.fixture
def model_server() -> Iterator[str]:
    import uvicorn

    from lamarck.platform.llm.server import create_app

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(create_app(ScriptedEngine(DELAY)), host="127.0.0.1", port=port, log_level="warning")  # type: ignore[arg-type]
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "the scripted model server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/v1"
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture
def chroma_url(tmp_path: Path) -> Iterator[str]:
    server = ChromaServer(tmp_path / "chroma", tmp_path / "chroma.log")
    yield server.url
    server.stop()


@dataclass
class Deployment:
    settings: Settings
    env: dict[str, str]  # what a worker host is given: the same settings, its executor on the model server


@pytest.fixture
def deployment(tmp_path: Path, postgres_db: Database, redis_url: str, chroma_url: str, model_server: str) -> Deployment:
    workers = WorkerSettings(
        rollouts="queue",
        rollout_timeout_seconds=300,
        rollout_poll_seconds=0.2,
        lease_ttl_seconds=4,
        heartbeat_seconds=1.0,
        visibility_timeout_seconds=5,  # a killed worker's job comes back after this
        retry_backoff_seconds=0.3,
        max_attempts=5,
        broker_key_prefix=f"lamarck-test-{uuid.uuid4().hex[:8]}:",
    )
    memory = MemorySettings(collection_prefix=f"t{uuid.uuid4().hex[:10]}_")
    settings = Settings(
        data_dir=tmp_path / "orchestrator",
        database_url=postgres_db.url,
        broker_url=redis_url,
        chroma_url=chroma_url,
        workers=workers,
        memory=memory,
    )
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("LAMARCK_")},
        "LAMARCK_DATABASE_URL": postgres_db.url,
        "LAMARCK_BROKER_URL": redis_url,
        "LAMARCK_CHROMA_URL": chroma_url,
        "LAMARCK_WORKERS": workers.model_dump_json(),
        "LAMARCK_MEMORY": memory.model_dump_json(),
        "LAMARCK_MODELS__EXECUTOR__MODEL": f"lamarck/{DEFAULT_MODEL_VERSION}",
        "LAMARCK_MODELS__EXECUTOR__API_BASE": model_server,
        "LAMARCK_GATEWAY__RETRIES": "0",
    }
    return Deployment(settings, env)


class Worker:
    """``lamarck worker --queues rollout`` in its own process group (SIGKILL takes the main process and its pool)."""

    def __init__(self, deployment: Deployment, name: str, root: Path) -> None:
        self.log = root / f"{name}.log"
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [str(Path(sys.executable).parent / "lamarck"), "worker", "--queues", "rollout", "--concurrency", "1"],
                env={**deployment.env, "LAMARCK_DATA_DIR": str(root / name)},
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + 120
        while b" ready." not in self.log.read_bytes():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.kill()
                pytest.fail(f"worker {name} did not start: {self.log.read_text()[-3000:]}")
            time.sleep(0.2)

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)


@pytest.fixture
def start_worker(deployment: Deployment, tmp_path: Path) -> Iterator[Callable[[str], Worker]]:
    started: list[Worker] = []

    def start(name: str) -> Worker:
        started.append(Worker(deployment, name, tmp_path))
        return started[-1]

    yield start
    for worker in started:
        if worker.process.poll() is None:
            os.killpg(worker.process.pid, signal.SIGTERM)
            try:
                worker.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                worker.kill()


def _wait(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def _inside_a_rollout(log: Path) -> bool:
    """Whether the worker's log shows it inside a rollout job: its latest job line says received, not succeeded, and
    a model call completed after it (LiteLLM logs each completed call)."""
    text = log.read_text(errors="replace")
    lines = list(re.finditer(r"Task lamarck\.rollout\.run\[[^\]]+\] (received|succeeded)", text))
    return bool(lines) and lines[-1][1] == "received" and "Completed Call" in text[lines[-1].end() :]


def _worker_calls(db: Database) -> list[LLMCall]:
    """The executor's calls to the model server, which only the workers make (the orchestrator's learnable frontier
    probes cells with the executor's scripted model in its own process)."""
    with db.session() as session:
        query = select(LLMCall).where(LLMCall.role == "executor", LLMCall.model.not_like("scripted/%"))
        return list(session.scalars(query))


def test_one_of_two_workers_killed_mid_rollout_loses_nothing_and_records_nothing_twice(
    deployment: Deployment, start_worker: Callable[[str], Worker], postgres_db: Database, tmp_path: Path
) -> None:
    first, _second = start_worker("worker-a"), start_worker("worker-b")
    memory = open_memory(deployment.settings)
    outcome: list[RunOutcome | BaseException] = []
    try:
        with scripted_provider(ScriptedLLM(responder())):  # the critic's and proposer's model, in this process
            container = Container(
                deployment.settings,
                db=postgres_db,
                gateway=scripted_gateway(postgres_db),
                memory=memory,
                sandbox=Sandbox(SandboxSettings()),
            )
            orchestrator = Orchestrator(container, seed_builtins=False)
            run_id = orchestrator.start(small_config(generations=2, batch_size=4, samples_per_task=2))

            def drive() -> None:
                try:
                    outcome.append(orchestrator.run(run_id))
                except BaseException as exc:
                    outcome.append(exc)

            driver = threading.Thread(target=drive)
            driver.start()
            _wait(lambda: _inside_a_rollout(first.log), 180, "worker-a past a rollout's first model call")
            time.sleep(DELAY / 4)  # that call's record is written; the rollout's next call is still at the server
            first.kill()
            killed_calls = {call.episode_id for call in _worker_calls(postgres_db)}
            driver.join(timeout=300)
            assert not driver.is_alive(), "the run did not finish"
    finally:
        memory.close()

    assert len(outcome) == 1 and isinstance(outcome[0], RunOutcome), outcome
    assert outcome[0].status == "finished" and outcome[0].generations_done == 2
    with postgres_db.session() as session:
        episodes = list(session.scalars(select(Episode).where(Episode.repaired_from_id.is_(None))))
        keys = Counter(e.idempotency_key for e in episodes)
        assert len(episodes) == 16 and set(keys.values()) == {1}
        per_task = Counter((e.generation, e.task_id) for e in episodes)
        assert len(per_task) == 8 and set(per_task.values()) == {2}
        marks = list(session.scalars(select(RunStepDone).where(RunStepDone.step.like("rollout:t%"))))
        assert len(marks) == 8
        assert Counter(v.episode_id for v in session.scalars(select(Verdict))) == {e.id: 1 for e in episodes}
    with postgres_db.session() as session:
        recorded = set(session.scalars(select(Episode.id)))  # the critic's repairs too: their calls are linked
    assert killed_calls - recorded, "the kill did not land inside a rollout: every call made so far was recorded"
    orphans = {call.episode_id for call in _worker_calls(postgres_db)} - recorded
    assert orphans == killed_calls - recorded  # only the killed rollout's attempts were never recorded
    events = EventBus(postgres_db).replay(limit=100_000)
    started = Counter(e.payload["job"] for e in events if e.type == "job.started")
    results: dict[str, set[tuple[str, ...]]] = {}
    for event in events:
        if event.type == "job.succeeded":
            results.setdefault(event.payload["job"], set()).add(tuple(event.payload["result"]["episodes"]))
    # a job delivered again after it succeeded (the broker gives back a job that outlived the visibility timeout)
    # succeeds again with the episodes the first delivery recorded
    assert len(results) == 8 and all(len(found) == 1 for found in results.values())
    assert any(count > 1 for count in started.values())  # the killed job started again (on the other worker)
    print(f"jobs started {sum(started.values())} times for 8 tasks; {len(orphans)} attempts died with the worker")


def test_a_worker_rolls_out_on_the_real_local_model(
    deployment: Deployment,
    start_worker: Callable[[str], Worker],
    postgres_db: Database,
    model_store: ModelStore,
) -> None:
    env = deployment.env
    env.pop("LAMARCK_MODELS__EXECUTOR__API_BASE")  # lamarck/smollm2-135m in the worker's own engine
    env.update({"LAMARCK_MODEL_STORE_DIR": str(model_store.root), "LAMARCK_ENGINE__SLOTS": "4"})
    worker = start_worker("worker-real")
    memory = open_memory(deployment.settings)
    try:
        with scripted_provider(ScriptedLLM(responder())):
            container = Container(
                deployment.settings,
                db=postgres_db,
                gateway=scripted_gateway(postgres_db),
                memory=memory,
                sandbox=Sandbox(SandboxSettings()),
            )
            orchestrator = Orchestrator(container, seed_builtins=False)
            config = small_config(generations=1, batch_size=2, samples_per_task=1, frontier="thompson")
            outcome = orchestrator.run(orchestrator.start(config))
    finally:
        memory.close()
    assert outcome.status == "finished" and outcome.generations_done == 1
    with postgres_db.session() as session:
        episodes = {e.id: e for e in session.scalars(select(Episode).where(Episode.repaired_from_id.is_(None)))}
        calls = list(session.scalars(select(LLMCall).where(LLMCall.role == "executor")))
        verdicts = list(session.scalars(select(Verdict)))
    assert len(episodes) == 2 and {v.episode_id for v in verdicts} >= set(episodes)
    assert calls and {call.model for call in calls} == {f"lamarck/{DEFAULT_MODEL_VERSION}"}
    assert {call.episode_id for call in calls} <= set(episodes) and all(call.ok for call in calls)
    assert all(e.completion_tokens > 0 for e in episodes.values())
    log = worker.log.read_text(errors="replace")
    warm = re.search(r"rollout worker process \d+ warm in [\d.]+s", log)
    assert warm is not None, log[-3000:]
    # the job can be received (prefetched by the main process) while the pool process warms; it runs after
    assert warm.start() < log.index("LiteLLM completion()")


def test_an_api_task_in_distributed_mode_is_solved_by_a_rollout_worker(
    deployment: Deployment, start_worker: Callable[[str], Worker], postgres_db: Database
) -> None:
    from fastapi.testclient import TestClient

    from lamarck.api.app import create_app
    from lamarck.api.keys import Scope, create_key
    from lamarck.platform.storage import repositories as repo

    worker = start_worker("worker-api")
    with postgres_db.session() as session:
        repo.register_model_version(
            session, version_id=DEFAULT_MODEL_VERSION, base=DEFAULT_MODEL_VERSION, status="promoted"
        )
    _, key = create_key(postgres_db, [Scope.TASKS, Scope.READ])
    container = Container(deployment.settings, db=postgres_db, sandbox=Sandbox(SandboxSettings()))
    with TestClient(create_app(container)) as client:
        response = client.post(
            "/v1/tasks/wait",
            json={"prompt": "What is 6 * 7?", "environment": "arithmetic", "expected": "42", "timeout": 120},
            headers={"Authorization": f"Bearer {key}"},
        )
    assert response.status_code == 200, response.text
    task = response.json()
    assert task["status"] == "succeeded", task
    assert "lamarck.rollout.api_task" in worker.log.read_text(errors="replace")
    assert _worker_calls(postgres_db), "the worker, not the API process, called the model"
