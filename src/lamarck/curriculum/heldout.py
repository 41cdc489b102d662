"""Fixed, versioned held-out evaluation sets, and training-task generation that can never reach them.

Two guarantees keep training and evaluation apart:

1. seeds: held-out tasks come from ``HELDOUT_SEEDS``, training tasks from ``TRAINING_SEEDS``; the ranges are
   disjoint, and every task's generator is seeded from (environment, difficulty, seed).
2. prompts: different seeds can still yield the same prompt (the easy levels have small spaces), so a training
   task whose normalised prompt matches a reserved held-out prompt is rejected and redrawn (``training_task``).
   Tasks from elsewhere (an LLM proposer) are checked with ``is_heldout``.

The reserved set per level is the first ``RESERVED_PER_LEVEL`` tasks; ``heldout_set(per_level=n)`` is a prefix
of it, so every size the gate uses is protected. A generator change alters the sets: bump the version
(``VERSIONS``) and record ``heldout_digest`` with evaluation results.
"""

from __future__ import annotations

import hashlib
import logging
import random
from collections.abc import Iterable

from lamarck.curriculum.environment import Environment, TaskSpec, TrainingNotAllowed, prompt_fingerprint
from lamarck.curriculum.registry import get_environment

logger = logging.getLogger(__name__)

TRAINING_SEEDS = range(0, 1_000_000_000)
HELDOUT_SEEDS = range(1_000_000_000, 1_100_000_000)
VERSIONS: dict[str, int] = {"v1": 0}
DEFAULT_PER_LEVEL = 20
RESERVED_PER_LEVEL = 50
_SLOTS_PER_LEVEL = 1_000  # seed indices available per level and version (duplicates are skipped)
_SLOTS_PER_VERSION = 1_000_000

assert TRAINING_SEEDS.stop <= HELDOUT_SEEDS.start


class HeldoutCollision(RuntimeError):
    """No training task outside the held-out set could be drawn."""


def task_rng(environment: str, difficulty: int, seed: int) -> random.Random:
    """The generator's randomness for one task; string seeding is stable across processes and platforms."""
    return random.Random(f"{environment}/{difficulty}/{seed}")


def set_name(environment: str, version: str = "v1") -> str:
    return f"{environment}-heldout-{version}"


def heldout_seed(version: str, difficulty: int, index: int) -> int:
    if version not in VERSIONS:
        raise ValueError(f"unknown held-out version {version!r}: known versions are {', '.join(VERSIONS)}")
    if not 0 <= index < _SLOTS_PER_LEVEL or not 0 <= difficulty < _SLOTS_PER_VERSION // _SLOTS_PER_LEVEL:
        raise ValueError(f"held-out index {index} or difficulty {difficulty} out of range")
    seed = HELDOUT_SEEDS.start + VERSIONS[version] * _SLOTS_PER_VERSION + difficulty * _SLOTS_PER_LEVEL + index
    assert seed in HELDOUT_SEEDS
    return seed


def heldout_set(
    environment: str, version: str = "v1", *, per_level: int = DEFAULT_PER_LEVEL, env: Environment | None = None
) -> list[TaskSpec]:
    """The held-out tasks of one environment: ``per_level`` at every difficulty, deterministic, deduplicated.

    Evaluation-only environments (``training_allowed = False``) return their whole fixed eval set.
    """
    if not 1 <= per_level <= RESERVED_PER_LEVEL:
        raise ValueError(f"per_level must be 1..{RESERVED_PER_LEVEL} (the reserved size), got {per_level}")
    env = env or get_environment(environment)
    if not env.training_allowed:
        tasks = _eval_only_set(env)
    else:
        reserved = _reserved(env, version)
        tasks = [task for level in reserved for task in level[:per_level]]
    return [task.model_copy(deep=True) for task in tasks]


