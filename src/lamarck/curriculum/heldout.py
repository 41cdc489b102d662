"""Fixed, versioned evaluation slices, and training-task generation that can never reach them.

Three slices, one purpose each:

- ``gate`` (``heldout_set``): held-out seeds, training families. The promotion gate, and nothing else.
- ``report`` (``report_set``): held-out seeds; where the environment declares ``report_families`` (arithmetic,
  python_functions), only those families, which training, dev and gate never use, so the slice measures transfer
  to new wording or to functions of a new kind. Elsewhere it is held-out seeds disjoint from the gate's. No
  decision may ever look at it.
- ``dev`` (``dev_set``): a fixed block of training seeds (``DEV_SEEDS``) that training draws never use, for the
  loop's own repeated decisions, so they do not spend the gate.

Training is kept away from all three in three ways:

1. seeds: slices come from ``HELDOUT_SEEDS`` and ``DEV_SEEDS``; ``training_task`` draws from ``DRAW_SEEDS``.
2. prompts: a training task whose normalised prompt is reserved is rejected and redrawn.
3. keys: a task's canonical key is its underlying computation (arithmetic: the expression; string_ops: input text
   and ops; python_functions: family and constants), given by the environment's optional ``task_key(task)``.
   Where a level is *key-protected*, a training draw with a reserved key is rejected too, and
   ``is_heldout_task`` catches a reserved task reworded with new names.

Key protection rule (small spaces): reserving 150 keys at a level with few distinct computations (arithmetic
level 1 has 72 expressions) would leave training almost nothing, and there knowing the computation *is* the
skill. So a level is key-protected only if its three slices fill with pairwise distinct keys and at most
``MAX_KEY_COLLISION_RATE`` of ``PROBE_DRAWS`` fixed training draws hit a reserved key. Other levels are protected
by seed and prompt only; ``protected_levels`` says which are which.

``heldout_set(per_level=n)`` (and the other slices) is a prefix of the reserved tasks, so every size is
protected. A generator change alters the sets: bump the version and record ``heldout_digest`` with evaluation
results. Versions are per environment, since a version names one generator's sets: ``VERSIONS`` gives each name
its own seed block, ``CURRENT_VERSIONS`` the version an environment uses now (``CURRENT_VERSION`` where it has no
entry), and ``RETIRED_VERSIONS`` (every environment) or ``RETIRED_FOR`` (one environment) the names whose
generator is gone. To bump one environment: add the next name to ``VERSIONS``, point its ``CURRENT_VERSIONS``
entry at it and retire its old one in ``RETIRED_FOR``; other environments keep their sets. Functions whose
``version`` is None use the environment's current version.
"""

from __future__ import annotations

import hashlib
import logging
import random
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from lamarck.curriculum.environment import Environment, TaskSpec, TrainingNotAllowed, prompt_fingerprint
from lamarck.curriculum.registry import get_environment

logger = logging.getLogger(__name__)

Slice = Literal["gate", "report", "dev"]
SLICES: tuple[Slice, ...] = ("gate", "report", "dev")

TRAINING_SEEDS = range(0, 1_000_000_000)
DEV_SEEDS = range(999_000_000, 1_000_000_000)
DRAW_SEEDS = range(TRAINING_SEEDS.start, DEV_SEEDS.start)
HELDOUT_SEEDS = range(1_000_000_000, 1_100_000_000)
VERSIONS: dict[str, int] = {"v2": 1, "v3": 2}  # each name's seed block
RETIRED_VERSIONS: dict[str, str] = {
    "v1": "the generators changed (arithmetic template families, easier string_ops levels, varied phrasing)",
}
RETIRED_FOR: dict[str, dict[str, str]] = {
    "python_functions": {
        "v2": "python_functions changed: constants widened so every level is key-protected, report-only families",
    },
    "string_ops": {
        "v2": "string_ops changed: a tool-named level 1 first (levels shift up one), tools for the ops, one-step tasks",
    },
}
CURRENT_VERSION = "v2"  # for environments without an entry in CURRENT_VERSIONS
CURRENT_VERSIONS: dict[str, str] = {"python_functions": "v3", "string_ops": "v3"}
DEFAULT_PER_LEVEL = 20
RESERVED_PER_LEVEL = 50
PROBE_DRAWS = 100
MAX_KEY_COLLISION_RATE = 0.1
_SLOTS_PER_LEVEL = 1_000  # seed indices available per level, slice and version (duplicates are skipped)
_SLOTS_PER_VERSION = 1_000_000
_REPORT_OFFSET = _SLOTS_PER_VERSION // 2
_DEV_SLOTS_PER_VERSION = 100_000

