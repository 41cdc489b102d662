"""The harness-critic's logic: failure groups, guard rails, the three proposal sources, champion/challenger with
early rejection, the paired test, the token limit and the budget; with evaluators constructed to know the answer."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest

from lamarck.agents.harness import FewShotExample, HarnessSpec, default_harness
from lamarck.agents.harness_critic import DevResult, HarnessCritic, HarnessCriticInput
from lamarck.agents.harness_proposals import (
    FailureCase,
    KnobSpace,
    Rejected,
    group_failures,
    guard,
    knob_proposals,
    parse_rewrite,
)
from lamarck.curriculum.environment import TaskSpec
from lamarck.platform.settings import HarnessCriticSettings

ROOT = default_harness("arithmetic")
TOOLS = ["calculator"]
ONLY_TEMPERATURE = KnobSpace(
    temperature=(0.0, 0.3, 0.7, 1.0),
    top_p=(),
    samples_per_task=(),
    step_budget=(),
    max_tokens_per_step=(),
    tool_description=(),
    few_shot_count=(),
)


def _tasks(n: int) -> list[TaskSpec]:
    return [
        TaskSpec(environment="arithmetic", difficulty=2 + i % 3, prompt=f"task {i}", seed=i, source_id=f"dev/{i}")
        for i in range(n)
    ]


def _by_temperature(table: dict[float, float], tokens: int = 100) -> tuple[list[int], object]:
    """An evaluator whose pass rate depends on the harness's temperature only: task i passes when i/n < rate."""
    calls: list[int] = []

    def evaluate(harness: HarnessSpec, tasks: Sequence[TaskSpec]) -> DevResult:
        calls.append(len(tasks))
        rate = table.get(harness.sampling.temperature, 0.1)
        return DevResult(passed=[(t.seed * 7919 % 100) / 100 < rate for t in tasks], tokens=[tokens] * len(tasks))

    return calls, evaluate


def test_failures_group_by_their_first_cause() -> None:
    cases = [
        FailureCase(episode_id="a", difficulty=2, feedback=["unknown tool 'calc': available tools are calculator"]),
        FailureCase(episode_id="b", difficulty=2, feedback=["empty reply: use a tool"], failure_reason="step budget"),
        FailureCase(episode_id="c", difficulty=3, failure_reason="step budget of 4 exhausted without an answer"),
        FailureCase(episode_id="d", difficulty=3, failure_reason="step budget of 4 exhausted without an answer"),
        FailureCase(episode_id="e", difficulty=4, answered=True, verifier_detail="expected 12, got 13"),
        FailureCase(episode_id="f", difficulty=4, answered=True, verifier_detail="not a number: 'twelve'"),
        FailureCase(episode_id="g", difficulty=5, failure_reason="no ANSWER line"),
    ]
    groups = {g.cause: g for g in group_failures(cases)}
    assert {cause: g.count for cause, g in groups.items()} == {
        "unknown_tool": 1,
        "malformed_action": 1,
        "budget_exhausted": 2,
        "wrong_answer": 1,
        "answer_format": 1,
        "no_answer": 1,
    }
    assert group_failures(cases)[0].cause == "budget_exhausted"
    assert groups["budget_exhausted"].difficulties == [3, 3]


def test_guard_rails_refuse_what_a_harness_may_not_do() -> None:
    assert guard(ROOT, ROOT.derive(sampling={"temperature": 0.2}), TOOLS) is None
    dropped = ROOT.derive(system_prompt=ROOT.system_prompt.replace("{answer_format}", "a number"))
    assert "drops {answer_format}" in (guard(ROOT, dropped, TOOLS) or "")
    unknown = ROOT.derive(system_prompt=ROOT.system_prompt + "\n{secret}")
    assert "unknown fields ['secret']" in (guard(ROOT, unknown, TOOLS) or "")
    broken = ROOT.derive(system_prompt=ROOT.system_prompt + "\n{")
    assert "not a valid template" in (guard(ROOT, broken, TOOLS) or "")
    no_answer = ROOT.derive(system_prompt=ROOT.system_prompt.replace("ANSWER:", "Reply:"))
    assert "ANSWER:" in (guard(ROOT, no_answer, TOOLS) or "")
    assert "answer format" in (guard(ROOT, ROOT.derive(answer_format="anything"), TOOLS) or "")
    assert "not registered" in (guard(ROOT, ROOT.derive(tools=("calculator", "shell")), TOOLS) or "")
    assert "environment" in (guard(ROOT, ROOT.derive(environment="string_ops"), TOOLS) or "")


