"""A run killed with SIGKILL mid-generation resumes from its checkpoint and records nothing twice (SQLite and
PostgreSQL)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session
from test_orchestrator_support import scripted_orchestrator, small_config

from lamarck.agents.runs import RunError, create_run
from lamarck.agents.teacher import HintLevel
from lamarck.platform.storage import migrate
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database
from lamarck.platform.storage.records import CapabilityCell, Episode, Lesson, RunStepDone, Task, Verdict

SUPPORT = Path(__file__).with_name("test_orchestrator_support.py")
DELAY = 0.05  # seconds per scripted model call in the child, so there is a "mid-generation" to kill it in


def _count(db: Database, model: type, *where: object) -> int:
    with db.session() as session:
        return session.scalar(select(func.count()).select_from(model).where(*where)) or 0


def _run_and_kill(mode: str, db: Database, data_dir: Path, run_id: str, until: Callable[[], bool]) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(SUPPORT.parent), os.environ.get("PYTHONPATH")])),
    }
    child = subprocess.Popen(
        [sys.executable, str(SUPPORT), mode, db.url, str(data_dir), run_id, str(DELAY)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 120
    try:
        while not until():
            if child.poll() is not None:
                pytest.fail(f"the child ended before the kill point: {child.stderr.read().decode()[-2000:]}")
            if time.monotonic() > deadline:
                pytest.fail("the kill point was never reached")
            time.sleep(0.02)
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait(timeout=30)
        child.stderr.close()
    assert child.returncode == -signal.SIGKILL


def _uninterrupted(tmp_path: Path) -> tuple[list[tuple[str, int]], int, list[tuple[str, str, int]]]:
    """The same run without kills, on a fresh database: (task prompt, sample) of every original episode, the cells'
    attempts, and the lessons (a lesson the run retired may be learned again, so texts may repeat)."""
    db = Database(f"sqlite:///{tmp_path / 'reference.db'}")
    migrate.upgrade(db)
    with scripted_orchestrator(db, tmp_path / "reference") as orchestrator:
        orchestrator.run(orchestrator.start(CONFIG))
    with db.session() as session:
        episodes = sorted(
            (task.prompt, e.sample_index)
            for e, task in session.execute(
                select(Episode, Task).join(Task, Task.id == Episode.task_id).where(Episode.repaired_from_id.is_(None))
            )
        )
        attempts = sum(cell.attempts for cell in session.scalars(select(CapabilityCell)))
        lessons = _lessons(session)
    db.dispose()
    return episodes, attempts, lessons


def _lessons(session: Session) -> list[tuple[str, str, int]]:
    return sorted((lesson.text, lesson.status, lesson.times_seen) for lesson in session.scalars(select(Lesson)))


CONFIG = small_config(generations=2, batch_size=4, samples_per_task=2, hints=[HintLevel.NONE, HintLevel.FULL])


def _kill_then_resume(db: Database, data_dir: Path, *, twice: bool) -> None:
    """Killed and resumed with the hint ladder on, the run records exactly what an uninterrupted run records."""
    expected, expected_attempts, expected_lessons = _uninterrupted(data_dir)
    run_id = create_run(db, CONFIG)

    # kill 1: during generation 0's critique (some verdicts written, not all)
    _run_and_kill("run", db, data_dir, run_id, lambda: _count(db, Verdict) >= 1)
    with db.session() as session:
        run = repo.get_run(session, run_id=run_id)
        assert run.status == "running" and run.generations_done == 0

    if twice:  # kill 2: during generation 1's execution (its tasks exist, its episodes not yet)
        _run_and_kill("resume", db, data_dir, run_id, lambda: _count(db, Task, Task.generation == 1) >= 1)
        with db.session() as session:
            assert repo.get_run(session, run_id=run_id).generations_done == 1

    with scripted_orchestrator(db, data_dir) as orchestrator:
        outcome = orchestrator.resume(run_id)
        assert outcome.status == "finished" and outcome.generations_done == 2
        with pytest.raises(RunError, match="finished: there is nothing to resume"):
            orchestrator.resume(run_id)

    with db.session() as session:
        assert session.scalar(select(func.count()).select_from(Task).where(Task.run_id == run_id)) == 8
        originals = list(session.scalars(select(Episode).where(Episode.repaired_from_id.is_(None))))
        prompts = {task.id: task.prompt for task in session.scalars(select(Task))}
        assert sorted((prompts[e.task_id], e.sample_index) for e in originals) == expected
        assert len(expected) > 16  # the ladder retried the tasks the first rung failed
        per_episode = Counter(v.episode_id for v in session.scalars(select(Verdict)))
        assert set(per_episode) == {e.id for e in originals} and set(per_episode.values()) == {1}
        lessons = list(session.scalars(select(Lesson)))
        assert lessons and _lessons(session) == expected_lessons
        for lesson in lessons:
            assert len(set(lesson.source_episode_ids)) == len(lesson.source_episode_ids)
        assert sum(cell.attempts for cell in session.scalars(select(CapabilityCell))) == expected_attempts
        summary = repo.get_run(session, run_id=run_id).summary
        assessed = session.scalars(select(RunStepDone.generation).where(RunStepDone.run_id == run_id))
        assert sorted(assessed) == [0, 1] and set(summary["generations"]) == {"0", "1"}


def test_kill_and_resume_on_sqlite(sqlite_db: Database, tmp_path: Path) -> None:
    _kill_then_resume(sqlite_db, tmp_path, twice=True)


def test_kill_and_resume_on_postgres(postgres_db: Database, tmp_path: Path) -> None:
    _kill_then_resume(postgres_db, tmp_path, twice=False)
