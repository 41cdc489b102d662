from __future__ import annotations

import random

import pytest

from lamarck.curriculum import heldout
from lamarck.curriculum.environment import TrainingNotAllowed
from lamarck.curriculum.registry import get_environment

TRAINING_ENVS = ["arithmetic", "python_functions", "string_ops"]


def test_seed_ranges_are_disjoint():
    assert heldout.TRAINING_SEEDS.stop <= heldout.HELDOUT_SEEDS.start
    assert heldout.heldout_seed("v1", 9, 999) in heldout.HELDOUT_SEEDS
    with pytest.raises(ValueError, match="known versions are v1"):
        heldout.heldout_seed("v9", 1, 0)


@pytest.mark.parametrize("name", TRAINING_ENVS)
def test_heldout_set_is_fixed_versioned_and_covers_every_level(name):
    env = get_environment(name)
    tasks = heldout.heldout_set(name, "v1")
    assert len(tasks) == heldout.DEFAULT_PER_LEVEL * len(env.difficulties)
    assert {t.difficulty for t in tasks} == set(env.difficulties)
    assert len({t.fingerprint for t in tasks}) == len(tasks)
    assert all(t.seed in heldout.HELDOUT_SEEDS and t.source_id.startswith(f"{name}-heldout-v1/") for t in tasks)
    again = heldout.heldout_set(name, "v1")
    assert [t.model_dump() for t in again] == [t.model_dump() for t in tasks]
    small = heldout.heldout_set(name, per_level=5)
    assert {t.fingerprint for t in small} <= {t.fingerprint for t in tasks}
    assert heldout.heldout_digest(name) == heldout.heldout_digest(name)
    tasks[0].reference["answer"] = "tampered"  # callers get copies
    assert heldout.heldout_set(name)[0].reference != tasks[0].reference
    with pytest.raises(ValueError, match="per_level"):
        heldout.heldout_set(name, per_level=10_000)


@pytest.mark.parametrize("name", TRAINING_ENVS)
def test_training_generation_never_reaches_heldout(name):
    env = get_environment(name)
    reserved = heldout.heldout_fingerprints(name)
    rng = random.Random(1234)
    for difficulty in env.difficulties:
        for _ in range(600):
            task = heldout.training_task(env, difficulty, rng)
            assert task.seed in heldout.TRAINING_SEEDS
            assert task.fingerprint not in reserved
            assert not heldout.is_heldout(name, task.prompt)


def test_is_heldout_normalises_prompts():
    task = heldout.heldout_set("arithmetic")[3]
    assert heldout.is_heldout("arithmetic", task.prompt)
    assert heldout.is_heldout("arithmetic", "  " + task.prompt.upper().replace(" ", "\n  ") + "\n")
    assert not heldout.is_heldout("arithmetic", task.prompt + " Explain.")
    assert not heldout.is_heldout("string_ops", task.prompt)


def test_collisions_are_redrawn_and_small_spaces_reported():
    class Tiny:
        name, description, answer_format, training_allowed = "tiny", "two prompts", "", True
        difficulties = (1, 2, 3, 4, 5, 6)

        def generate(self, difficulty, rng):
            from lamarck.curriculum.environment import TaskSpec

            return TaskSpec(environment="tiny", difficulty=difficulty, prompt=f"p{difficulty}-{rng.randint(0, 1)}")

        def verify(self, task, answer):
            raise NotImplementedError

        def tools(self):
            return []

    env = Tiny()
    held = heldout.heldout_set("tiny", env=env, per_level=2)
    assert len(held) == 12  # both prompts of each level are reserved...
    with pytest.raises(heldout.HeldoutCollision, match="space is too small"):
        heldout.training_task(env, 1, random.Random(0), max_tries=20)  # ...so training cannot draw any


def test_humaneval_is_an_eval_set_only():
    tasks = heldout.heldout_set("humaneval")
    assert len(tasks) == 164
    assert heldout.is_heldout("humaneval", tasks[5].prompt)
    with pytest.raises(TrainingNotAllowed):
        heldout.training_task(get_environment("humaneval"), 1, random.Random(0))
