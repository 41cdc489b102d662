from __future__ import annotations

import math
import random

import pytest

from lamarck.curriculum.environment import TaskSpec
from lamarck.curriculum.frontier import FrontierSelector, climbable, non_increasing
from lamarck.curriculum.profile import CapabilityProfile
from lamarck.curriculum.registry import get_environment

LADDER = tuple(range(1, 9))


def _success(skill: float, difficulty: int) -> float:
    return 1.0 / (1.0 + math.exp(-1.5 * (skill - difficulty)))


def _run(selector, profile, skill, rounds, rng, batch=8):
    chosen = []
    for _ in range(rounds):
        for slot in selector.select(profile, batch, rng=rng):
            profile.record(slot.environment, slot.difficulty, rng.random() < _success(skill, slot.difficulty))
            chosen.append(slot.difficulty)
    return chosen


def test_frontier_follows_the_executor_up_and_down():
    selector = FrontierSelector({"arithmetic": LADDER}, replay_fraction=0.0)
    profile = CapabilityProfile(decay=0.9)
    rng = random.Random(7)
    weak = _run(selector, profile, 2.0, 30, rng)
    strong = _run(selector, profile, 6.0, 30, rng)
    weak_again = _run(selector, profile, 2.0, 30, rng)

    def settled(xs):
        return sum(xs[-80:]) / 80

    assert 1.5 <= settled(weak) <= 3.0
    assert 5.0 <= settled(strong) <= 7.0
    assert settled(weak_again) <= 3.0


def test_selected_cells_are_near_the_target():
    selector = FrontierSelector({"arithmetic": LADDER, "string_ops": LADDER}, replay_fraction=0.0)
    profile = CapabilityProfile()
    rng = random.Random(3)
    _run(selector, profile, 4.0, 40, rng)
    picks = [s for s in selector.select(profile, 200, seed=1)]
    rates = [_success(4.0, s.difficulty) for s in picks]
    assert 0.3 < sum(rates) / len(rates) < 0.7
    assert {s.environment for s in picks} == {"arithmetic", "string_ops"}
    assert all(s.reason.startswith("thompson:") for s in picks)


def test_deterministic_under_a_seed_and_replays_failures():
    selector = FrontierSelector({"arithmetic": LADDER}, replay_fraction=0.5)
    profile = CapabilityProfile()
    failed = [TaskSpec(environment="arithmetic", difficulty=3, prompt=f"task {i}", source_id=f"t{i}") for i in range(3)]
    failed.append(TaskSpec(environment="humaneval", difficulty=1, prompt="not a training cell"))
    first = selector.select(profile, 20, seed=42, failed_tasks=failed)
    second = selector.select(profile, 20, seed=42, failed_tasks=failed)
    assert [s.model_dump() for s in first] == [s.model_dump() for s in second]
    replays = [s for s in first if s.replay_task is not None]
    assert 1 <= len(replays) <= 3
    assert len({s.replay_task.source_id for s in replays}) == len(replays)
    assert all(s.reason.startswith("replay:") and s.environment == "arithmetic" for s in replays)
    for passed in (True, True, False):
        profile.record("arithmetic", 1, passed)
    assert selector.select(profile, 20, seed=43) != selector.select(profile, 20, seed=42)


def test_an_untried_environment_starts_at_its_lowest_level():
    selector = FrontierSelector({"arithmetic": LADDER, "string_ops": LADDER})
    profile = CapabilityProfile()
    profile.record("string_ops", 3, True)
    slots = selector.select(profile, 30, seed=1)
    cold = [s for s in slots if s.environment == "arithmetic"]
    assert cold and all(s.difficulty == min(LADDER) and s.reason.startswith("cold start") for s in cold)
    assert {s.environment for s in slots} == {"arithmetic"}


def test_from_environments_skips_eval_only():
    envs = [get_environment(n) for n in ("arithmetic", "humaneval", "string_ops")]
    selector = FrontierSelector.from_environments(envs, target=0.6)
    assert set(selector.ladders) == {"arithmetic", "string_ops"} and selector.target == 0.6
    with pytest.raises(ValueError, match="target"):
        FrontierSelector({"a": (1,)}, target=1.5)


def test_non_increasing():
    assert non_increasing([0.9, 0.5, 0.7, 0.1], [1, 1, 1, 1]) == pytest.approx([0.9, 0.6, 0.6, 0.1])
    assert non_increasing([0.2, 0.8], [100, 2]) == pytest.approx([(20 + 1.6) / 102] * 2)


def test_climbable_levels_are_the_tried_ones_and_the_next_one_up():
    assert climbable(LADDER, [0] * 8) == {1}
    assert climbable(LADDER, [5, 0, 0, 0, 0, 0, 0, 0]) == {1, 2}
    assert climbable(LADDER, [5, 0, 3, 0, 0, 0, 0, 0]) == {1, 3, 4}
    assert climbable(LADDER, [1] * 8) == set(LADDER)


def test_after_one_measured_level_the_batch_climbs_one_step_not_to_the_top():
    selector = FrontierSelector({"arithmetic": LADDER}, replay_fraction=0.0)
    profile = CapabilityProfile()
    for i in range(40):
        profile.record("arithmetic", 1, i % 5 < 3)  # 60% at the lowest level, nothing else known
    picks = {slot.difficulty for slot in selector.select(profile, 200, seed=4)}
    assert picks <= {1, 2} and 2 in picks


def test_failures_in_cells_out_of_reach_are_not_replayed():
    selector = FrontierSelector({"arithmetic": LADDER}, replay_fraction=1.0)
    profile = CapabilityProfile()
    for i in range(30):
        profile.record("arithmetic", 1, i % 2 == 0)
        profile.record("arithmetic", 7, False)
    hopeless = TaskSpec(environment="arithmetic", difficulty=7, prompt="far too hard", source_id="h")
    near = TaskSpec(environment="arithmetic", difficulty=1, prompt="worth another try", source_id="n")
    slots = selector.select(profile, 2, seed=0, failed_tasks=[hopeless, near])
    replays = [s.replay_task.source_id for s in slots if s.replay_task is not None]
    assert replays == ["n"]
