"""Queued rollouts (``workers.rollouts = "queue"``) with scripted models and jobs run on threads of this process: the
run records what in-process rollouts record, a repeated or concurrent job records nothing twice, and a job that
never runs or ends failed stops the run with one line, after which a resume finishes it. The same jobs on real
``lamarck worker`` processes over Redis and PostgreSQL: test_rollout_workers.py."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from test_orchestrator_support import scripted_orchestrator, small_config

from lamarck.agents import orchestrator as orchestrator_module
from lamarck.agents.orchestrator import Orchestrator
from lamarck.agents.rollout_jobs import RolloutError, RolloutJob, recorded_tasks, run_rollout
from lamarck.agents.rollout_queue import RolloutQueue, RolloutsFailed
from lamarck.agents.runs import RunConfig, task_id_for
from lamarck.agents.teacher import HintLevel
from lamarck.curriculum.environments.arithmetic import ArithmeticEnv
from lamarck.platform.event_types import JobFailed
from lamarck.platform.events import EventBus
from lamarck.platform.settings import Settings
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database
from lamarck.platform.storage.records import Episode, LLMCall, RunStepDone, Task, Verdict

LADDER = small_config(generations=2, batch_size=4, samples_per_task=2, hints=[HintLevel.NONE, HintLevel.FULL])


class ThreadWorkers:
    """Runs each sent job with ``run_rollout`` on a thread, like a worker would; ``drop`` loses jobs instead."""

    def __init__(self, orchestrator: Orchestrator, drop: Callable[[RolloutJob], bool] = lambda job: False) -> None:
        self.container = orchestrator.container
        self.drop = drop
        self.sent: list[RolloutJob] = []
        self.pool = ThreadPoolExecutor(max_workers=4)
        self.futures: list[Future[list[str]]] = []

    def send(self, job: RolloutJob) -> None:
        self.sent.append(job)
        if not self.drop(job):
            self.futures.append(self.pool.submit(run_rollout, self.container, job))


@pytest.fixture
def queued(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., ThreadWorkers]]:
    """Makes the next orchestrators' runs send their rollouts to thread workers (returned for inspection)."""
    made: list[ThreadWorkers] = []

    def use(
        orchestrator: Orchestrator,
        timeout: float = 60.0,
        resend: float | None = None,
        clock: Callable[[ThreadWorkers], float] | None = None,
        **options: Any,
    ) -> ThreadWorkers:
        workers = ThreadWorkers(orchestrator, **options)

        def queue(settings: Settings, db: Database, bus: EventBus) -> RolloutQueue:
            return RolloutQueue(
                db,
                bus,
                workers.send,
                timeout_seconds=timeout,
                poll_seconds=0.02,
                resend_seconds=resend,
                clock=(lambda: clock(workers)) if clock is not None else time.monotonic,
            )

        monkeypatch.setattr(orchestrator_module, "rollout_queue", queue)
        made.append(workers)
        return workers

    yield use
    for workers in made:
        workers.pool.shutdown(wait=True)


class Recorder:
    def __init__(self) -> None:
        self.events: list[str] = []

    def on_event(self, event: Any) -> None:
        self.events.append(event.type)

    def on_node(self, node: str, generation: int, finished: bool) -> None:
        pass


def _recorded(db: Database) -> list[tuple[str, int, str | None, str]]:
    """(task prompt, sample, answer, verdict outcome) of every original episode."""
    with db.session() as session:
        rows = session.execute(
            select(Task.prompt, Episode.sample_index, Episode.answer, Episode.outcome)
            .join(Task, Task.id == Episode.task_id)
            .where(Episode.repaired_from_id.is_(None))
        )
        return sorted(tuple(row) for row in rows)  # type: ignore[misc]


def _count(db: Database, model: type) -> int:
    with db.session() as session:
        return session.scalar(select(func.count()).select_from(model)) or 0


