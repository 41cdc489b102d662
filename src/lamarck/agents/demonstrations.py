"""Worked examples bootstrapped from the agent's own verified successes (DSPy BootstrapFewShot, at rollout).

Only passes on training tasks whose answer follows from their work (the process filter) become examples, and
only for the teacher: the student never sees them, and rows are re-rendered without them.
"""

from __future__ import annotations

from sqlalchemy import select

from lamarck.agents.harness import FewShotExample
from lamarck.agents.teacher import demonstration
from lamarck.curriculum.environment import TaskSpec
from lamarck.curriculum.heldout import is_heldout
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database
from lamarck.platform.storage.records import Episode, Task
from lamarck.training.process_filter import process_problem

SCANNED_PER_ENVIRONMENT = 64


def recent_demonstrations(db: Database, environments: list[str], *, limit: int = 12) -> dict[str, list[FewShotExample]]:
    """Up to ``limit`` distinct worked examples per environment, newest verified successes first."""
    found: dict[str, list[FewShotExample]] = {}
    for environment in environments:
        examples = [example for _, example in verified_examples(db, environment, limit=limit)]
        if examples:
            found[environment] = examples
    return found


def verified_examples(db: Database, environment: str, *, limit: int = 12) -> list[tuple[int, FewShotExample]]:
    """``(difficulty, worked example)`` from the newest verified, process-filtered passes on training tasks."""
    examples: list[tuple[int, FewShotExample]] = []
    with db.session() as session:
        query = (
            select(Episode, Task)
            .join(Task, Task.id == Episode.task_id)
            .where(Task.environment == environment, Episode.outcome == "passed", Episode.repaired_from_id.is_(None))
            .order_by(Episode.created_at.desc())
            .limit(SCANNED_PER_ENVIRONMENT)
        )
        for episode, task in session.execute(query).tuples():
            if is_heldout(task.environment, task.prompt):
                continue
            spec = TaskSpec(
                environment=task.environment,
                difficulty=task.difficulty,
                prompt=task.prompt,
                reference=dict(task.reference or {}),
                metadata=dict(task.meta or {}),
            )
            trajectory = repo.episode_trajectory(episode)
            if process_problem(spec, trajectory, episode.answer or "") is not None:
                continue
            example = demonstration(spec, trajectory)
            if example is not None and all(example != seen for _, seen in examples):
                examples.append((task.difficulty, example))
            if len(examples) >= limit:
                break
    return examples
