"""The check that every training row shows the student exactly what the executor would show it for that task.

Rows are re-rendered from the student's opening that the executor recorded with each rollout. Before a job is
queued, each row's opening is compared with the opening the executor computes now, under the student harness,
for the same task: no skills, lessons, hints or worked examples the student lacks, only its own tools. A
mismatch (a harness that changed since the rollout, a hint that leaked) refuses the dataset with the first
offending row named; nothing is queued.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from sqlalchemy import select

from lamarck.agents.executor import student_opening
from lamarck.agents.harness import HarnessSpec
from lamarck.curriculum.environment import Environment, TaskSpec
from lamarck.platform.storage.database import Database
from lamarck.platform.storage.records import Task
from lamarck.platform.storage.trajectory import Trajectory, render_for_model
from lamarck.training.pipeline import DatasetRefused
from lamarck.training.traces_to_rows import DistillationSet


def student_view_check(
    db: Database, environments: Mapping[str, Environment], harness_for: Callable[[str], HarnessSpec]
) -> Callable[[DistillationSet], None]:
    def check(dataset: DistillationSet) -> None:
        ids = sorted({row.task_id for row in dataset.rows})
        with db.session() as session:
            tasks = {
                t.id: TaskSpec(
                    environment=t.environment,
                    difficulty=t.difficulty,
                    prompt=t.prompt,
                    reference=dict(t.reference or {}),
                    metadata=dict(t.meta or {}),
                )
                for t in session.scalars(select(Task).where(Task.id.in_(ids)))
            }
        for row in dataset.rows:
            env = environments.get(row.environment)
            if env is None:
                raise DatasetRefused(f"row {row.episode_id}: environment {row.environment!r} is not available here")
            expected = render_for_model(
                Trajectory(messages=student_opening(tasks[row.task_id], env, harness_for(row.environment)))
            )
            if row.messages[: row.prompt_length] != expected:
                raise DatasetRefused(
                    f"row {row.episode_id} (task {row.task_id}) does not open with what the executor "
                    "shows the student: the harness changed since the rollout, or help leaked"
                )

    return check