def test_a_rewrite_must_be_json_with_a_prompt_and_a_rationale() -> None:
    assert isinstance(parse_rewrite(ROOT, "I would make it clearer."), Rejected)
    assert "does not parse" in parse_rewrite(ROOT, '{"system_prompt": oops}').reason  # type: ignore[union-attr]
    assert "no rationale" in parse_rewrite(ROOT, '{"system_prompt": "x {tools} ANSWER: {answer_format}"}').reason  # type: ignore[union-attr]
    same = parse_rewrite(ROOT, f'{{"system_prompt": {_json(ROOT.system_prompt)}, "rationale": "r"}}')
    assert isinstance(same, Rejected) and "changes nothing" in same.reason
    new_prompt = ROOT.system_prompt.replace("careful", "precise")
    good = parse_rewrite(ROOT, f'Here: {{"system_prompt": {_json(new_prompt)}, "rationale": "be precise"}}')
    assert not isinstance(good, Rejected) and good.spec.system_prompt == new_prompt and good.source == "rewrite"


def _json(text: str) -> str:
    import json

    return json.dumps(text)


def test_knob_proposals_move_knobs_of_the_parent_and_never_repeat_it() -> None:
    proposals = knob_proposals(ROOT, KnobSpace(), random.Random(0), 12)
    assert len(proposals) == 12
    assert len({p.spec.digest() for p in proposals}) == 12 and ROOT.digest() not in {p.spec.digest() for p in proposals}
    for proposal in proposals:
        moved = set(proposal.changed) - (
            {"samples_per_task", "top_p"} if proposal.spec.sampling.temperature == 0 else set()
        )
        assert 1 <= len(moved) <= 2 and proposal.spec.system_prompt == ROOT.system_prompt
    only = knob_proposals(ROOT, ONLY_TEMPERATURE, random.Random(0), 10)
    assert sorted(p.spec.sampling.temperature for p in only) == [0.0, 0.3, 1.0]


def test_a_greedy_proposal_takes_one_sample_and_moves_that_repeat_it_are_not_made() -> None:
    greedy = next(
        p for p in knob_proposals(ROOT, ONLY_TEMPERATURE, random.Random(0), 10) if p.changed["temperature"] == 0
    )
    assert ROOT.sampling.samples_per_task > 1
    assert (greedy.spec.sampling.samples_per_task, greedy.spec.sampling.top_p) == (1, 1.0)
    assert greedy.changed == {"temperature": 0.0, "samples_per_task": 1, "top_p": 1.0}
    parent = greedy.spec
    children = knob_proposals(parent, KnobSpace(), random.Random(0), 64)
    assert children and parent.digest() not in {c.spec.digest() for c in children}
    for child in children:
        if child.spec.sampling.temperature == 0.0:  # samples and top_p moves of a greedy parent repeat it
            assert (child.spec.sampling.samples_per_task, child.spec.sampling.top_p) == (1, 1.0)
            assert not {"samples_per_task", "top_p"} & set(child.changed)


def test_the_search_promotes_a_known_better_temperature_and_archives_the_worse() -> None:
    _, evaluate = _by_temperature({0.7: 0.2, 0.3: 0.7, 0.0: 0.5, 1.0: 0.05})
    settings = HarnessCriticSettings(
        knob_proposals=10, demonstration_proposals=0, rewrite_proposals=0, keep=2, early_tasks=8, budget_tasks=1000
    )
    critic = HarnessCritic(evaluate, settings, knobs=ONLY_TEMPERATURE)  # type: ignore[arg-type]
    out = critic.run(HarnessCriticInput(champion=ROOT, dev_tasks=_tasks(40), registered_tools=TOOLS))
    by_temperature = {r.spec.sampling.temperature: r for r in out.challengers}
    assert out.promoted == by_temperature[0.3].harness_id
    assert by_temperature[0.3].status == "promoted" and by_temperature[0.3].p_value is not None
    assert by_temperature[0.3].p_value < 0.05 / 2
    worse = by_temperature[1.0]
    assert worse.status == "rejected" and worse.rung == 0 and "early rejection" in worse.reason
    runner_up = by_temperature[0.0]
    assert runner_up.status == "rejected" and runner_up.rung == 1


