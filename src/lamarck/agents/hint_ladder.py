"""Rollouts with the weakest help that works, per task: the teacher climbs the hint ladder only where it must.

All tasks are first attempted without help. Tasks no sample solved are attempted again with the next rung
(a glossary, then the model's own verified successes as worked examples, then part and finally all of the
reference solution), until every task is solved or the ladder ends. Each attempt records its rung, so the
dataset can say how many rows came from each source, and a growing model needs ever less help.

A task may enter the ladder above its bottom rung (``start``): where the current model has recently failed every
task of its cell at a rung, climbing through that rung again buys no rows, only rollouts (``dead_rungs``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, Field

from lamarck.agents.executor import Attempt, Executor, ExecutorInput
from lamarck.agents.harness import FewShotExample
from lamarck.agents.teacher import LADDER, HintLevel, NoHelp, TeacherHelp, demonstration, help_for
from lamarck.curriculum.environment import Environment, TaskSpec
from lamarck.training.process_filter import process_problem

log = logging.getLogger(__name__)

DEMONSTRATIONS_PER_TASK = 3
RUNG_STRIDE = 64
"""An attempt's ``sample_index`` is its rung's index x RUNG_STRIDE + its sample (samples per task are at most 64),
so the rung can be read back from a stored episode."""


def rung_index(sample_index: int) -> int:
    """The ladder rung (index into the run's rungs) an attempt was made at."""
    return sample_index // RUNG_STRIDE


class RungReport(BaseModel):
    level: HintLevel
    tasks: int  # tasks attempted at this rung
    solved: int  # of those, tasks some sample solved
    unavailable: int = 0  # tasks the environment could give no help of this kind
    skipped: int = 0  # unsolved tasks that entered the ladder above this rung
    attempts: int = 0
    seconds: float = 0.0


class LadderOutcome(BaseModel):
    attempts: list[Attempt]  # every rung's attempts; task_index refers to the request's tasks
    passed: list[bool]  # per attempt, the environment's verdict
    solved_at: dict[int, HintLevel] = Field(default_factory=dict)  # task index -> the first rung that solved it
    rungs: list[RungReport] = Field(default_factory=list)
    demonstrations: dict[str, list[FewShotExample]] = Field(default_factory=dict)


def run_ladder(
    executor: Executor,
    request: ExecutorInput,
    environments: Mapping[str, Environment],
    *,
    rungs: Sequence[HintLevel] = LADDER,
    demonstrations: Mapping[str, Sequence[FewShotExample]] | None = None,
    start: Mapping[int, int] | None = None,
) -> LadderOutcome:
    """Climb ``rungs`` for the tasks still unsolved. ``demonstrations`` seeds the worked-example pool per
    environment; verified, process-sound successes of this ladder join it (training tasks only: the caller's).
    ``start`` maps a task index to the index in ``rungs`` where that task enters (default 0). Attempts keep their
    rung's index in ``sample_index`` (see ``RUNG_STRIDE``), whatever rungs were skipped."""
    entry = dict(start or {})
    pool: dict[str, list[FewShotExample]] = {env: list(demos) for env, demos in (demonstrations or {}).items()}
    unsolved = list(range(len(request.tasks)))
    outcome = LadderOutcome(attempts=[], passed=[])
    for rung, level in enumerate(rungs):
        if not unsolved:
            break
        help: dict[int, TeacherHelp] = {}
        unavailable = 0
        skipped = sum(1 for index in unsolved if entry.get(index, 0) > rung)
        for index in unsolved:
            if entry.get(index, 0) > rung:
                continue
            task = request.tasks[index]
            demos = _pick(pool.get(task.environment, []), task, index)
            try:
                help[index] = help_for(task, environments[task.environment], level, demos)
            except NoHelp as exc:
                unavailable += 1
                log.debug("ladder: no %s help for task %d: %s", level.value, index, exc)
        chosen = [index for index in unsolved if index in help]
        if not chosen:
            outcome.rungs.append(RungReport(level=level, tasks=0, solved=0, unavailable=unavailable, skipped=skipped))
            continue
        started = time.perf_counter()
        out = executor.run(
            request.model_copy(
                update={
                    "tasks": [request.tasks[i] for i in chosen],
                    "help": {position: help[i] for position, i in enumerate(chosen)},
                    "seed": request.seed + 7919 * rung,
                }
            )
        )
        solved: set[int] = set()
        for attempt in out.attempts:
            index = chosen[attempt.task_index]
            task = request.tasks[index]
            passed = _passed(environments[task.environment], task, attempt)
            outcome.attempts.append(
                attempt.model_copy(
                    update={"task_index": index, "sample_index": rung * RUNG_STRIDE + attempt.sample_index}
                )
            )
            outcome.passed.append(passed)
            if not passed:
                continue
            solved.add(index)
            outcome.solved_at.setdefault(index, level)
            if process_problem(task, attempt.trajectory, attempt.answer or "") is None:
                example = demonstration(task, attempt.trajectory)
                if example is not None and example not in pool.setdefault(task.environment, []):
                    pool[task.environment].append(example)
        outcome.rungs.append(
            RungReport(
                level=level,
                tasks=len(chosen),
                solved=len(solved),
                unavailable=unavailable,
                skipped=skipped,
                attempts=len(out.attempts),
                seconds=time.perf_counter() - started,
            )
        )
        unsolved = [index for index in unsolved if index not in solved]
    outcome.demonstrations = pool
    return outcome


def _passed(environment: Environment, task: TaskSpec, attempt: Attempt) -> bool:
    if attempt.answer is None:
        return False
    try:
        return environment.verify(task, attempt.answer).passed
    except Exception:  # a verifier bug fails the attempt; the critic reports it when it verifies again
        log.exception("verifier of %s failed", task.environment)
        return False


def _pick(pool: list[FewShotExample], task: TaskSpec, index: int) -> list[FewShotExample]:
    """Up to three worked examples of other tasks, rotating through the pool so tasks see different ones."""
    others = [example for example in pool if example.task != task.prompt]
    if len(others) <= DEMONSTRATIONS_PER_TASK:
        return others
    start = (index * DEMONSTRATIONS_PER_TASK) % len(others)
    return [others[(start + k) % len(others)] for k in range(DEMONSTRATIONS_PER_TASK)]
