"""The critic's judge rules blind and its repairs never see the answer, tested with scripted models built to cheat: a
judge that copies any verifier result it is shown, and a repair model that copies any expected answer it is shown.
Either would pass these tests only while nothing leaks to it."""

from __future__ import annotations

import random
import re
from typing import Any

from lamarck.agents.critic import Critic, CriticInput, EpisodeForReview
from lamarck.agents.critic_repair import REPAIR_SOURCE
from lamarck.agents.critic_stats import critic_stats
from lamarck.agents.harness import load_prompt
from lamarck.agents.teacher import PARTIAL_SHARE
from lamarck.curriculum.environment import TaskSpec
from lamarck.curriculum.environments.arithmetic import ArithmeticEnv
from lamarck.platform.llm.gateway import LLMGateway
from lamarck.platform.settings import GatewaySettings, ModelRoute, ModelRoutes, TrainingSettings
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database
from lamarck.platform.storage.records import Verdict
from lamarck.platform.storage.trajectory import HINT, HINT_TEXT, STUDENT_OPENING, STUDENT_TOOLS, Message, Trajectory
from lamarck.testing import ScriptedLLM, scripted_provider
from lamarck.training.traces_to_rows import DistillationSet, episode_row

ENV = ArithmeticEnv()
JUDGE_MARK = "Attempt, step by step:"
REPAIR_MARK = "got this task wrong"


def _gateway(db: Database) -> LLMGateway:
    return LLMGateway(ModelRoutes(critic=ModelRoute(model="scripted/judge")), GatewaySettings(retries=0), db=db)


def _token(value: object) -> re.Pattern[str]:
    return re.compile(r"(?<![\w.])" + re.escape(str(value)) + r"(?![\w])")


def _tasks(count: int, difficulty: int = 3) -> list[TaskSpec]:
    """Tasks whose answer is written neither in the task, nor in its hint, nor in the failed attempt's first step
    (``_failed_steps``), nor in the prompts' own words ("step 1"), so a prompt that shows it has leaked it."""
    found = []
    scaffold = f"{load_prompt('critic_repair.md')} step 1: CALL calculator: 2 + 2 = 4"
    for seed in range(200):
        task = ENV.generate(difficulty, random.Random(seed))
        shown = f"{task.prompt} {ENV.solution_hint(task, PARTIAL_SHARE)} {scaffold}"
        if not _token(task.reference["answer"]).search(shown):
            found.append(task)
        if len(found) == count:
            return found
    raise AssertionError("not enough tasks")


def _episode(
    db: Database, task: TaskSpec, steps: list[Message], *, opening_meta: dict[str, Any] | None = None
) -> EpisodeForReview:
    answer = (steps[-1].content or "").rsplit("ANSWER:", 1)[-1].strip()
    opening = [
        Message(role="system", content="Solve the task.", meta=dict(opening_meta or {})),
        Message(role="user", content=task.prompt),
    ]
    trajectory = Trajectory(messages=[*opening, *steps])
    with db.session() as session:
        task_id = repo.add_task(
            session, environment=task.environment, difficulty=task.difficulty, prompt=task.prompt
        ).id
        episode_id = repo.record_episode(
            session, task_id=task_id, model_version="m", harness_version="h1", trajectory=trajectory, answer=answer
        ).id
    return EpisodeForReview(episode_id=episode_id, task=task, answer=answer, trajectory=trajectory)