def test_a_challenger_that_is_not_significantly_better_stays_rejected() -> None:
    _, evaluate = _by_temperature({0.7: 0.30, 0.3: 0.34})
    settings = HarnessCriticSettings(
        knob_proposals=10, demonstration_proposals=0, rewrite_proposals=0, early_tasks=8, early_needs_a_win=False
    )
    space = ONLY_TEMPERATURE.model_copy(update={"temperature": (0.3, 0.7)})
    out = HarnessCritic(evaluate, settings, knobs=space).run(  # type: ignore[arg-type]
        HarnessCriticInput(champion=ROOT, dev_tasks=_tasks(40), registered_tools=TOOLS)
    )
    assert out.promoted is None
    assert [r.status for r in out.challengers] == ["rejected"]
    assert "significantly" in out.challengers[0].reason or "not better" in out.challengers[0].reason


def test_a_better_challenger_that_costs_too_many_tokens_is_refused() -> None:
    def evaluate(harness: HarnessSpec, tasks: Sequence[TaskSpec]) -> DevResult:
        better = harness.sampling.temperature == 0.3
        return DevResult(
            passed=[better or t.seed % 4 == 0 for t in tasks], tokens=[300 if better else 100] * len(tasks)
        )

    settings = HarnessCriticSettings(knob_proposals=10, demonstration_proposals=0, rewrite_proposals=0)
    space = ONLY_TEMPERATURE.model_copy(update={"temperature": (0.3, 0.7)})
    out = HarnessCritic(evaluate, settings, knobs=space).run(
        HarnessCriticInput(champion=ROOT, dev_tasks=_tasks(24), registered_tools=TOOLS)
    )
    assert out.promoted is None
    assert "tokens per task" in out.challengers[0].reason and out.challengers[0].wins == 18


def test_the_budget_bounds_a_round_and_says_what_it_did_not_reach() -> None:
    calls, evaluate = _by_temperature({0.7: 0.2, 0.3: 0.7, 0.0: 0.5, 1.0: 0.05})
    settings = HarnessCriticSettings(
        knob_proposals=10, demonstration_proposals=0, rewrite_proposals=0, early_tasks=8, budget_tasks=20
    )
    out = HarnessCritic(evaluate, settings, knobs=ONLY_TEMPERATURE).run(  # type: ignore[arg-type]
        HarnessCriticInput(champion=ROOT, dev_tasks=_tasks(40), registered_tools=TOOLS)
    )
    assert sum(calls) == out.tasks_evaluated <= 20
    assert out.promoted is None
    assert any("budget exhausted" in r.reason for r in out.challengers)


def test_demonstrations_come_from_the_pool_and_favour_failing_levels() -> None:
    pool = [
        (level, FewShotExample(task=f"level {level} task {i}", turns=("CALL calculator: 1 + 1", "2", "ANSWER: 2")))
        for level in (2, 5)
        for i in range(6)
    ]
    failures = [FailureCase(episode_id=str(i), difficulty=5, answered=True) for i in range(30)]
    settings = HarnessCriticSettings(knob_proposals=0, demonstration_proposals=8, rewrite_proposals=0)
    critic = HarnessCritic(lambda h, t: DevResult(passed=[], tokens=[]), settings)
    proposals, invalid = critic.propose(
        HarnessCriticInput(champion=ROOT, dev_tasks=[], demonstrations=pool, registered_tools=TOOLS),
        group_failures(failures),
        random.Random(1),
    )
    assert invalid == [] and len(proposals) == 8
    shown = [example for p in proposals for example in p.spec.few_shot.examples]
    assert all(example in {e for _, e in pool} for example in shown)
    assert sum(example.task.startswith("level 5") for example in shown) > len(shown) * 0.7
    assert all(p.spec.few_shot.source == "memory" and 2 <= p.spec.few_shot.count <= 3 for p in proposals)