assert TRAINING_SEEDS.stop <= HELDOUT_SEEDS.start and DEV_SEEDS.stop == TRAINING_SEEDS.stop


class HeldoutCollision(RuntimeError):
    """No training task outside the reserved slices could be drawn."""


@dataclass(frozen=True)
class Reserved:
    """Every reserved task of one environment and version, per slice and level (in ``env.difficulties`` order)."""

    slices: dict[Slice, tuple[tuple[TaskSpec, ...], ...]]
    fingerprints: frozenset[str]
    keys: frozenset[str]
    protected: frozenset[int]


def task_rng(environment: str, difficulty: int, seed: int) -> random.Random:
    """The generator's randomness for one task; string seeding is stable across processes and platforms."""
    return random.Random(f"{environment}/{difficulty}/{seed}")


def task_key(task: TaskSpec, env: Environment | None = None) -> str:
    """The canonical key of a task's underlying computation; its normalised prompt where the environment has none."""
    env = env or get_environment(task.environment)
    key_of = getattr(env, "task_key", None)
    if callable(key_of):
        try:
            return f"{task.environment}:{key_of(task)}"
        except (KeyError, TypeError, ValueError):
            logger.debug("%s: task without a computable key; using its prompt", task.environment)
    return f"{task.environment}:prompt:{task.fingerprint}"


def current_version(environment: str) -> str:
    """The held-out version ``environment`` uses now."""
    return CURRENT_VERSIONS.get(environment, CURRENT_VERSION)


def live_versions(environment: str) -> list[str]:
    """Every version of ``environment`` whose sets still exist: none newer than its current, none retired."""
    newest = VERSIONS[current_version(environment)]
    retired = RETIRED_FOR.get(environment, {})
    return [v for v, block in VERSIONS.items() if block <= newest and v not in retired and v not in RETIRED_VERSIONS]


def set_name(environment: str, version: str | None = None, slice_: Slice = "gate") -> str:
    kind = "heldout" if slice_ == "gate" else slice_
    return f"{environment}-{kind}-{version or current_version(environment)}"


def heldout_seed(version: str, difficulty: int, index: int, slice_: Slice = "gate") -> int:
    _check_version(version)
    if not 0 <= index < _SLOTS_PER_LEVEL or not 0 <= difficulty < _DEV_SLOTS_PER_VERSION // _SLOTS_PER_LEVEL:
        raise ValueError(f"held-out index {index} or difficulty {difficulty} out of range")
    if slice_ == "dev":
        seed = DEV_SEEDS.start + VERSIONS[version] * _DEV_SLOTS_PER_VERSION + difficulty * _SLOTS_PER_LEVEL + index
        assert seed in DEV_SEEDS
        return seed
    offset = _REPORT_OFFSET if slice_ == "report" else 0
    seed = HELDOUT_SEEDS.start + VERSIONS[version] * _SLOTS_PER_VERSION + offset + difficulty * _SLOTS_PER_LEVEL
    seed += index
    assert seed in HELDOUT_SEEDS
    return seed


def heldout_set(
    environment: str,
    version: str | None = None,
    *,
    per_level: int = DEFAULT_PER_LEVEL,
    env: Environment | None = None,
) -> list[TaskSpec]:
    """The gate slice: ``per_level`` held-out tasks of the training families at every difficulty.

    Evaluation-only environments (``training_allowed = False``) return their whole fixed eval set.
    """
    return slice_set(environment, "gate", version, per_level=per_level, env=env)


def report_set(
    environment: str,
    version: str | None = None,
    *,
    per_level: int = DEFAULT_PER_LEVEL,
    env: Environment | None = None,
) -> list[TaskSpec]:
    """The report slice: held-out seeds, report families only where the environment has them. Never for decisions."""
    return slice_set(environment, "report", version, per_level=per_level, env=env)


def dev_set(
    environment: str,
    version: str | None = None,
    *,
    per_level: int = DEFAULT_PER_LEVEL,
    env: Environment | None = None,
) -> list[TaskSpec]:
    """The dev slice: fixed training-family tasks from ``DEV_SEEDS``, for the loop's own decisions."""
    return slice_set(environment, "dev", version, per_level=per_level, env=env)


