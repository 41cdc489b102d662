"""What the learnable-cells frontier reads: per cell, the student's greedy success on the development slice and
the teacher's recent rollout success, both for the current (model version, harness).

The development slice comes from training seeds and is for the loop's own decisions, so consulting it every
generation spends nothing of the gate's or the report's statistics. Its greedy results are stored per model and
harness, so each release is evaluated once. Rollout evidence decays by generation within the run, so the frontier
moves after a promotion (a new model version starts with no rollout evidence of its own).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping

from sqlalchemy import select

from lamarck.agents.evaluation import evaluate, store_evaluation
from lamarck.agents.harness import HarnessSpec
from lamarck.agents.hint_ladder import rung_index
from lamarck.curriculum.environment import Environment
from lamarck.curriculum.heldout import dev_set, digest, set_name
from lamarck.curriculum.learnable import Cell, CellEvidence
from lamarck.platform.llm.gateway import LLMGateway
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database
from lamarck.platform.storage.records import Episode, Task

DEV_PER_LEVEL = 3
HALF_LIFE_GENERATIONS = 3.0


def student_scores(
    gateway: LLMGateway,
    db: Database,
    env: Environment,
    model_version: str,
    harness: HarnessSpec,
    *,
    per_level: int = DEV_PER_LEVEL,
) -> dict[int, float]:
    """Greedy success per level of ``model_version`` under the student ``harness`` on the development slice."""
    tasks = dev_set(env.name, per_level=per_level, env=env)
    eval_set = f"{set_name(env.name, slice_='dev')}/pl{per_level}@{digest(tasks)[:12]}"
    with db.session() as session:
        found = repo.find_evaluation(
            session, model_version=model_version, harness_version=harness.version_id, eval_set=eval_set, kind="dev"
        )
        per_level_scores = dict((found.decision or {}).get("per_level", {})) if found is not None else None
    if per_level_scores is None:
        result = evaluate(gateway, env, tasks, model_version, harness, eval_set=eval_set)
        store_evaluation(db, result, kind="dev")
        per_level_scores = result.per_level
    return {int(level): float(score) for level, score in per_level_scores.items()}


def _rollouts(
    db: Database, *, run_id: str, model_version: str, harnesses: Mapping[str, HarnessSpec], generation: int
) -> list[tuple[str, Cell, int, int, bool]]:
    """(task id, cell, generation, sample index, passed) of this run's verified rollouts of this model and harness."""
    versions = {harness.version_id for harness in harnesses.values()}
    query = (
        select(
            Task.id,
            Task.environment,
            Task.difficulty,
            Episode.outcome,
            Episode.generation,
            Episode.harness_version,
            Episode.sample_index,
        )
        .join(Task, Task.id == Episode.task_id)
        .where(
            Episode.run_id == run_id,
            Episode.model_version == model_version,
            Episode.repaired_from_id.is_(None),
            Episode.outcome.in_(("passed", "failed")),
        )
    )
    with db.session() as session:
        return [
            (
                task_id,
                (environment, difficulty),
                episode_generation if episode_generation is not None else generation,
                sample_index,
                outcome == "passed",
            )
            for task_id, environment, difficulty, outcome, episode_generation, harness_version, sample_index in (
                session.execute(query)
            )
            if harness_version in versions
        ]


def _decayed(
    rows: list[tuple[str, Cell, int, int, bool]], key: Callable[[int], int], generation: int, half_life: float
) -> dict[tuple[Cell, int], tuple[float, float]]:
    """(decayed tasks attempted, decayed tasks solved) per (cell, ``key(sample index)``); a task counts once per
    generation and group, solved when any of its samples there passed."""
    cells: dict[tuple[str, int, int], tuple[Cell, int]] = {}
    solved: dict[tuple[str, int, int], bool] = defaultdict(bool)
    for task_id, cell, episode_generation, sample_index, passed in rows:
        group = key(sample_index)
        task_key = (task_id, episode_generation, group)
        cells[task_key] = (cell, episode_generation)
        solved[task_key] |= passed
    totals: dict[tuple[Cell, int], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for task_key, (cell, episode_generation) in cells.items():
        weight = 0.5 ** (max(0, generation - episode_generation) / half_life)
        totals[(cell, task_key[2])][0] += weight
        totals[(cell, task_key[2])][1] += weight if solved[task_key] else 0.0
    return {group: (attempts, passes) for group, (attempts, passes) in totals.items()}


def rollout_evidence(
    db: Database,
    *,
    run_id: str,
    model_version: str,
    harnesses: Mapping[str, HarnessSpec],
    generation: int,
    half_life: float = HALF_LIFE_GENERATIONS,
) -> dict[Cell, tuple[float, float]]:
    """(decayed tasks attempted, decayed tasks solved) per cell from this run's verified rollouts of this model and
    harness. A task counts once per generation, solved when any of its samples passed at any rung of the ladder."""
    rows = _rollouts(db, run_id=run_id, model_version=model_version, harnesses=harnesses, generation=generation)
    return {cell: counts for (cell, _), counts in _decayed(rows, lambda _: 0, generation, half_life).items()}


def rung_evidence(
    db: Database,
    *,
    run_id: str,
    model_version: str,
    harnesses: Mapping[str, HarnessSpec],
    generation: int,
    half_life: float = HALF_LIFE_GENERATIONS,
) -> dict[tuple[Cell, int], tuple[float, float]]:
    """Like ``rollout_evidence``, per (cell, rung index of the run's hint ladder): the tasks that reached each rung
    and how many of them it solved."""
    rows = _rollouts(db, run_id=run_id, model_version=model_version, harnesses=harnesses, generation=generation)
    return _decayed(rows, rung_index, generation, half_life)


def ladder_entry(
    evidence: Mapping[tuple[Cell, int], tuple[float, float]], rungs: int, skip_after: float
) -> dict[Cell, int]:
    """Per cell, the rung its tasks enter the hint ladder at: the lowest one not yet dead, a rung being dead in a cell
    when at least ``skip_after`` (decayed) tasks reached it there and none was solved. The top rung is never skipped.
    As the evidence decays, a skipped rung is tried again, and a new model version starts with none of it."""
    entry: dict[Cell, int] = {}
    for cell in {cell for cell, _ in evidence}:
        rung = 0
        while rung < rungs - 1:
            attempts, passes = evidence.get((cell, rung), (0.0, 0.0))
            if attempts < skip_after or passes > 0.0:
                break
            rung += 1
        if rung:
            entry[cell] = rung
    return entry


def cell_evidence(
    gateway: LLMGateway,
    db: Database,
    environments: Mapping[str, Environment],
    harnesses: Mapping[str, HarnessSpec],
    *,
    run_id: str,
    model_version: str,
    generation: int,
) -> dict[Cell, CellEvidence]:
    rollouts = rollout_evidence(
        db, run_id=run_id, model_version=model_version, harnesses=harnesses, generation=generation
    )
    evidence: dict[Cell, CellEvidence] = {}
    for name, env in environments.items():
        student = student_scores(gateway, db, env, model_version, harnesses[name])
        for difficulty in env.difficulties:
            attempts, passes = rollouts.get((name, difficulty), (0.0, 0.0))
            evidence[(name, difficulty)] = CellEvidence(
                student_greedy=student.get(difficulty), teacher_attempts=attempts, teacher_passes=passes
            )
    return evidence