def test_an_invalid_rewrite_is_recorded_not_raced() -> None:
    class Gateway:
        def complete(self, role: str, messages: object, **params: object) -> object:
            assert role == "harness_critic"
            prompt = ROOT.system_prompt.replace("{answer_format}", "a number")
            return type("R", (), {"choices": [f'{{"system_prompt": {_json(prompt)}, "rationale": "shorter"}}']})()

    settings = HarnessCriticSettings(knob_proposals=0, demonstration_proposals=0, rewrite_proposals=1)
    calls, evaluate = _by_temperature({})
    out = HarnessCritic(evaluate, settings, Gateway()).run(  # type: ignore[arg-type]
        HarnessCriticInput(champion=ROOT, dev_tasks=_tasks(8), registered_tools=TOOLS)
    )
    assert out.challengers == [] and out.promoted is None
    assert [(r.source, "drops {answer_format}" in r.reason) for r in out.invalid] == [("rewrite", True)]


@pytest.mark.parametrize("early", [1, 8])
def test_the_champion_is_evaluated_once_per_task(early: int) -> None:
    calls, evaluate = _by_temperature({0.7: 0.2, 0.3: 0.7, 0.0: 0.5, 1.0: 0.05})
    settings = HarnessCriticSettings(
        knob_proposals=10,
        demonstration_proposals=0,
        rewrite_proposals=0,
        early_tasks=early,
        early_needs_a_win=False,
        keep=3,
        budget_tasks=10_000,
    )
    out = HarnessCritic(evaluate, settings, knobs=ONLY_TEMPERATURE).run(  # type: ignore[arg-type]
        HarnessCriticInput(champion=ROOT, dev_tasks=_tasks(20), registered_tools=TOOLS)
    )
    survivors = sum(1 for r in out.challengers if r.rung == 1)
    assert out.tasks_evaluated == 20 + 3 * early + survivors * (20 - early)


def test_a_challenger_whose_outputs_stop_parsing_is_rejected_whatever_it_wins() -> None:
    def evaluate(harness: HarnessSpec, tasks: Sequence[TaskSpec]) -> DevResult:
        cooler = harness.sampling.temperature == 0.3  # wins every task, but half its samples give no answer
        return DevResult(
            passed=[cooler] * len(tasks), tokens=[100] * len(tasks), answered=[0.5 if cooler else 1.0] * len(tasks)
        )

    settings = HarnessCriticSettings(
        knob_proposals=10,
        demonstration_proposals=0,
        rewrite_proposals=0,
        keep=2,
        early_tasks=8,
        budget_tasks=1000,
        early_needs_a_win=False,
    )
    only_cooler = ONLY_TEMPERATURE.model_copy(update={"temperature": (0.3,)})
    out = HarnessCritic(evaluate, settings, knobs=only_cooler).run(
        HarnessCriticInput(champion=ROOT, dev_tasks=_tasks(20), registered_tools=TOOLS)
    )
    [cooler] = out.challengers
    assert out.promoted is None and cooler.rung == 0 and cooler.wins == 8
    assert "stop parsing: 50% of samples gave an answer against the champion's 100%" in cooler.reason
    lenient = HarnessCritic(evaluate, settings.model_copy(update={"max_answer_drop": 0.6}), knobs=only_cooler).run(
        HarnessCriticInput(champion=ROOT, dev_tasks=_tasks(20), registered_tools=TOOLS)
    )
    assert lenient.promoted == cooler.harness_id


def _by_level(levels: dict[int, int]) -> list[TaskSpec]:
    """A development slice ordered by level, as ``heldout`` builds it: ``levels`` maps level to task count."""
    tasks: list[TaskSpec] = []
    for level, count in sorted(levels.items()):
        tasks += [
            TaskSpec(environment="arithmetic", difficulty=level, prompt=f"{level}/{i}", seed=i, source_id=str(i))
            for i in range(count)
        ]
    return tasks