def slice_set(
    environment: str,
    slice_: Slice,
    version: str | None = None,
    *,
    per_level: int = DEFAULT_PER_LEVEL,
    env: Environment | None = None,
) -> list[TaskSpec]:
    """``per_level`` tasks of one slice at every difficulty: deterministic, deduplicated, copies."""
    if not 1 <= per_level <= RESERVED_PER_LEVEL:
        raise ValueError(f"per_level must be 1..{RESERVED_PER_LEVEL} (the reserved size), got {per_level}")
    if slice_ not in SLICES:
        raise ValueError(f"unknown slice {slice_!r}: use one of {', '.join(SLICES)}")
    env = env or get_environment(environment)
    if not env.training_allowed:
        if slice_ == "dev":
            raise TrainingNotAllowed(f"{env.name} is evaluation-only: it has no dev slice")
        tasks = _eval_only_set(env)
    else:
        tasks = [task for level in reserved(env, version).slices[slice_] for task in level[:per_level]]
    return [task.model_copy(deep=True) for task in tasks]


def digest(tasks: Iterable[TaskSpec]) -> str:
    """sha256 over the tasks' fingerprints in order: store it with evaluations to notice a changed set."""
    hashed = hashlib.sha256()
    for task in tasks:
        hashed.update(task.fingerprint.encode())
    return hashed.hexdigest()


def heldout_digest(environment: str, version: str | None = None, *, per_level: int = DEFAULT_PER_LEVEL) -> str:
    return digest(heldout_set(environment, version, per_level=per_level))


def heldout_fingerprints(
    environment: str, version: str | None = None, *, env: Environment | None = None
) -> frozenset[str]:
    """Normalised prompts of every reserved task (all three slices) of one version."""
    env = env or get_environment(environment)
    if not env.training_allowed:
        return frozenset(task.fingerprint for task in _eval_only_set(env))
    return reserved(env, version).fingerprints


def protected_levels(environment: str, version: str | None = None, *, env: Environment | None = None) -> list[int]:
    """The levels where reserved tasks are protected by key as well as by seed and prompt."""
    env = env or get_environment(environment)
    return sorted(reserved(env, version).protected) if env.training_allowed else []


def is_heldout(environment: str, prompt: str) -> bool:
    """Whether ``prompt`` (normalised) is a reserved task (any slice) of any current version of ``environment``."""
    fingerprint = prompt_fingerprint(prompt)
    return any(fingerprint in heldout_fingerprints(environment, version) for version in live_versions(environment))


def is_heldout_task(task: TaskSpec, *, env: Environment | None = None) -> bool:
    """Whether ``task`` is a reserved task, by its prompt or, at key-protected levels, by its computation.

    A reserved arithmetic task reworded with new names and items keeps its expression, so it is caught.
    """
    env = env or get_environment(task.environment)
    if not env.training_allowed:
        return task.fingerprint in heldout_fingerprints(env.name, env=env)
    key = task_key(task, env)
    for version in live_versions(env.name):
        held = reserved(env, version)
        if task.fingerprint in held.fingerprints or key in held.keys:
            return True
    return False


def training_task(env: Environment, difficulty: int, rng: random.Random, *, max_tries: int = 100) -> TaskSpec:
    """A fresh training task: a seed from ``DRAW_SEEDS``, outside every reserved slice by prompt and by key."""
    if not env.training_allowed:
        raise TrainingNotAllowed(f"{env.name} is evaluation-only and gives no training tasks")
    held = [reserved(env, version) for version in live_versions(env.name)]
    for _ in range(max_tries):
        seed = rng.randrange(DRAW_SEEDS.start, DRAW_SEEDS.stop)
        task = env.generate(difficulty, task_rng(env.name, difficulty, seed))
        key = task_key(task, env)
        if not any(task.fingerprint in h.fingerprints or key in h.keys for h in held):
            return task.model_copy(update={"seed": seed, "source_id": f"{env.name}/train/d{difficulty}/{seed}"})
        logger.debug("training draw for %s d%d collided with a reserved task; redrawing", env.name, difficulty)
    raise HeldoutCollision(
        f"{env.name} d{difficulty}: {max_tries} draws all hit reserved tasks; the level's space is too small"
    )


_RESERVED: dict[tuple[str, type, str], Reserved] = {}


def reserved(env: Environment, version: str | None = None) -> Reserved:
    """The reserved tasks, cached per (environment, class, version): generation ignores instance state."""
    version = version or current_version(env.name)
    _check_version(version, env.name)
    cache_key = (env.name, type(env), version)
    if cache_key not in _RESERVED:
        _RESERVED[cache_key] = _generate_reserved(env, version)
    return _RESERVED[cache_key]


