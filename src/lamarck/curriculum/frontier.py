"""Frontier selection: the next batch of (environment, difficulty) whose success is near a target.

Each slot draws one Thompson sample of the success probability for every cell, makes each environment's
samples non-increasing in difficulty (weighted isotonic regression, weights = posterior strength, so untried
levels borrow from measured neighbours instead of looking like coin flips), and takes the cell whose sample is
nearest the target. Sampling gives exploration in proportion to uncertainty; fresh samples per slot spread the
batch. A fraction of slots replays recently failed tasks instead (only from cells within reach). Untried levels compete
only one at a time, the first above the highest tried level, so the batch climbs the ladder instead of spreading
over levels that only the prior knows.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from pydantic import BaseModel

from lamarck.curriculum.environment import Environment, TaskSpec

logger = logging.getLogger(__name__)


class FrontierSlot(BaseModel):
    environment: str
    difficulty: int
    reason: str
    replay_task: TaskSpec | None = None


class Posteriors(Protocol):
    """What the selector reads from a profile (``CapabilityProfile`` satisfies it)."""

    def posterior(self, environment: str, difficulty: int) -> tuple[float, float]: ...

    def attempts(self, environment: str, difficulty: int) -> int: ...


class FrontierSelector:
    def __init__(
        self,
        ladders: Mapping[str, Sequence[int]],
        *,
        target: float = 0.5,
        replay_fraction: float = 0.2,
        replay_floor: float = 0.1,
    ) -> None:
        if not ladders or any(not ladder for ladder in ladders.values()):
            raise ValueError("give at least one environment with at least one difficulty level")
        if not 0.0 < target < 1.0:
            raise ValueError(f"target must be in (0, 1), got {target}")
        if not 0.0 <= replay_fraction <= 1.0:
            raise ValueError(f"replay_fraction must be in [0, 1], got {replay_fraction}")
        self.ladders = {name: tuple(sorted(ladders[name])) for name in sorted(ladders)}
        self.target = target
        self.replay_fraction = replay_fraction
        self.replay_floor = replay_floor  # failures in cells whose success is below this are not worth a retry yet

    @classmethod
    def from_environments(cls, environments: Iterable[Environment], **options: float) -> FrontierSelector:
        """Selector over the training environments; evaluation-only ones are left out."""
        ladders = {env.name: tuple(env.difficulties) for env in environments if env.training_allowed}
        return cls(ladders, **options)

    def select(
        self,
        profile: Posteriors,
        batch_size: int,
        *,
        seed: int | None = None,
        rng: random.Random | None = None,
        failed_tasks: Sequence[TaskSpec] = (),
    ) -> list[FrontierSlot]:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        rng = rng or random.Random(seed)
        pool = self._replayable(failed_tasks, profile)
        slots: list[FrontierSlot] = []
        for _ in range(batch_size):
            if pool and rng.random() < self.replay_fraction:
                task = pool.pop(rng.randrange(len(pool)))
                label = task.source_id or task.fingerprint[:12]
                slots.append(
                    FrontierSlot(
                        environment=task.environment,
                        difficulty=task.difficulty,
                        reason=f"replay: failed task {label}",
                        replay_task=task,
                    )
                )
            else:
                slots.append(self._thompson_slot(profile, rng))
        return slots

    def _thompson_slot(self, profile: Posteriors, rng: random.Random) -> FrontierSlot:
        untried = [name for name, ladder in self.ladders.items() if not any(profile.attempts(name, d) for d in ladder)]
        if untried:
            # A flat prior would spread the first batch over every level, most of them hopeless; start at the bottom.
            name = untried[rng.randrange(len(untried))]
            return FrontierSlot(environment=name, difficulty=self.ladders[name][0], reason="cold start: lowest level")
        best: list[tuple[str, int, float]] = []
        best_distance = float("inf")
        for name, ladder in self.ladders.items():
            params = [profile.posterior(name, d) for d in ladder]
            samples = [rng.betavariate(a, b) for a, b in params]
            smoothed = non_increasing(samples, [a + b for a, b in params])
            reachable = climbable(ladder, [profile.attempts(name, d) for d in ladder])
            for difficulty, value in zip(ladder, smoothed, strict=True):
                if difficulty not in reachable:
                    continue
                distance = abs(value - self.target)
                if distance < best_distance - 1e-12:
                    best, best_distance = [(name, difficulty, value)], distance
                elif distance <= best_distance + 1e-12:
                    best.append((name, difficulty, value))
        name, difficulty, value = best[rng.randrange(len(best))] if len(best) > 1 else best[0]
        a, b = profile.posterior(name, difficulty)
        n = profile.attempts(name, difficulty)
        reason = (
            f"thompson: sampled success {value:.2f} nearest target {self.target:.2f} "
            f"(posterior mean {a / (a + b):.2f} over {n} attempts)"
        )
        return FrontierSlot(environment=name, difficulty=difficulty, reason=reason)

    def _replayable(self, failed_tasks: Sequence[TaskSpec], profile: Posteriors) -> list[TaskSpec]:
        pool, seen = [], set()
        for task in failed_tasks:
            if task.difficulty not in self.ladders.get(task.environment, ()):
                logger.debug("not replaying %s d%d: not a training cell", task.environment, task.difficulty)
                continue
            a, b = profile.posterior(task.environment, task.difficulty)
            if a / (a + b) < self.replay_floor:
                logger.debug(
                    "not replaying %s d%d: its cell is out of reach for now", task.environment, task.difficulty
                )
                continue
            if task.fingerprint in seen:
                continue
            seen.add(task.fingerprint)
            pool.append(task)
        return pool


def climbable(ladder: Sequence[int], attempts: Sequence[int]) -> set[int]:
    """The levels a slot may pick: every tried level and the first untried one above the highest tried.

    Untried levels carry only the prior, so a Thompson sample there is a coin flip; letting every such level compete
    spreads a batch over hopeless tasks. Climbing one untried level at a time keeps exploration at the edge."""
    tried = [level for level, n in zip(ladder, attempts, strict=True) if n > 0]
    if not tried:
        return {ladder[0]}
    above = [level for level in ladder if level > max(tried)]
    return set(tried) | ({above[0]} if above else set())


def non_increasing(values: Sequence[float], weights: Sequence[float]) -> list[float]:
    """Weighted least-squares fit of a non-increasing sequence (pool adjacent violators)."""
    blocks: list[list[float]] = []  # [weighted sum, weight, count]
    for value, weight in zip(values, weights, strict=True):
        blocks.append([value * weight, weight, 1])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] < blocks[-1][0] / blocks[-1][1]:
            total, w, count = blocks.pop()
            blocks[-1][0] += total
            blocks[-1][1] += w
            blocks[-1][2] += count
    fitted: list[float] = []
    for total, w, count in blocks:
        fitted.extend([total / w] * int(count))
    return fitted