def test_the_first_batch_comes_from_the_champions_edge_so_a_better_challenger_is_not_stopped_by_easy_ties() -> None:
    def evaluate(harness: HarnessSpec, tasks: Sequence[TaskSpec]) -> DevResult:
        cooler = harness.sampling.temperature == 0.3  # solves all of level 3, where the champion solves half
        passed = [t.difficulty == 2 or (t.difficulty == 3 and (cooler or t.seed % 2 == 0)) for t in tasks]
        return DevResult(passed=passed, tokens=[100] * len(tasks))

    settings = HarnessCriticSettings(
        knob_proposals=10, demonstration_proposals=0, rewrite_proposals=0, early_tasks=4, budget_tasks=1000
    )
    only_cooler = ONLY_TEMPERATURE.model_copy(update={"temperature": (0.3,)})
    out = HarnessCritic(evaluate, settings, knobs=only_cooler).run(
        HarnessCriticInput(champion=ROOT, dev_tasks=_by_level({2: 10, 3: 10, 4: 10}), registered_tools=TOOLS)
    )
    [cooler] = out.challengers
    assert cooler.rung == 1 and (cooler.wins, cooler.losses) == (5, 0)
    assert out.promoted == cooler.harness_id


def test_edge_first_puts_partly_solved_levels_first_then_the_border_when_none_is() -> None:
    from lamarck.agents.harness_critic import edge_first

    tasks = _by_level({1: 2, 2: 2, 3: 2, 4: 2})
    mixed = edge_first(tasks, [True, True, True, False, False, False, True, False])
    assert [tasks[i].difficulty for i in mixed] == [2, 4, 2, 4, 1, 1, 3, 3]
    border = edge_first(tasks, [True, True, True, True, False, False, False, False])
    assert [tasks[i].difficulty for i in border] == [2, 3, 2, 3, 1, 1, 4, 4]
    assert sorted(mixed) == sorted(border) == list(range(8))


def test_the_edge_includes_the_first_level_above_everything_the_champion_passes() -> None:
    from lamarck.agents.harness_critic import edge_levels

    tasks = _by_level({1: 2, 2: 2, 3: 2})
    assert edge_levels(tasks, [True, False, False, False, False, False]) == [1, 2]  # partly solved, then the border
    assert edge_levels(tasks, [True, True, False, False, False, False]) == [1, 2]  # none partly: top solved, border
    assert edge_levels(tasks, [False] * 6) == [1]


def test_reserve_tasks_at_the_champions_edge_join_the_slice_so_a_small_gain_becomes_significant() -> None:
    def evaluate(harness: HarnessSpec, tasks: Sequence[TaskSpec]) -> DevResult:
        cooler = harness.sampling.temperature == 0.3  # solves half of level 2, which the champion never solves
        passed = [t.difficulty == 1 or (t.difficulty == 2 and cooler and t.seed % 2 == 0) for t in tasks]
        return DevResult(passed=passed, tokens=[100] * len(tasks))

    settings = HarnessCriticSettings(
        knob_proposals=10, demonstration_proposals=0, rewrite_proposals=0, early_tasks=4, budget_tasks=1000
    )
    only_cooler = ONLY_TEMPERATURE.model_copy(update={"temperature": (0.3,)})
    dev = _by_level({1: 4, 2: 4, 3: 4, 4: 4})
    reserve = [t for t in _by_level({1: 16, 2: 16, 3: 16, 4: 16}) if t.seed >= 4]
    critic = HarnessCritic(evaluate, settings, knobs=only_cooler)
    without = critic.run(HarnessCriticInput(champion=ROOT, dev_tasks=dev, registered_tools=TOOLS))
    assert without.promoted is None and (without.challengers[0].wins, without.challengers[0].losses) == (2, 0)
    out = critic.run(HarnessCriticInput(champion=ROOT, dev_tasks=dev, reserve_tasks=reserve, registered_tools=TOOLS))
    [cooler] = out.challengers
    assert cooler.tasks == 16 + 24  # the edge is levels 1 (solved, none partly) and 2 (the border): 12 more each
    assert (cooler.wins, cooler.losses) == (8, 0) and out.promoted == cooler.harness_id