def test_the_judge_rules_without_the_verifiers_result_and_both_verdicts_are_kept(sqlite_db: Database) -> None:
    right_task, wrong_task = _tasks(2)
    right_answer, wrong_answer = right_task.reference["answer"], wrong_task.reference["answer"] + 3
    episodes = [
        _episode(sqlite_db, right_task, [Message(role="assistant", content=f"ANSWER: {right_answer}")]),
        _episode(sqlite_db, wrong_task, [Message(role="assistant", content=f"ANSWER: {wrong_answer}")]),
    ]
    feedback = [ENV.verify(right_task, str(right_answer)).details, ENV.verify(wrong_task, str(wrong_answer)).details]
    prompts: list[str] = []

    def copycat(messages: list[dict[str, Any]], n: int) -> list[str]:
        """Passes whatever a verifier result it is shown passed; shown none, it fails everything."""
        prompt = messages[-1]["content"]
        prompts.append(prompt)
        told_pass = any(mark in prompt for mark in ("PASSED", "correct:", feedback[0]))
        return [f"VERDICT: {'pass' if told_pass else 'fail'}\nFIRST_ERROR: none\nCRITIQUE: c\nLESSON: Recheck."] * n

    with scripted_provider(ScriptedLLM(copycat)):
        out = Critic(_gateway(sqlite_db), {"arithmetic": ENV}, sqlite_db).run(
            CriticInput(episodes=episodes, repair=False)
        )

    assert len(prompts) == 2 and all(JUDGE_MARK in p for p in prompts)
    for prompt in prompts:
        assert not any(text in prompt for text in [*feedback, "PASSED", "FAILED", "checker", "final:"]), prompt
    wrong_prompt = next(p for p in prompts if wrong_task.prompt in p)
    assert not _token(wrong_task.reference["answer"]).search(wrong_prompt)
    right, wrong = out.verdicts
    assert (right.passed, right.judge_passed, right.verifier_passed, right.agree) == (True, False, True, False)
    assert (wrong.passed, wrong.judge_passed, wrong.verifier_passed, wrong.agree) == (False, False, False, True)
    with sqlite_db.session() as session:
        stored = {v.episode_id: v for v in session.query(Verdict)}
        assert stored[right.episode_id].details["judge_blind"] is True
        assert (stored[right.episode_id].details["verifier_passed"], stored[right.episode_id].details["agree"]) == (
            True,
            False,
        )
        group = critic_stats(session).groups[0]
    assert (group.judged, group.true_fail, group.false_fail, group.agreement, group.precision, group.recall) == (
        2,
        1,
        1,
        0.5,
        None,
        0.0,
    )
    with scripted_provider(ScriptedLLM(copycat)):  # a second review reuses the verdict, both verdicts included
        again = Critic(_gateway(sqlite_db), {"arithmetic": ENV}, sqlite_db).run(CriticInput(episodes=episodes))
    assert [(v.reused, v.judge_passed, v.verifier_passed, v.agree) for v in again.verdicts] == [
        (True, False, True, False),
        (True, False, False, True),
    ]


def _judge_then(repair: Any) -> Any:
    """A scripted critic: the judge names step 1 as the first wrong one; repair prompts go to ``repair``."""

    def respond(messages: list[dict[str, Any]], n: int) -> list[str]:
        prompt = messages[-1]["content"]
        if REPAIR_MARK in prompt:
            return [repair(prompt)] * n
        return ["VERDICT: fail\nFIRST_ERROR: 1\nCRITIQUE: The sum is wrong.\nLESSON: Add carefully."] * n

    return respond


def _failed_steps(task: TaskSpec) -> list[Message]:
    wrong = task.reference["answer"] + 7
    return [
        Message(role="assistant", content="CALL calculator: 2 + 2"),
        Message(role="tool", content="4", tool_call_id="call-1"),
        Message(role="assistant", content=f"So the total is {wrong}.\nANSWER: {wrong}"),
    ]