def test_queued_rollouts_record_what_in_process_rollouts_record(
    queued: Callable[..., ThreadWorkers], tmp_path: Path
) -> None:
    dbs = {}
    counts = {}
    for mode in ("in_process", "queue"):
        from lamarck.platform.storage import migrate

        db = dbs[mode] = Database(f"sqlite:///{tmp_path / f'{mode}.db'}")
        migrate.upgrade(db)
        recorder = Recorder()
        with scripted_orchestrator(db, tmp_path / mode, listener=recorder) as orchestrator:
            workers = queued(orchestrator) if mode == "queue" else None
            outcome = orchestrator.run(orchestrator.start(LADDER))
        assert outcome.status == "finished" and outcome.generations_done == 2
        counts[mode] = Counter(recorder.events)
        if workers is not None:
            assert sorted((job.generation, job.task_index) for job in workers.sent) == [
                (g, t) for g in range(2) for t in range(4)
            ]
            assert all(future.done() for future in workers.futures)
    assert _recorded(dbs["queue"]) == _recorded(dbs["in_process"])
    assert len(_recorded(dbs["queue"])) > 16  # the ladder's second rung ran for the tasks the first failed
    for kind in ("episode_finished", "verdict", "generation_summary", "run_finished"):
        assert counts["queue"][kind] == counts["in_process"][kind], kind
    assert counts["queue"]["hint_ladder"] == 0  # each worker climbs its own task's ladder: no generation report
    with dbs["queue"].session() as session:
        marks = session.scalars(select(RunStepDone.step).where(RunStepDone.step.like("rollout:t%")))
        assert Counter(marks) == {f"rollout:t{t}": 2 for t in range(4)}
        per_episode = Counter(v.episode_id for v in session.scalars(select(Verdict)))
        assert set(per_episode.values()) == {1}
    for db in dbs.values():
        db.dispose()


def _run_with_tasks(db: Database, orchestrator: Orchestrator, config: RunConfig, count: int) -> str:
    """A run with ``count`` stored tasks in generation 0, as the propose node stores them."""
    run_id = orchestrator.start(config)
    env = ArithmeticEnv()
    with db.session() as session:
        for index in range(count):
            task = env.generate(1, random.Random(index))
            repo.add_task(
                session,
                environment=task.environment,
                difficulty=task.difficulty,
                prompt=task.prompt,
                reference=task.reference,
                meta=task.metadata,
                source="test",
                run_id=run_id,
                generation=0,
                task_id=task_id_for(run_id, 0, index),
            )
    return run_id


def _job(run_id: str, index: int = 0, **changes: Any) -> RolloutJob:
    from lamarck.agents.harness import default_harness

    fields: dict[str, Any] = {
        "run_id": run_id,
        "generation": 0,
        "task_index": index,
        "model_version": "smollm2-135m",
        "harnesses": {"arithmetic": default_harness("arithmetic").version_id},
    }
    return RolloutJob(**{**fields, **changes})


def test_a_repeated_job_records_nothing_and_calls_no_model(sqlite_db: Database, tmp_path: Path) -> None:
    with scripted_orchestrator(sqlite_db, tmp_path) as orchestrator:
        run_id = _run_with_tasks(sqlite_db, orchestrator, small_config(), 1)
        first = run_rollout(orchestrator.container, _job(run_id))
        calls = _count(sqlite_db, LLMCall)
        again = run_rollout(orchestrator.container, _job(run_id))
    assert first == again and len(first) == 2
    assert _count(sqlite_db, LLMCall) == calls and _count(sqlite_db, Episode) == 2
    assert recorded_tasks(sqlite_db, run_id, 0) == {0: first}


