"""The harness archive over a real database, and one harness-critic round with the real local model."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest

from lamarck.agents.episodes import record_attempts
from lamarck.agents.executor import Executor, ExecutorInput
from lamarck.agents.harness import HarnessSpec, default_harness, load_harness, save_harness
from lamarck.agents.harness_archive import (
    diff,
    lineage_rows,
    promoted_harness,
    raced_against,
    record_round,
    rollback_harness,
)
from lamarck.agents.harness_critic import DevResult, HarnessCritic, HarnessCriticInput
from lamarck.agents.harness_proposals import KnobSpace, knob_proposals, with_knob, without_redundant_samples
from lamarck.agents.harness_round import failure_cases, run_round
from lamarck.curriculum.environment import TaskSpec
from lamarck.curriculum.environments.arithmetic import ArithmeticEnv
from lamarck.platform.settings import HarnessCriticSettings
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database

ROOT = default_harness("arithmetic")
SPACE = KnobSpace(
    temperature=(0.0, 0.3, 0.7),
    top_p=(),
    samples_per_task=(),
    step_budget=(),
    max_tokens_per_step=(),
    tool_description=(),
    few_shot_count=(),
)


def _round(db: Database) -> tuple[str, object]:
    with db.session() as session:
        root_id = save_harness(session, ROOT, status="promoted", rationale="root")

    def evaluate(harness: HarnessSpec, tasks: Sequence[TaskSpec]) -> DevResult:
        rate = {0.0: 0.8, 0.3: 0.4}.get(harness.sampling.temperature, 0.2)
        return DevResult(passed=[(t.seed * 37 % 100) / 100 < rate for t in tasks], tokens=[50] * len(tasks))

    tasks = [
        TaskSpec(environment="arithmetic", difficulty=2, prompt=f"t{i}", seed=i, source_id=f"d/{i}") for i in range(30)
    ]
    settings = HarnessCriticSettings(knob_proposals=5, demonstration_proposals=0, rewrite_proposals=0, keep=2)
    out = HarnessCritic(evaluate, settings, knobs=SPACE).run(
        HarnessCriticInput(champion=ROOT, dev_tasks=tasks, registered_tools=["calculator"])
    )
    return root_id, out


def test_a_round_is_archived_with_lineage_and_the_winner_promoted(db: Database) -> None:
    root_id, out = _round(db)
    record_round(db, out, round_=1)  # type: ignore[arg-type]
    record_round(db, out, round_=1)  # type: ignore[arg-type]  # a re-run node records nothing twice
    winner = ROOT.derive(sampling={"temperature": 0.0, "samples_per_task": 1, "top_p": 1.0}).version_id
    with db.session() as session:
        assert promoted_harness(session, "arithmetic") == winner
        assert repo.get_harness(session, harness_id=root_id).status == "retired"
        rows = {row["id"]: row for row in lineage_rows(session, "arithmetic")}
        assert rows[root_id]["source"] == "root"
        assert rows[winner]["parent"] == root_id and rows[winner]["source"] == "knobs"
        assert rows[winner]["wins"] > rows[winner]["losses"]
        loser = ROOT.derive(sampling={"temperature": 0.3}).version_id
        assert rows[loser]["status"] == "rejected" and rows[loser]["decision"]
        rounds = repo.get_harness(session, harness_id=root_id).eval_scores["rounds"]
        assert len(rounds) == 1 and rounds[0]["promoted"] == winner
        change = diff(load_harness(session, harness_id=root_id), load_harness(session, harness_id=winner))
        assert change.prompt == []
        assert change.knobs == {
            "sampling.temperature": (0.7, 0.0),
            "sampling.samples_per_task": (4, 1),  # greedy: one sample (harness_proposals.without_redundant_samples)
            "sampling.top_p": (0.95, 1.0),
        }
        assert rollback_harness(session, "arithmetic") == root_id
        assert promoted_harness(session, "arithmetic") == root_id


def test_the_archive_remembers_who_raced_the_champion_under_which_model(db: Database) -> None:
    root_id, out = _round(db)
    unraced = out.challengers[0].model_copy(update={"raced": False})  # type: ignore[attr-defined]
    out = out.model_copy(update={"challengers": [unraced, *out.challengers[1:]], "promoted": None})  # type: ignore[attr-defined]
    record_round(db, out, round_=1, model_version="m1")
    with db.session() as session:
        tried = raced_against(session, root_id, "m1")
        assert tried == {c.spec.digest() for c in out.challengers[1:]} and unraced.spec.digest() not in tried
        assert raced_against(session, root_id, "m2") == set()  # a new model may try every move again


def test_a_round_proposes_no_move_that_already_raced_the_champion() -> None:
    first = knob_proposals(ROOT, KnobSpace(), random.Random(0), 4)
    tried = {p.spec.digest() for p in first}
    later = knob_proposals(ROOT, KnobSpace(), random.Random(0), 4, tried=tried)
    assert len(later) == 4 and not tried & {p.spec.digest() for p in later}
    singles = {
        without_redundant_samples(with_knob(ROOT, knob, value)).digest()
        for knob, values in KnobSpace().model_dump().items()
        for value in values
    } - {ROOT.digest()}
    covered: set[str] = set()
    while not singles <= covered:  # one move a round, never one already raced: every single move comes first
        (proposal,) = knob_proposals(ROOT, KnobSpace(), random.Random(len(covered)), 1, tried=covered)
        assert proposal.spec.digest() in singles, proposal.changed
        covered.add(proposal.spec.digest())
    (pair,) = knob_proposals(ROOT, KnobSpace(), random.Random(2), 1, tried=covered)
    assert pair.spec.digest() not in singles and len(pair.changed) >= 2


def test_diff_shows_the_prompt_and_the_examples() -> None:
    changed = ROOT.derive(system_prompt=ROOT.system_prompt.replace("careful", "precise"), few_shot={"count": 0})
    change = diff(ROOT, changed)
    assert any(line.startswith("-You are a careful") for line in change.prompt)
    assert any(line.startswith("+You are a precise") for line in change.prompt)
    assert change.examples == (1, 0) and change.knobs == {"few_shot.count": (1, 0)}


@pytest.mark.slow
def test_one_round_with_the_real_model(local_gateway, sqlite_db: Database) -> None:  # type: ignore[no-untyped-def]
    env = ArithmeticEnv()
    tasks = [env.generate(2, random.Random(index)) for index in range(3)]
    out = Executor(local_gateway, {"arithmetic": env}).run(
        ExecutorInput(
            tasks=tasks,
            model_version="smollm2-135m",
            harnesses={"arithmetic": ROOT.derive(step_budget=2)},
            samples_per_task=2,
            seed=1,
        )
    )
    with sqlite_db.session() as session:
        task_ids = [
            repo.add_task(
                session, environment="arithmetic", difficulty=t.difficulty, prompt=t.prompt, reference=t.reference
            ).id
            for t in tasks
        ]
    ids = record_attempts(sqlite_db, out.attempts, task_ids=task_ids, model_version="smollm2-135m")
    with sqlite_db.session() as session:  # what the critic would write: the verifier's outcome
        for attempt, episode_id in zip(out.attempts, ids, strict=True):
            passed = attempt.answer is not None and env.verify(tasks[attempt.task_index], attempt.answer).passed
            repo.get_episode(session, episode_id=episode_id).outcome = "passed" if passed else "failed"
    settings = HarnessCriticSettings(
        dev_per_level=1,
        knob_proposals=2,
        demonstration_proposals=1,
        rewrite_proposals=1,
        rewrite_max_tokens=160,
        early_tasks=3,
        keep=1,
        budget_tasks=40,
    )
    result = run_round(
        sqlite_db,
        local_gateway,
        env,
        model_version="smollm2-135m",
        settings=settings,
        default=ROOT.derive(step_budget=2, sampling={"max_tokens_per_step": 48}),
        round_=1,
    )
    assert result.tasks_evaluated <= 40
    assert len(result.challengers) + len(result.invalid) >= 3  # two knob moves and the model's rewrite, at least
    assert all(r.reason for r in [*result.challengers, *result.invalid])
    with sqlite_db.session() as session:
        archived = lineage_rows(session, "arithmetic")
        assert len(archived) == 1 + len(result.challengers)
        assert promoted_harness(session, "arithmetic") == (result.promoted or result.champion_id)
    cases, _ = failure_cases(sqlite_db, "arithmetic")
    failed = sum(1 for a in out.attempts if a.answer is None or not env.verify(tasks[a.task_index], a.answer).passed)
    assert len(cases) == failed and all(case.difficulty == 2 for case in cases)


def test_a_harness_under_which_judge_and_verifier_part_ways_is_flagged(sqlite_db: Database) -> None:
    from lamarck.agents.harness_archive import judge_flags

    child = ROOT.derive(sampling={"temperature": 0.3})
    with sqlite_db.session() as session:
        root_id = save_harness(session, ROOT, status="promoted")
        child_id = save_harness(session, child, parent_id=root_id)
        task = repo.add_task(session, environment="arithmetic", difficulty=2, prompt="1 + 1")
        from lamarck.platform.storage.trajectory import Trajectory

        def judged(harness: str, agree: bool) -> None:
            episode = repo.record_episode(
                session,
                task_id=task.id,
                model_version="m",
                harness_version=harness,
                trajectory=Trajectory(messages=[]),
                outcome="passed",
            )
            repo.add_verdict(
                session,
                episode_id=episode.id,
                reward=1.0,
                passed=True,
                source="both",
                judge_passed=agree,
                critic_model="judge",
            )

        for i in range(20):
            judged(root_id, agree=i < 19)  # 95% agreement under the root
            judged(child_id, agree=i < 12)  # 60% under the child
        assert judge_flags(session) == {
            child_id: "judge and verifier agree on 60% of 20 episodes, against 95% under its parent"
        }
        rows = {row["id"]: row for row in lineage_rows(session, "arithmetic")}
        assert rows[child_id]["flag"] and not rows[root_id]["flag"]
        for _ in range(60):
            judged(child_id, agree=True)  # 72 of 80 agree (90%): within 10 points of the parent's 95%
        assert judge_flags(session) == {}