def test_a_repair_sees_the_first_wrong_step_and_a_hint_but_never_the_answer(sqlite_db: Database) -> None:
    tasks = _tasks(3)
    episodes = [_episode(sqlite_db, task, _failed_steps(task)) for task in tasks]
    prompts: list[str] = []

    def cheat(prompt: str) -> str:
        """Copies the expected answer (or the verifier's feedback) whenever the prompt shows it."""
        prompts.append(prompt)
        task = next(t for t in tasks if t.prompt in prompt)
        shown = _token(task.reference["answer"]).search(prompt) or "expected" in prompt
        return f"ANSWER: {task.reference['answer'] if shown else -1}"

    with scripted_provider(ScriptedLLM(_judge_then(cheat))):
        out = Critic(_gateway(sqlite_db), {"arithmetic": ENV}, sqlite_db).run(CriticInput(episodes=episodes))

    assert out.repaired == 0 and all(v.repaired_episode_id is None for v in out.verdicts)
    assert len(prompts) == 3
    for task in tasks:
        prompt = next(p for p in prompts if task.prompt in p)
        assert 'step 1: "CALL calculator: 2 + 2"' in prompt
        assert f"A hint: {ENV.solution_hint(task, PARTIAL_SHARE)}" in prompt
        assert not _token(task.reference["answer"]).search(prompt) and "expected" not in prompt
        assert ENV.verify(task, "-1").details not in prompt


def test_a_kept_repair_is_its_own_source_of_training_rows(sqlite_db: Database) -> None:
    (task,) = _tasks(1)
    student = [{"role": "system", "content": "Solve the task."}, {"role": "user", "content": task.prompt}]
    episode = _episode(
        sqlite_db, task, _failed_steps(task), opening_meta={STUDENT_OPENING: student, STUDENT_TOOLS: ["calculator"]}
    )
    # the rollout had the teacher's hint appended to its task message: the repair never saw it, so it is dropped
    teacher = "Think about the whole story."
    messages = list(episode.trajectory.messages)
    messages[1] = messages[1].model_copy(
        update={"content": f"{task.prompt}\n\nHint: {teacher}", "meta": {HINT: "glossary", HINT_TEXT: teacher}}
    )
    episode = episode.model_copy(update={"trajectory": Trajectory(messages=messages)})

    def honest(prompt: str) -> str:
        return f"Working it out from the start.\nANSWER: {task.reference['answer']}"

    with scripted_provider(ScriptedLLM(_judge_then(honest))):
        out = Critic(_gateway(sqlite_db), {"arithmetic": ENV}, sqlite_db).run(CriticInput(episodes=[episode]))
    repaired_id = out.verdicts[0].repaired_episode_id
    assert repaired_id is not None and out.repaired == 1
    hint = ENV.solution_hint(task, PARTIAL_SHARE)
    with sqlite_db.session() as session:
        repaired = repo.get_episode(session, episode_id=repaired_id)
        kept = repo.episode_trajectory(repaired).messages
        assert [m.role for m in kept] == ["system", "user", "assistant"]
        assert kept[1].content == task.prompt and kept[1].meta == {HINT: REPAIR_SOURCE, HINT_TEXT: hint}
        assert kept[0].meta[STUDENT_OPENING] == student and kept[-1].meta == {"repaired": True}
        row = episode_row(repaired, repo.get_task(session, task_id=repaired.task_id), TrainingSettings())
    assert row.repaired and row.hint_level == REPAIR_SOURCE
    assert row.messages[:2] == student and row.messages[-1]["content"].endswith(f"ANSWER: {task.reference['answer']}")
    assert DistillationSet(parent_version="m", rows=[row]).by_hint() == {REPAIR_SOURCE: 1}


def test_a_hint_that_would_give_the_answer_away_is_left_out() -> None:
    from lamarck.agents.critic_repair import repair_hint, reveals_answer

    class Blurting:
        """An environment whose 'hint' is the answer itself."""

        name = "arithmetic"

        def glossary(self) -> str:
            return ""

        def solution_hint(self, task: TaskSpec, share: float) -> str | None:
            return f"It comes to {task.reference['answer']}."

    (task,) = _tasks(1)
    assert reveals_answer(f"It comes to {task.reference['answer']}.", task)
    assert not reveals_answer(f"It comes to {task.reference['answer']}0.", task)
    assert repair_hint(Blurting(), task) is None  # type: ignore[arg-type]
    assert repair_hint(ENV, task) == ENV.solution_hint(task, PARTIAL_SHARE)
