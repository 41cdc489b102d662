from __future__ import annotations

import random

import pytest

from lamarck.curriculum import heldout
from lamarck.curriculum.environment import TaskSpec, TrainingNotAllowed
from lamarck.curriculum.registry import get_environment

TRAINING_ENVS = ["arithmetic", "python_functions", "string_ops"]


def test_seed_ranges_are_disjoint():
    assert heldout.TRAINING_SEEDS.stop <= heldout.HELDOUT_SEEDS.start
    assert heldout.heldout_seed("v2", 9, 999) in heldout.HELDOUT_SEEDS
    assert heldout.heldout_seed("v2", 9, 999, "report") in heldout.HELDOUT_SEEDS
    assert heldout.heldout_seed("v2", 9, 999, "dev") in heldout.DEV_SEEDS
    assert heldout.DRAW_SEEDS.stop <= heldout.DEV_SEEDS.start
    with pytest.raises(ValueError, match="known versions are v2, v3"):
        heldout.heldout_seed("v9", 1, 0)
    with pytest.raises(ValueError, match="retired"):
        heldout.heldout_set("arithmetic", "v1")


def test_versions_are_per_environment():
    """python_functions' and string_ops' generators changed (v3); arithmetic's did not and keeps its v2 sets."""
    assert heldout.current_version("python_functions") == heldout.current_version("string_ops") == "v3"
    assert heldout.current_version("arithmetic") == "v2"
    with pytest.raises(ValueError, match="string_ops: held-out version 'v2' is retired.*use v3"):
        heldout.heldout_set("string_ops", "v2")
    assert heldout.live_versions("python_functions") == ["v3"] and heldout.live_versions("arithmetic") == ["v2"]
    with pytest.raises(ValueError, match="python_functions: held-out version 'v2' is retired.*use v3"):
        heldout.heldout_set("python_functions", "v2")
    with pytest.raises(ValueError, match="arithmetic: held-out version 'v3' is not in use yet"):
        heldout.heldout_set("arithmetic", "v3")
    assert heldout.set_name("python_functions", slice_="report") == "python_functions-report-v3"
    assert heldout.set_name("arithmetic") == "arithmetic-heldout-v2"
    assert heldout.heldout_set("python_functions", per_level=1)[0].source_id.startswith("python_functions-heldout-v3/")


@pytest.mark.parametrize("name", TRAINING_ENVS)
def test_heldout_set_is_fixed_versioned_and_covers_every_level(name):
    env = get_environment(name)
    version = heldout.current_version(name)
    tasks = heldout.heldout_set(name, version)
    assert len(tasks) == heldout.DEFAULT_PER_LEVEL * len(env.difficulties)
    assert {t.difficulty for t in tasks} == set(env.difficulties)
    assert len({t.fingerprint for t in tasks}) == len(tasks)
    assert all(t.seed in heldout.HELDOUT_SEEDS and t.source_id.startswith(f"{name}-heldout-{version}/") for t in tasks)
    again = heldout.heldout_set(name, version)
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
            assert task.seed in heldout.DRAW_SEEDS
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


@pytest.mark.parametrize("name", TRAINING_ENVS)
def test_slices_are_deterministic_and_disjoint(name):
    env = get_environment(name)
    slices = {s: heldout.slice_set(name, s, per_level=heldout.RESERVED_PER_LEVEL) for s in heldout.SLICES}
    assert [t.model_dump() for t in heldout.report_set(name, per_level=50)] == [
        t.model_dump() for t in slices["report"]
    ]
    assert [t.model_dump() for t in heldout.dev_set(name, per_level=50)] == [t.model_dump() for t in slices["dev"]]
    assert slices["gate"][:3] == heldout.heldout_set(name, per_level=50)[:3]
    protected = set(heldout.protected_levels(name))
    for a, b in (("gate", "report"), ("gate", "dev"), ("report", "dev")):
        assert not {t.fingerprint for t in slices[a]} & {t.fingerprint for t in slices[b]}
        keys_a = {heldout.task_key(t) for t in slices[a] if t.difficulty in protected}
        keys_b = {heldout.task_key(t) for t in slices[b] if t.difficulty in protected}
        assert keys_a and not keys_a & keys_b
    dev_name = f"{name}-dev-{heldout.current_version(name)}/"
    assert all(t.seed in heldout.DEV_SEEDS and t.source_id.startswith(dev_name) for t in slices["dev"])
    assert all(t.seed in heldout.HELDOUT_SEEDS for t in slices["report"] + slices["gate"])
    assert {t.difficulty for t in slices["report"]} == set(env.difficulties)
    assert heldout.digest(slices["report"]) != heldout.digest(slices["gate"])


