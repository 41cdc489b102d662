"""The learnable-cells frontier: train where the student fails and the teacher sometimes succeeds.

What distillation can change is a task the student gets wrong greedily and the teacher gets right: a mastered cell
teaches nothing new, and a cell the teacher never solves gives no rows. So each (environment, difficulty) cell below
``mastered`` greedy student success is weighted by what its tasks are expected to teach: the rows a task yields, the
chance the student fails it (1 - s) times the chance the teacher solves it at some rung of its hint ladder (t,
counted per task, not per sample), times how much such a row can still move the student, which falls with the
student's own success there (1 - s again): (1 - s)^2 t. Weighting by rows alone, (1 - s) t, sent a promoted
student's batches back to easy levels (an arithmetic hour of commit 0a024a0: the four jobs after its promotion drew
most of their rows from levels 1-3, and most without a hint, with 58% of the champion's samples passing; they
started at a training loss of 0.07-0.28 against 0.64-0.67 before it, and none beat the champion). An earlier
weighting, the variance t(1 - t) of the teacher's per-sample success, kept the batch at level 2: there unaided
samples passed half the time, while at higher levels the ladder's hinted successes were outnumbered by its failed
rungs. Evidence is kept per (model version, harness) by the caller and decays, so the frontier moves after a
promotion. A cell the teacher has not solved yet at any rung is "out of reach" and keeps only a small exploration
weight; the first untried level above the highest reached one (solved by the teacher, or by the student greedily) is
explored.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence

from pydantic import BaseModel, Field

from lamarck.curriculum.environment import Environment, TaskSpec
from lamarck.curriculum.frontier import FrontierSlot

Cell = tuple[str, int]


class CellEvidence(BaseModel):
    """What one cell's recent rollouts and the student's development-slice score say (decayed counts)."""

    student_greedy: float | None = Field(None, ge=0.0, le=1.0)  # None: not evaluated for this release yet
    teacher_attempts: float = Field(
        0.0, ge=0.0
    )  # tasks the teacher attempted (decayed), whatever its samples and rungs
    teacher_passes: float = Field(0.0, ge=0.0)  # of those, tasks some sample solved at some rung


class LearnableFrontier:
    def __init__(
        self,
        ladders: Mapping[str, Sequence[int]],
        *,
        mastered: float = 0.8,
        explore_weight: float = 0.02,
        min_attempts: float = 4.0,
    ) -> None:
        if not ladders or any(not ladder for ladder in ladders.values()):
            raise ValueError("give at least one environment with at least one difficulty level")
        if not 0.0 < mastered <= 1.0:
            raise ValueError(f"mastered must be in (0, 1], got {mastered}")
        self.ladders = {name: tuple(sorted(ladders[name])) for name in sorted(ladders)}
        self.mastered = mastered
        self.explore_weight = explore_weight
        self.min_attempts = min_attempts

    @classmethod
    def from_environments(cls, environments: Iterable[Environment], **options: float) -> LearnableFrontier:
        """Frontier over the training environments; evaluation-only ones are left out."""
        return cls({env.name: tuple(env.difficulties) for env in environments if env.training_allowed}, **options)

    def weights(self, evidence: Mapping[Cell, CellEvidence]) -> dict[Cell, tuple[float, str]]:
        """Each selectable cell's weight and why."""
        found: dict[Cell, tuple[float, str]] = {}
        for name, ladder in self.ladders.items():
            reached = [d for d in ladder if (e := evidence.get((name, d))) is not None and _reached(e)]
            ceiling = max(reached) if reached else ladder[0]
            for difficulty in ladder:
                e = evidence.get((name, difficulty), CellEvidence())
                if e.student_greedy is not None and e.student_greedy >= self.mastered:
                    continue
                if e.teacher_attempts < self.min_attempts:
                    if difficulty <= ceiling or difficulty == _next_above(ladder, ceiling):
                        found[(name, difficulty)] = (0.25, "explore: too few attempts to judge")
                    continue
                p = (e.teacher_passes + 1.0) / (e.teacher_attempts + 2.0)
                if e.teacher_passes == 0:
                    found[(name, difficulty)] = (self.explore_weight, "out of reach: no teacher sample solved it")
                    continue
                fails = 1.0 - (e.student_greedy if e.student_greedy is not None else 0.5)
                student = "?" if e.student_greedy is None else f"{e.student_greedy:.2f}"
                found[(name, difficulty)] = (
                    fails * fails * p,
                    f"learnable: teacher solves {p:.2f} of tasks, student {student}",
                )
        return found

    def select(
        self,
        evidence: Mapping[Cell, CellEvidence],
        batch_size: int,
        *,
        rng: random.Random,
        failed_tasks: Sequence[TaskSpec] = (),
    ) -> list[FrontierSlot]:
        """``batch_size`` cells drawn in proportion to their weight (a batch spreads over the learnable cells).
        Failed tasks are not replayed: the hint ladder already retries a failed task with more help."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        weighted = self.weights(evidence)
        if not weighted:  # everything mastered: keep the hardest level of each ladder busy
            weighted = {(name, ladder[-1]): (1.0, "all mastered: top level") for name, ladder in self.ladders.items()}
        cells = sorted(weighted)
        weights = [weighted[cell][0] for cell in cells]
        chosen = rng.choices(cells, weights=weights, k=batch_size)
        return [FrontierSlot(environment=env, difficulty=d, reason=weighted[(env, d)][1]) for env, d in chosen]


def _reached(evidence: CellEvidence) -> bool:
    """A level counts as reached when some teacher sample solved a task there or the student solves some greedily.
    The second matters after a promotion: the new release has no rollouts of its own yet, and without it the band
    to explore would collapse to the ladder's first level, which the student has mastered, leaving only the top."""
    return evidence.teacher_passes > 0 or (evidence.student_greedy or 0.0) > 0.0


def _next_above(ladder: Sequence[int], level: int) -> int | None:
    above = [d for d in ladder if d > level]
    return above[0] if above else None