def heldout_fingerprints(environment: str, version: str = "v1", *, env: Environment | None = None) -> frozenset[str]:
    env = env or get_environment(environment)
    key = (env.name, type(env), version)
    if key not in _FINGERPRINTS:
        if not env.training_allowed:
            tasks: Iterable[TaskSpec] = _eval_only_set(env)
        else:
            tasks = (task for level in _reserved(env, version) for task in level)
        _FINGERPRINTS[key] = frozenset(task.fingerprint for task in tasks)
    return _FINGERPRINTS[key]


def heldout_digest(environment: str, version: str = "v1", *, per_level: int = DEFAULT_PER_LEVEL) -> str:
    """sha256 over the set's fingerprints in order: store it with evaluations to notice a changed set."""
    digest = hashlib.sha256()
    for task in heldout_set(environment, version, per_level=per_level):
        digest.update(task.fingerprint.encode())
    return digest.hexdigest()


def is_heldout(environment: str, prompt: str) -> bool:
    """Whether ``prompt`` (normalised) belongs to any held-out version of ``environment``."""
    fingerprint = prompt_fingerprint(prompt)
    return any(fingerprint in heldout_fingerprints(environment, version) for version in VERSIONS)


def training_task(env: Environment, difficulty: int, rng: random.Random, *, max_tries: int = 100) -> TaskSpec:
    """A fresh training task: a seed from ``TRAINING_SEEDS`` and a prompt outside every held-out set."""
    if not env.training_allowed:
        raise TrainingNotAllowed(f"{env.name} is evaluation-only and gives no training tasks")
    reserved = frozenset().union(*(heldout_fingerprints(env.name, version, env=env) for version in VERSIONS))
    for _ in range(max_tries):
        seed = rng.randrange(TRAINING_SEEDS.start, TRAINING_SEEDS.stop)
        task = env.generate(difficulty, task_rng(env.name, difficulty, seed))
        if task.fingerprint not in reserved:
            return task.model_copy(update={"seed": seed, "source_id": f"{env.name}/train/d{difficulty}/{seed}"})
        logger.debug("training draw for %s d%d collided with a held-out prompt; redrawing", env.name, difficulty)
    raise HeldoutCollision(
        f"{env.name} d{difficulty}: {max_tries} draws all hit held-out prompts; the level's space is too small"
    )


_RESERVED: dict[tuple[str, type, str], tuple[tuple[TaskSpec, ...], ...]] = {}
_FINGERPRINTS: dict[tuple[str, type, str], frozenset[str]] = {}


def _reserved(env: Environment, version: str) -> tuple[tuple[TaskSpec, ...], ...]:
    """The reserved tasks per level, cached per (environment, class, version): generation ignores instance state."""
    key = (env.name, type(env), version)
    if key not in _RESERVED:
        _RESERVED[key] = _generate_reserved(env, version)
    return _RESERVED[key]


def _generate_reserved(env: Environment, version: str) -> tuple[tuple[TaskSpec, ...], ...]:
    name = env.name
    levels = []
    for difficulty in env.difficulties:
        seen: set[str] = set()
        level: list[TaskSpec] = []
        for index in range(_SLOTS_PER_LEVEL):
            seed = heldout_seed(version, difficulty, index)
            task = env.generate(difficulty, task_rng(name, difficulty, seed))
            if task.fingerprint in seen:
                continue
            seen.add(task.fingerprint)
            source_id = f"{set_name(name, version)}/d{difficulty}/{len(level)}"
            level.append(task.model_copy(update={"seed": seed, "source_id": source_id}))
            if len(level) == RESERVED_PER_LEVEL:
                break
        if len(level) < RESERVED_PER_LEVEL:
            logger.warning("%s d%d: only %d distinct held-out tasks", set_name(name, version), difficulty, len(level))
        levels.append(tuple(level))
    return tuple(levels)


def _eval_only_set(env: Environment) -> list[TaskSpec]:
    eval_set = getattr(env, "eval_set", None)
    if eval_set is None:
        raise TypeError(f"{env.name} is evaluation-only but has no eval_set()")
    return list(eval_set())