@pytest.mark.parametrize("name", ["arithmetic", "python_functions"])
def test_report_slice_uses_report_families_only(name):
    env = get_environment(name)
    report = heldout.report_set(name, per_level=50)
    assert {t.metadata["family"] for t in report} == set(env.report_families)
    assert {t.metadata["split"] for t in report} == {"report"}
    gate_and_dev = heldout.heldout_set(name, per_level=50) + heldout.dev_set(name, per_level=50)
    assert not {t.metadata["family"] for t in gate_and_dev} & set(env.report_families)


@pytest.mark.parametrize("name", ["arithmetic", "python_functions"])
def test_no_report_family_in_any_training_draw(name):
    env = get_environment(name)
    rng = random.Random(3)
    for difficulty in env.difficulties:
        draws = [heldout.training_task(env, difficulty, rng) for _ in range(150)]
        assert not {t.metadata["family"] for t in draws} & set(env.report_families), difficulty
        assert {t.metadata["split"] for t in draws} == {"train"}


def test_python_functions_is_key_protected_at_every_level():
    """Its families span enough constants that the gate, dev and report programs are all kept out of training."""
    env = get_environment("python_functions")
    assert heldout.protected_levels("python_functions") == list(env.difficulties)
    held = heldout.reserved(env)
    for i, difficulty in enumerate(env.difficulties):
        keys = [heldout.task_key(t) for slice_ in heldout.SLICES for t in held.slices[slice_][i]]
        assert len(keys) == len(set(keys)) == 3 * heldout.RESERVED_PER_LEVEL
        assert heldout._collision_rate(env, difficulty, set(keys)) <= heldout.MAX_KEY_COLLISION_RATE


def test_python_functions_leak_check_catches_a_gate_program_in_new_words():
    env = get_environment("python_functions")
    for task in heldout.heldout_set("python_functions", per_level=2):
        reworded = task.model_copy(update={"prompt": "Write the function the tests expect.", "seed": None})
        assert not heldout.is_heldout("python_functions", reworded.prompt)
        assert heldout.is_heldout_task(reworded, env=env)  # same family and constants: the key catches it


def test_small_levels_are_protected_by_prompt_only_and_still_trainable():
    """Arithmetic level 1 has 72 sums: reserving 150 of them by key would leave training nothing."""
    protected = heldout.protected_levels("arithmetic")
    assert 1 not in protected and {3, 5, 7, 9} <= set(protected)
    env = get_environment("arithmetic")
    reserved = heldout.reserved(env)
    level1 = {heldout.task_key(t) for slice_ in reserved.slices.values() for t in slice_[0]}
    rng = random.Random(5)
    draws = [heldout.training_task(env, 1, rng) for _ in range(300)]
    assert {heldout.task_key(t) for t in draws} & level1  # same sums, new wording: allowed at level 1
    assert not {t.fingerprint for t in draws} & reserved.fingerprints


def test_leak_check_catches_a_reserved_computation_in_new_words():
    from lamarck.curriculum.environments.arithmetic_families import TRAINING_FAMILIES
    from lamarck.curriculum.environments.arithmetic_language import render, style_for

    env = get_environment("arithmetic")
    for task in heldout.heldout_set("arithmetic", per_level=3):
        if task.difficulty not in heldout.protected_levels("arithmetic"):
            continue
        quantities, ops = task.metadata["quantities"], task.metadata["ops"]
        family = next(f for f in TRAINING_FAMILIES if f.name != task.metadata["family"] and set(ops) <= f.ops)
        reworded = render(
            family, quantities[0], list(zip(ops, quantities[1:], strict=True)), random.Random(1), style_for(2), 20
        )
        leak = task.model_copy(update={"prompt": reworded.prompt, "seed": None, "source_id": None})
        assert leak.prompt != task.prompt
        assert not heldout.is_heldout("arithmetic", leak.prompt)  # the text alone would miss it...
        assert heldout.is_heldout_task(leak, env=env)  # ...the key catches it
        fresh = env.generate(task.difficulty, random.Random(77))
        assert not heldout.is_heldout_task(fresh, env=env) or heldout.task_key(fresh) in heldout.reserved(env).keys


def test_training_draws_avoid_reserved_keys_at_protected_levels():
    for name in TRAINING_ENVS:
        env = get_environment(name)
        held = heldout.reserved(env)
        rng = random.Random(11)
        for difficulty in held.protected:
            for _ in range(100):
                task = heldout.training_task(env, difficulty, rng)
                assert heldout.task_key(task, env) not in held.keys and not heldout.is_heldout_task(task, env=env)


def test_a_proposed_arithmetic_task_is_checked_by_its_expression():
    env = get_environment("arithmetic")
    gate = next(t for t in heldout.heldout_set("arithmetic", per_level=5) if t.difficulty == 5)
    spaced = gate.reference["expression"].replace(" ", "")
    proposal = TaskSpec(environment="arithmetic", difficulty=4, prompt="Kai has some cards. Give the final number.",
                        reference={"answer": gate.reference["answer"], "expression": spaced},
                        metadata={"proposed": True})  # fmt: skip
    assert heldout.is_heldout_task(proposal, env=env)
