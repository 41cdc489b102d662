"""The execute node's side of queued rollouts: send a job per task not yet recorded, then wait until every task of
the generation is recorded, reporting episodes as workers record them.

A job still unrecorded ``resend_seconds`` after it was sent, whose lease no delivery holds (none is running it), is
sent again: a worker host that died mid-rollout holds its job unacknowledged until the broker's visibility timeout
(hours, above the longest training job), and a lost message never comes back. A duplicate records nothing.

The wait ends with a one-line error when a job ended failed (a ``job.failed`` event with ``final``) or when the
timeout passes; the run then fails with that reason, and resuming it sends the jobs still missing again (a job
that was only slow records nothing twice: see ``rollout_jobs``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from lamarck.agents.rollout_jobs import RolloutJob, recorded_tasks
from lamarck.platform.events import EventBus
from lamarck.platform.settings import Settings
from lamarck.platform.storage.database import Database

log = logging.getLogger(__name__)

TASK_NAME = "lamarck.rollout.run"


class RolloutsFailed(RuntimeError):
    """A generation's queued rollouts cannot all be recorded; the message is one line that says what to do."""


class RolloutQueue:
    def __init__(
        self,
        db: Database,
        bus: EventBus,
        send: Callable[[RolloutJob], None],
        *,
        timeout_seconds: float,
        poll_seconds: float = 0.5,
        resend_seconds: float | None = None,
        running: Callable[[str], bool] = lambda key: False,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.db = db
        self.bus = bus
        self.send = send
        self.timeout_seconds = timeout_seconds
        self.poll_seconds = poll_seconds
        self.resend_seconds = resend_seconds  # None: never send a job twice
        self.running = running  # job key -> whether a delivery holds its lease
        self.clock = clock
        self.sleep = sleep

    def collect(self, jobs: Sequence[RolloutJob], on_recorded: Callable[[list[str]], None]) -> list[str]:
        """Send the jobs whose task is not recorded yet and wait for all; every episode id of the generation, in task
        and sample order. ``on_recorded`` hears of the episodes recorded while it waits (not of earlier ones)."""
        if not jobs:
            return []
        run_id, generation = jobs[0].run_id, jobs[0].generation
        if any((job.run_id, job.generation) != (run_id, generation) for job in jobs):
            raise ValueError("collect takes the jobs of one generation of one run")
        done = recorded_tasks(self.db, run_id, generation)
        seen = {episode_id for ids in done.values() for episode_id in ids}
        cursor = self.bus.head()
        waiting = {job.key: job for job in jobs if job.task_index not in done}
        sent: dict[str, float] = {}
        for job in waiting.values():
            self.send(job)
            sent[job.key] = self.clock()
        if waiting:
            log.info("generation %d: %d rollout job(s) queued", generation, len(waiting))
        deadline = self.clock() + self.timeout_seconds
        while True:
            done = recorded_tasks(self.db, run_id, generation)
            new = [episode_id for ids in done.values() for episode_id in ids if episode_id not in seen]
            if new:
                seen.update(new)
                on_recorded(new)
            missing = [job for job in jobs if job.task_index not in done]
            if not missing:
                return [episode_id for index in sorted(done) for episode_id in done[index]]
            cursor = self._check_failures(cursor, {job.key for job in missing}, generation)
            self._resend_stalled(missing, sent)
            if self.clock() >= deadline:
                raise RolloutsFailed(
                    f"generation {generation}: the rollouts of {len(missing)} of {len(jobs)} tasks were not recorded "
                    f"within {self.timeout_seconds:.0f}s: start `lamarck worker --queues rollout` on a host that "
                    "reaches this broker and database, or raise workers.rollout_timeout_seconds; resuming the run "
                    "sends the missing ones again"
                )
            self.sleep(self.poll_seconds)

    def _resend_stalled(self, missing: list[RolloutJob], sent: dict[str, float]) -> None:
        if self.resend_seconds is None:
            return
        for job in missing:
            if self.clock() - sent.get(job.key, self.clock()) < self.resend_seconds or self.running(job.key):
                continue
            log.warning(
                "rollout job %s: not recorded %.0fs after it was sent and not running: sending it again",
                job.key,
                self.resend_seconds,
            )
            self.send(job)
            sent[job.key] = self.clock()

    def _check_failures(self, cursor: int, keys: set[str], generation: int) -> int:
        """Raise if one of ``keys`` ended failed since event ``cursor``; the new cursor."""
        while batch := self.bus.replay(after_id=cursor, limit=1000):
            for event in batch:
                cursor = event.id
                payload = event.payload
                if event.type == "job.failed" and payload.get("final") and payload.get("job") in keys:
                    raise RolloutsFailed(
                        f"generation {generation}: rollout job {payload['job']} failed: {payload.get('error')}; "
                        "fix the cause and resume the run"
                    )
        return cursor


def lease_probe(settings: Settings) -> Callable[[str], bool]:
    from lamarck.platform.workers import lease_held

    return lambda key: lease_held(settings, key)


def celery_sender(settings: Settings) -> Callable[[RolloutJob], None]:
    """Sends jobs to the ``rollout`` queue of the broker ``settings`` name (the SQLite broker in embedded mode)."""
    from lamarck.platform.workers import app, broker_url, configure

    configure(app, settings)

    def send(job: RolloutJob) -> None:
        try:
            app.send_task(TASK_NAME, kwargs=job.model_dump(mode="json"))
        except Exception as exc:  # kombu's connection errors vary by transport; each ends the same way
            from kombu.utils.url import maybe_sanitize_url

            where = maybe_sanitize_url(broker_url(settings))
            reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
            raise RolloutsFailed(
                f"cannot queue rollout job {job.key} on the broker at {where} ({reason}): start it or fix "
                "LAMARCK_BROKER_URL, then resume the run"
            ) from exc

    return send


def rollout_queue(settings: Settings, db: Database, bus: EventBus) -> RolloutQueue | None:
    """The queue a run's execute node uses when ``workers.rollouts`` is "queue"; None for in-process rollouts."""
    workers = settings.workers
    if workers.rollouts != "queue":
        return None
    return RolloutQueue(
        db,
        bus,
        celery_sender(settings),
        timeout_seconds=workers.rollout_timeout_seconds,
        poll_seconds=workers.rollout_poll_seconds,
        resend_seconds=workers.rollout_resend_seconds,
        running=lease_probe(settings),
    )