def _check_version(version: str, environment: str | None = None) -> None:
    """Raise unless ``version`` exists (and, given ``environment``, is one of that environment's live versions)."""
    use = current_version(environment) if environment else CURRENT_VERSION
    if version in RETIRED_VERSIONS:
        raise ValueError(f"held-out version {version!r} is retired ({RETIRED_VERSIONS[version]}); use {use}")
    if version not in VERSIONS:
        raise ValueError(f"unknown held-out version {version!r}: known versions are {', '.join(VERSIONS)}")
    if environment is None:
        return
    retired = RETIRED_FOR.get(environment, {})
    if version in retired:
        raise ValueError(f"{environment}: held-out version {version!r} is retired ({retired[version]}); use {use}")
    if version not in live_versions(environment):
        raise ValueError(f"{environment}: held-out version {version!r} is not in use yet; its current version is {use}")


def _generate_reserved(env: Environment, version: str) -> Reserved:
    per_slice: dict[Slice, list[tuple[TaskSpec, ...]]] = {slice_: [] for slice_ in SLICES}
    fingerprints: set[str] = set()
    keys: set[str] = set()
    protected: set[int] = set()
    seen: set[str] = set()  # across levels too: easy levels can share prompts (string_ops 1 and 3)
    for difficulty in env.difficulties:
        marks = set(seen)
        level = _level_slices(env, version, difficulty, marks, by_key=True)
        by_key = level is not None
        if level is None:
            marks = set(seen)
            level = _level_slices(env, version, difficulty, marks, by_key=False)
            assert level is not None
        seen = marks
        level_tasks = [task for tasks in level.values() for task in tasks]
        level_keys = {task_key(task, env) for task in level_tasks}
        if by_key and _collision_rate(env, difficulty, level_keys) <= MAX_KEY_COLLISION_RATE:
            protected.add(difficulty)
            keys |= level_keys
        fingerprints |= {task.fingerprint for task in level_tasks}
        for slice_ in SLICES:
            per_slice[slice_].append(level[slice_])
    return Reserved(
        slices={slice_: tuple(levels) for slice_, levels in per_slice.items()},
        fingerprints=frozenset(fingerprints),
        keys=frozenset(keys),
        protected=frozenset(protected),
    )


def _level_slices(
    env: Environment, version: str, difficulty: int, seen: set[str], *, by_key: bool
) -> dict[Slice, tuple[TaskSpec, ...]] | None:
    """The three slices of one level, distinct by prompt (and by key with ``by_key``) from ``seen`` and each other.

    Adds what it takes to ``seen``. With ``by_key``, None when the level's space cannot fill the slices; without,
    short slices are logged.
    """
    out: dict[Slice, tuple[TaskSpec, ...]] = {}
    report_split = bool(getattr(env, "report_families", ()))
    for slice_ in SLICES:
        level: list[TaskSpec] = []
        for index in range(_SLOTS_PER_LEVEL):
            seed = heldout_seed(version, difficulty, index, slice_)
            rng = task_rng(env.name, difficulty, seed)
            if slice_ == "report" and report_split:
                task = env.generate(difficulty, rng, split="report")  # type: ignore[call-arg]
            else:
                task = env.generate(difficulty, rng)
            marks = {task.fingerprint, task_key(task, env)} if by_key else {task.fingerprint}
            if marks & seen:
                continue
            seen |= marks
            source_id = f"{set_name(env.name, version, slice_)}/d{difficulty}/{len(level)}"
            level.append(task.model_copy(update={"seed": seed, "source_id": source_id}))
            if len(level) == RESERVED_PER_LEVEL:
                break
        if len(level) < RESERVED_PER_LEVEL:
            if by_key:
                return None
            logger.warning(
                "%s d%d: only %d distinct tasks", set_name(env.name, version, slice_), difficulty, len(level)
            )
        out[slice_] = tuple(level)
    return out


def _collision_rate(env: Environment, difficulty: int, level_keys: set[str]) -> float:
    """The share of ``PROBE_DRAWS`` fixed training draws whose key is among the level's reserved keys."""
    hits = 0
    for seed in range(DRAW_SEEDS.start, DRAW_SEEDS.start + PROBE_DRAWS):
        task = env.generate(difficulty, task_rng(env.name, difficulty, seed))
        hits += task_key(task, env) in level_keys
    return hits / PROBE_DRAWS


def _eval_only_set(env: Environment) -> list[TaskSpec]:
    eval_set = getattr(env, "eval_set", None)
    if eval_set is None:
        raise TypeError(f"{env.name} is evaluation-only but has no eval_set()")
    return list(eval_set())
