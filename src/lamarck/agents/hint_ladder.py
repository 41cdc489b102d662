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
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from pydantic import BaseModel, Field

from lamarck.agents.executor import Attempt, Executor, ExecutorInput
from lamarck.agents.harness import FewShotExample
from lamarck.agents.teacher import LADDER, HintLevel, NoHelp, demonstration, help_for
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
    rung's index in ``sample_index`` (see ``RUNG_STRIDE``), whatever rungs were skipped.

    Each task climbs on its own, so one task's next rung runs beside another's first and the engine's batch stays
    full instead of draining at the end of every rung. The tasks wait for each other only before a demonstrations
    rung, which shows every success verified below it."""
    entry = dict(start or {})
    pool = _ExamplePool(demonstrations or {})
    steps: list[_RungStep] = []
    solved_at: dict[int, HintLevel] = {}
    unsolved = list(range(len(request.tasks)))
    width = max(1, executor.max_concurrency // max(1, request.samples_per_task or 1))
    for segment in _segments(rungs):
        if not unsolved:
            break
        pool.settle()

        def climb(index: int, segment: list[tuple[int, HintLevel]] = segment) -> list[_RungStep]:
            return _climb(executor, request, environments, index, segment, entry, pool)

        with ThreadPoolExecutor(max_workers=min(width, len(unsolved))) as threads:
            for climbed in threads.map(climb, unsolved):
                steps.extend(climbed)
        for step in steps:
            if step.solved:
                solved_at.setdefault(step.task, step.level)
        unsolved = [index for index in unsolved if index not in solved_at]
    pool.settle()
    steps.sort(key=lambda step: (step.rung, step.task))
    outcome = LadderOutcome(attempts=[], passed=[], solved_at=dict(sorted(solved_at.items())))
    for step in steps:
        outcome.attempts.extend(step.attempts)
        outcome.passed.extend(step.passed)
    for rung, level in enumerate(rungs):
        reached = [step for step in steps if step.rung == rung]
        if not reached:
            continue
        tried = [step for step in reached if step.attempts]
        outcome.rungs.append(
            RungReport(
                level=level,
                tasks=len(tried),
                solved=sum(step.solved for step in tried),
                unavailable=sum(step.unavailable for step in reached),
                skipped=sum(step.skipped for step in reached),
                attempts=sum(len(step.attempts) for step in tried),
                seconds=max((s.ended for s in tried), default=0.0) - min((s.began for s in tried), default=0.0),
            )
        )
    outcome.demonstrations = pool.examples
    return outcome


@dataclass
class _RungStep:
    """One task at one rung: its attempts, or why it made none (no help of that kind, or it entered above)."""

    task: int
    rung: int
    level: HintLevel
    attempts: list[Attempt] = field(default_factory=list)
    passed: list[bool] = field(default_factory=list)
    solved: bool = False
    unavailable: bool = False
    skipped: bool = False
    began: float = 0.0
    ended: float = 0.0


class _ExamplePool:
    """The worked examples per environment, added to from many tasks' threads. ``settle`` puts the examples added
    since in the order of (rung, task, sample), so what a demonstrations rung is shown does not depend on which
    thread finished first."""

    def __init__(self, seed: Mapping[str, Sequence[FewShotExample]]) -> None:
        self._lock = threading.Lock()
        self.examples: dict[str, list[FewShotExample]] = {env: list(demos) for env, demos in seed.items()}
        self._new: list[tuple[tuple[int, int, int], str, FewShotExample]] = []

    def add(self, key: tuple[int, int, int], environment: str, example: FewShotExample) -> None:
        with self._lock:
            self._new.append((key, environment, example))

    def settle(self) -> None:
        with self._lock:
            for _, environment, example in sorted(self._new, key=lambda item: item[0]):
                known = self.examples.setdefault(environment, [])
                if example not in known:
                    known.append(example)
            self._new.clear()

    def pick(self, task: TaskSpec, index: int) -> list[FewShotExample]:
        with self._lock:
            return _pick(self.examples.get(task.environment, []), task, index)


def _segments(rungs: Sequence[HintLevel]) -> list[list[tuple[int, HintLevel]]]:
    """The rungs, cut before each demonstrations rung (where every task's earlier successes must be in)."""
    segments: list[list[tuple[int, HintLevel]]] = [[]]
    for rung, level in enumerate(rungs):
        if level is HintLevel.DEMONSTRATIONS and segments[-1]:
            segments.append([])
        segments[-1].append((rung, level))
    return [segment for segment in segments if segment]


def _climb(
    executor: Executor,
    request: ExecutorInput,
    environments: Mapping[str, Environment],
    index: int,
    segment: list[tuple[int, HintLevel]],
    entry: Mapping[int, int],
    pool: _ExamplePool,
) -> list[_RungStep]:
    """Task ``index`` up the rungs of ``segment`` until a sample solves it."""
    task = request.tasks[index]
    environment = environments[task.environment]
    steps: list[_RungStep] = []
    for rung, level in segment:
        step = _RungStep(task=index, rung=rung, level=level)
        steps.append(step)
        if entry.get(index, 0) > rung:
            step.skipped = True
            continue
        try:
            help = help_for(task, environment, level, pool.pick(task, index))
        except NoHelp as exc:
            step.unavailable = True
            log.debug("ladder: no %s help for task %d: %s", level.value, index, exc)
            continue
        step.began = time.perf_counter()
        out = executor.run(
            request.model_copy(
                update={"tasks": [task], "help": {0: help}, "seed": request.seed + 7919 * rung + 104729 * index}
            )
        )
        step.ended = time.perf_counter()
        for attempt in out.attempts:
            passed = _passed(environment, task, attempt)
            step.attempts.append(
                attempt.model_copy(
                    update={"task_index": index, "sample_index": rung * RUNG_STRIDE + attempt.sample_index}
                )
            )
            step.passed.append(passed)
            if not passed:
                continue
            step.solved = True
            if process_problem(task, attempt.trajectory, attempt.answer or "") is None:
                example = demonstration(task, attempt.trajectory)
                if example is not None:
                    pool.add((rung, index, attempt.sample_index), task.environment, example)
        if step.solved:
            break
    return steps


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