def test_two_deliveries_at_once_record_one_set_of_episodes(db: Database, tmp_path: Path) -> None:
    """Without the lease (which keeps a second delivery from running at all), the episode keys and the step mark
    still let only one delivery's episodes in: the other's transaction fails and its retry finds them."""
    with scripted_orchestrator(db, tmp_path, delay=0.02) as orchestrator:
        run_id = _run_with_tasks(db, orchestrator, small_config(samples_per_task=3), 1)
        start = threading.Barrier(2)
        results: list[list[str] | BaseException] = []

        def deliver() -> None:
            start.wait()
            try:
                results.append(run_rollout(orchestrator.container, _job(run_id)))
            except Exception as exc:  # the loser's commit
                results.append(exc)

        threads = [threading.Thread(target=deliver) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        retried = run_rollout(orchestrator.container, _job(run_id))
    assert len(results) == 2 and any(isinstance(r, list) for r in results)
    assert all(r == retried for r in results if isinstance(r, list))
    assert _count(db, Episode) == 3 and len(retried) == 3


def test_a_job_naming_a_missing_harness_fails_in_one_line_and_records_nothing(
    sqlite_db: Database, tmp_path: Path
) -> None:
    with scripted_orchestrator(sqlite_db, tmp_path) as orchestrator:
        run_id = _run_with_tasks(sqlite_db, orchestrator, LADDER, 1)
        with pytest.raises(RolloutError, match="no harness") as missing:
            run_rollout(orchestrator.container, _job(run_id, harnesses={"arithmetic": "arithmetic-000000000000"}))
        with pytest.raises(RolloutError, match="has no task 5 in generation 0"):
            run_rollout(orchestrator.container, _job(run_id, index=5))
    assert "\n" not in str(missing.value)
    assert _count(sqlite_db, Episode) == 0 and _count(sqlite_db, LLMCall) == 0


def timed_out_after_three() -> Callable[[ThreadWorkers], float]:
    """A clock that stands still until three jobs are recorded and the node has looked once more, then is past any
    deadline: the lost job's timeout, without waiting for it or racing the other jobs."""
    looks_after = [0]

    def clock(workers: ThreadWorkers) -> float:
        if sum(future.done() for future in workers.futures) < 3:
            return 0.0
        looks_after[0] += 1
        return 0.0 if looks_after[0] < 2 else 1e9

    return clock


def test_a_lost_job_fails_the_run_with_its_reason_and_resume_finishes_it(
    queued: Callable[..., ThreadWorkers], sqlite_db: Database, tmp_path: Path
) -> None:
    config = small_config(generations=1)
    with scripted_orchestrator(sqlite_db, tmp_path) as orchestrator:
        workers = queued(
            orchestrator,
            timeout=1.0,
            drop=lambda job: job.task_index == 2,
            clock=timed_out_after_three(),
        )
        run_id = orchestrator.start(config)
        with pytest.raises(RolloutsFailed, match="rollouts of 1 of 4 tasks were not recorded within 1s") as lost:
            orchestrator.run(run_id)
        assert "lamarck worker --queues rollout" in str(lost.value)
        with sqlite_db.session() as session:
            run = repo.get_run(session, run_id=run_id)
            assert run.status == "failed" and "lamarck worker --queues rollout" in (run.error or "")
        assert _count(sqlite_db, Episode) == 6 and _count(sqlite_db, Verdict) == 0

        resumed = queued(orchestrator)
        outcome = orchestrator.resume(run_id)
    assert outcome.status == "finished"
    assert [job.task_index for job in resumed.sent] == [2]  # only the task still missing is sent again
    assert len(workers.sent) == 4
    with sqlite_db.session() as session:
        episodes = list(session.scalars(select(Episode).where(Episode.repaired_from_id.is_(None))))
        assert len(episodes) == 8 and len({e.idempotency_key for e in episodes}) == 8
        assert Counter(v.episode_id for v in session.scalars(select(Verdict))) == {e.id: 1 for e in episodes}


def test_a_job_lost_on_its_way_is_sent_again_once_it_stalls(
    queued: Callable[..., ThreadWorkers], sqlite_db: Database, tmp_path: Path
) -> None:
    """A message the broker lost (or a worker host that died holding it) is not waited for: the node sends the job
    again when it has stalled and no delivery holds its lease."""
    lost: list[RolloutJob] = []

    def lose_first(job: RolloutJob) -> bool:
        if job.task_index == 1 and not lost:
            lost.append(job)
            return True
        return False

    with scripted_orchestrator(sqlite_db, tmp_path) as orchestrator:
        workers = queued(orchestrator, timeout=60.0, resend=0.5, drop=lose_first)
        outcome = orchestrator.run(orchestrator.start(small_config(generations=1)))
    assert outcome.status == "finished" and lost
    assert Counter(job.task_index for job in workers.sent) == {0: 1, 1: 2, 2: 1, 3: 1}
    with sqlite_db.session() as session:
        keys = list(session.scalars(select(Episode.idempotency_key).where(Episode.repaired_from_id.is_(None))))
    assert len(keys) == 8 and len(set(keys)) == 8


def test_a_running_job_is_not_sent_again(sqlite_db: Database) -> None:
    sent: list[RolloutJob] = []
    now = [0.0]

    def clock() -> float:
        return now[0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    queue = RolloutQueue(
        sqlite_db,
        EventBus(sqlite_db),
        sent.append,
        timeout_seconds=10.0,
        poll_seconds=1.0,
        resend_seconds=3.0,
        running=lambda key: True,
        clock=clock,
        sleep=sleep,
    )
    with pytest.raises(RolloutsFailed, match="rollouts of 1 of 1 tasks were not recorded within 10s"):
        queue.collect([_job("r" * 32)], lambda ids: None)
    assert len(sent) == 1  # its lease is held all along: a slow job, not a lost one
    queue.running = lambda key: False
    sent.clear()
    with pytest.raises(RolloutsFailed):
        queue.collect([_job("r" * 32)], lambda ids: None)
    assert len(sent) == 4  # sent, then again at 3, 6 and 9 seconds


def test_a_job_that_ended_failed_stops_the_wait_at_once(sqlite_db: Database) -> None:
    bus = EventBus(sqlite_db)
    job = _job("r" * 32, index=1)

    def send(sent: RolloutJob) -> None:
        bus.publish(
            JobFailed(
                job=sent.key,
                task="lamarck.rollout.run",
                celery_id="c1",
                attempt=3,
                redelivered=False,
                error="RuntimeError: model server down",
                final=True,
                retryable=True,
            )
        )

    queue = RolloutQueue(sqlite_db, bus, send, timeout_seconds=600, poll_seconds=0.01)
    with pytest.raises(RolloutsFailed, match=r"rollout job rollout:r+:g0:t1 failed: RuntimeError: model server down"):
        queue.collect([job], lambda ids: None)


@pytest.mark.slow  # kombu retries the connection for about 20 s before it gives up
def test_a_broker_that_cannot_be_reached_is_one_line_naming_it(tmp_path: Path) -> None:
    """In a process of its own: a send to a dead broker leaves the process-wide Celery app's result backend unusable
    ("the Celery application must be restarted"), which failed every later worker test of the suite."""
    import subprocess
    import sys

    script = f"""
from lamarck.agents.rollout_queue import RolloutsFailed, celery_sender
from lamarck.agents.rollout_jobs import RolloutJob
from lamarck.platform.settings import Settings
job = RolloutJob.model_validate_json(open("job.json").read())
try:
    celery_sender(Settings(data_dir={str(tmp_path)!r}, broker_url="redis://:secret@127.0.0.1:1/0"))(job)
except RolloutsFailed as exc:
    print(exc)
"""
    (tmp_path / "job.json").write_text(_job("r" * 32).model_dump_json())
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    message = done.stdout.strip()
    assert "cannot queue rollout job rollout:" in message and "redis://:**@127.0.0.1:1/0" in message
    assert "secret" not in message and "\n" not in message and "LAMARCK_BROKER_URL" in message


def test_the_node_sends_to_the_task_the_workers_register() -> None:
    from lamarck.agents import rollout_queue, rollout_tasks

    assert rollout_queue.TASK_NAME == rollout_tasks.TASK_NAME == rollout_tasks.run.name


@pytest.mark.parametrize(
    ("mode", "rollouts", "queues", "warms"),
    [
        ("embedded", "in_process", None, False),  # the embedded worker trains; rollouts run in the run's process
        ("embedded", "queue", None, True),
        ("embedded", "queue", ["train"], False),
        ("distributed", "in_process", ["rollout"], True),  # a worker started for rollouts gets them
        ("distributed", "queue", ["train"], False),
        ("distributed", "queue", ["rollout", "train"], True),
    ],
)
def test_a_worker_warms_up_for_rollouts_only_when_it_will_take_them(
    tmp_path: Path, mode: str, rollouts: str, queues: list[str] | None, warms: bool
) -> None:
    from celery import Celery

    from lamarck.agents.rollout_tasks import consumes_rollouts
    from lamarck.platform.workers import configure

    broker = "redis://127.0.0.1:6379/0" if mode == "distributed" else None
    settings = Settings(data_dir=tmp_path, broker_url=broker, workers={"rollouts": rollouts})
    celery = configure(Celery("warm-test"), settings)
    if queues is not None:
        celery.amqp.queues.select(queues)
    assert consumes_rollouts(celery) is warms


def test_warming_up_opens_the_embedder_and_the_stores_a_rollout_uses(tmp_path: Path) -> None:
    from lamarck.agents.rollout_jobs import warm_for_rollouts
    from lamarck.memory import embeddings
    from lamarck.platform.container import Container

    container = Container(Settings(data_dir=tmp_path))
    try:
        seconds = warm_for_rollouts(container)
        assert seconds > 0
        opened = set(vars(container))
        assert {"db", "sandbox", "gateway", "memory", "lessons", "library"} <= opened
        assert container.memory.embedding.stats.snapshot().calls == 1  # a model call, not a cache hit
        assert embeddings.bundled_model_path().resolve() in embeddings._models
    finally:
        container.close()
