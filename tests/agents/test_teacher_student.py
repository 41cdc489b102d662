"""Student and teacher: a rollout under the teacher's help becomes a row that shows exactly the student's opening."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from lamarck.agents.executor import Executor, ExecutorInput, student_opening
from lamarck.agents.harness import FewShotExample, default_harness
from lamarck.agents.hint_ladder import LadderOutcome, run_ladder, rung_index
from lamarck.agents.teacher import HintLevel, NoHelp, apply_help, demonstration, help_for
from lamarck.agents.toolbox import LessonHandle, SkillHandle
from lamarck.curriculum.environment import TaskSpec
from lamarck.curriculum.environments.arithmetic import ArithmeticEnv
from lamarck.platform.llm.gateway import LLMGateway
from lamarck.platform.settings import GatewaySettings, ModelRoute, ModelRoutes
from lamarck.platform.storage.trajectory import Trajectory, render_for_model
from lamarck.testing import ScriptedLLM, scripted_provider
from lamarck.training.student_rows import RowRefused, student_row

GLOSSARY = "Words like 'gives away' mean subtract."


class HintedArithmetic(ArithmeticEnv):
    """Arithmetic with fixed, recognisable hints, so the tests see exactly where hint text goes."""

    def glossary(self) -> str:
        return GLOSSARY

    def solution_hint(self, task: TaskSpec, share: float) -> str | None:
        expression = str(task.reference["expression"])
        return f"The answer is the value of {expression}." if share >= 1.0 else "Start with the first number."


class _Skills:
    def retrieve(self, query: str, *, environment: str | None, k: int) -> list[SkillHandle]:
        return [SkillHandle("calculate", "calculate(expr: str) -> str", "Evaluate.", lambda arg: "1")]


class _Lessons:
    def retrieve(self, query: str, *, environment: str | None, k: int) -> list[LessonHandle]:
        return [LessonHandle("L1", "Check the units before answering.")]


def _gateway() -> LLMGateway:
    return LLMGateway(ModelRoutes(executor=ModelRoute(model="scripted/exec")), GatewaySettings(retries=0))


def _last_user(messages: list[dict[str, Any]]) -> str:
    return next(m["content"] for m in reversed(messages) if m["role"] == "user")


@pytest.fixture
def solver() -> Iterator[ScriptedLLM]:
    """Calls the calculator with the expression after 'value of' when a hint gives it, else with a wrong sum."""

    def respond(messages: list[dict[str, Any]], n: int) -> list[str]:
        last = _last_user(messages)
        if last.startswith("RESULT: "):
            return [f"ANSWER: {last.removeprefix('RESULT: ').split()[0]}"] * n
        if "value of " in last:
            expression = last.split("value of ", 1)[1].rstrip(".")
            return [f"CALL calculator: {expression}"] * n
        return ["CALL calculator: 1 + 1"] * n

    with scripted_provider(ScriptedLLM(respond)) as handler:
        yield handler


def test_a_row_from_a_helped_rollout_shows_exactly_the_student_opening(solver: ScriptedLLM) -> None:
    env = HintedArithmetic()
    task = env.generate(3, random.Random(5))
    harness = default_harness("arithmetic")
    demo = FewShotExample(
        task="Ann has 2 cards. She gets 3 more. How many now?", turns=("CALL calculator: 2 + 3", "5", "ANSWER: 5")
    )
    executor = Executor(_gateway(), {"arithmetic": env}, skills=_Skills(), lessons=_Lessons())
    help = help_for(task, env, HintLevel.FULL)
    teacher_help = help.model_copy(update={"demonstrations": (demo,)})
    out = executor.run(
        ExecutorInput(
            tasks=[task],
            model_version="m",
            harnesses={"arithmetic": harness},
            samples_per_task=1,
            help={0: teacher_help},
        )
    )
    attempt = out.attempts[0]
    assert attempt.hint_level is HintLevel.FULL
    assert env.verify(task, attempt.answer or "").passed
    shown = render_for_model(attempt.trajectory)
    assert any("Hint:" in m["content"] for m in shown) and any("calculate" in m["content"] for m in shown)

    row = student_row(attempt.trajectory)
    expected = render_for_model(Trajectory(messages=student_opening(task, env, harness)))
    assert row.messages[: row.prompt_length] == expected  # what the executor shows the student, nothing more
    text = "\n".join(m["content"] for m in row.messages)
    for absent in ("Hint:", "value of", "calculate(", "Check the units", demo.task):
        assert absent not in text
    own = [m for m in shown[len(shown) - 3 :]]
    assert row.messages[row.prompt_length :] == own
    assert [row.messages[i]["role"] for i in row.train_turns] == ["assistant", "assistant"]
    assert row.hint_level == "full"


def test_rows_that_teach_what_the_student_cannot_do_are_refused(solver: ScriptedLLM) -> None:
    env = HintedArithmetic()
    task = env.generate(2, random.Random(1))
    harness = default_harness("arithmetic")
    handler = ScriptedLLM()
    handler.script = ["CALL calculate: 2 + 2", "ANSWER: 1"]
    with scripted_provider(handler):
        out = Executor(_gateway(), {"arithmetic": env}, skills=_Skills()).run(
            ExecutorInput(tasks=[task], model_version="m", harnesses={"arithmetic": harness}, samples_per_task=1)
        )
    with pytest.raises(RowRefused) as refused:
        student_row(out.attempts[0].trajectory)
    assert refused.value.reason == "tool_not_in_student"

    hint = help_for(task, env, HintLevel.FULL)
    copier = ScriptedLLM()
    copier.script = [f"{hint.hint}\nANSWER: {task.reference['answer']}"]
    with scripted_provider(copier):
        out = Executor(_gateway(), {"arithmetic": env}).run(
            ExecutorInput(
                tasks=[task], model_version="m", harnesses={"arithmetic": harness}, samples_per_task=1, help={0: hint}
            )
        )
    with pytest.raises(RowRefused) as refused:
        student_row(out.attempts[0].trajectory)
    assert refused.value.reason == "copied_hint"


def test_privileged_rungs_sample_cooler_than_the_harness(solver: ScriptedLLM) -> None:
    """Copying a given solution needs no diversity: a full hint caps the temperature, the glossary does not."""
    env = HintedArithmetic()
    task = env.generate(3, random.Random(5))
    harness = default_harness("arithmetic").derive(sampling={"temperature": 0.7})
    for level, expected in [(HintLevel.FULL, 0.3), (HintLevel.GLOSSARY, 0.7)]:
        solver.calls.clear()
        Executor(_gateway(), {"arithmetic": env}).run(
            ExecutorInput(
                tasks=[task],
                model_version="m",
                harnesses={"arithmetic": harness},
                samples_per_task=1,
                help={0: help_for(task, env, level)},
            )
        )
        temperatures = {(call.get("optional_params") or {}).get("temperature") for call in solver.calls}
        assert temperatures == {expected}, level
    assert help_for(task, env, HintLevel.PARTIAL).max_temperature == 0.3


def test_help_comes_from_the_environment_or_is_refused_with_a_reason() -> None:
    env = HintedArithmetic()
    task = env.generate(4, random.Random(2))
    assert help_for(task, env, HintLevel.GLOSSARY).hint == GLOSSARY
    assert str(task.reference["expression"]) in help_for(task, env, HintLevel.FULL).hint
    assert str(task.reference["expression"]) not in help_for(task, env, HintLevel.PARTIAL).hint
    with pytest.raises(NoHelp, match="no verified demonstrations"):
        help_for(task, env, HintLevel.DEMONSTRATIONS, [])

    class NoHints:
        name = "nohints"

    with pytest.raises(NoHelp, match="provides no hints"):
        help_for(task, NoHints(), HintLevel.GLOSSARY)  # type: ignore[arg-type]
    opening = student_opening(task, env, default_harness("arithmetic"))
    helped = apply_help(opening, help_for(task, env, HintLevel.FULL))
    assert helped[:-1] == opening[:-1] and helped[-1].content.startswith(task.prompt)
    assert opening[-1].content == task.prompt  # the student's opening is not changed in place


def test_the_ladder_gives_each_task_the_weakest_help_that_works(solver: ScriptedLLM) -> None:
    env = HintedArithmetic()
    tasks = [env.generate(3, random.Random(seed)) for seed in range(3)]
    harness = default_harness("arithmetic")
    out = run_ladder(
        Executor(_gateway(), {"arithmetic": env}),
        ExecutorInput(tasks=tasks, model_version="m", harnesses={"arithmetic": harness}, samples_per_task=2),
        {"arithmetic": env},
    )
    # the scripted model only solves a task when the full expression is given: glossary and partial do not help
    assert {index: level.value for index, level in out.solved_at.items()} == {0: "full", 1: "full", 2: "full"}
    assert [r.level.value for r in out.rungs] == ["none", "glossary", "demonstrations", "partial", "full"]
    assert [r.tasks for r in out.rungs] == [3, 3, 0, 3, 3]
    assert out.rungs[2].unavailable == 3  # no verified successes yet to show as examples
    assert len(out.demonstrations["arithmetic"]) == 3  # the full-hint successes join the worked-example pool
    keys = {(a.task_index, a.sample_index) for a in out.attempts}
    assert len(keys) == len(out.attempts)  # every rung's attempts are distinct episodes
    assert sum(out.passed) == 6


def test_a_task_entering_above_the_bottom_skips_the_dead_rungs_and_keeps_its_rung_in_the_sample_index(
    solver: ScriptedLLM,
) -> None:
    env = HintedArithmetic()
    tasks = [env.generate(3, random.Random(seed)) for seed in range(3)]
    out = run_ladder(
        Executor(_gateway(), {"arithmetic": env}),
        ExecutorInput(tasks=tasks, model_version="m", harnesses={"arithmetic": default_harness("arithmetic")}),
        {"arithmetic": env},
        rungs=[HintLevel.NONE, HintLevel.PARTIAL, HintLevel.FULL],
        start={0: 2, 1: 1},
    )
    assert [(r.tasks, r.skipped) for r in out.rungs] == [(1, 2), (2, 1), (3, 0)]
    assert {index: level.value for index, level in out.solved_at.items()} == {0: "full", 1: "full", 2: "full"}
    rungs_of_task_0 = {rung_index(a.sample_index) for a in out.attempts if a.task_index == 0}
    assert rungs_of_task_0 == {2}  # only the full rung, recorded as the ladder's third rung
    assert {rung_index(a.sample_index) for a in out.attempts} == {0, 1, 2}


def test_a_demonstration_is_the_task_and_the_models_own_turns(solver: ScriptedLLM) -> None:
    env = HintedArithmetic()
    task = env.generate(2, random.Random(3))
    out = Executor(_gateway(), {"arithmetic": env}).run(
        ExecutorInput(
            tasks=[task], model_version="m", samples_per_task=1, help={0: help_for(task, env, HintLevel.FULL)}
        )
    )
    example = demonstration(task, out.attempts[0].trajectory)
    assert example is not None and example.task == task.prompt
    assert example.turns[0].startswith("CALL calculator:") and example.turns[-1].startswith("ANSWER:")


def test_the_dataset_check_refuses_a_row_that_does_not_open_as_the_student_sees_it(sqlite_db) -> None:  # type: ignore[no-untyped-def]
    from lamarck.agents.student_check import student_view_check
    from lamarck.platform.storage import repositories as repo
    from lamarck.training.pipeline import DatasetRefused
    from lamarck.training.traces_to_rows import DistillationSet, TrainingRow

    env = HintedArithmetic()
    task = env.generate(3, random.Random(9))
    harness = default_harness("arithmetic")
    with sqlite_db.session() as session:
        task_id = repo.add_task(
            session, environment="arithmetic", difficulty=3, prompt=task.prompt, reference=task.reference
        ).id
    opening = render_for_model(Trajectory(messages=student_opening(task, env, harness)))
    reply = [{"role": "assistant", "content": f"ANSWER: {task.reference['answer']}"}]

    def row(messages: list[dict[str, str]]) -> TrainingRow:
        return TrainingRow(
            task_id=task_id,
            episode_id="e1",
            environment="arithmetic",
            difficulty=3,
            messages=messages,
            train_turns=[len(messages) - 1],
            prompt_length=len(messages) - 1,
        )

    check = student_view_check(sqlite_db, {"arithmetic": env}, lambda name: harness)
    check(DistillationSet(parent_version="m", rows=[row([*opening, *reply])]))
    hinted = [*opening[:-1], {"role": "user", "content": opening[-1]["content"] + "\n\nHint: " + GLOSSARY}]
    with pytest.raises(DatasetRefused, match="does not open with what the executor shows the student"):
        check(DistillationSet(parent_version="m", rows=[row([*hinted, *reply])]))


def test_a_task_climbs_to_its_next_rung_while_another_is_still_on_its_first() -> None:
    """Rungs are not waves: task 0's full-hint attempt starts while task 1's unhelped attempt is still running, so
    the engine's batch does not drain at the end of each rung."""
    env = HintedArithmetic()
    tasks = [env.generate(3, random.Random(seed)) for seed in range(2)]
    overlapped = threading.Event()

    def respond(messages: list[dict[str, Any]], n: int) -> list[str]:
        last = _last_user(messages)
        if last.startswith("RESULT: "):
            return [f"ANSWER: {last.removeprefix('RESULT: ').split()[0]}"] * n
        if "value of " in last:
            if last.startswith(tasks[0].prompt):
                overlapped.set()
            return [f"CALL calculator: {last.split('value of ', 1)[1].rstrip('.')}"] * n
        if last == tasks[1].prompt:
            overlapped.wait(timeout=10)  # a ladder run rung by rung would wait here the whole timeout
        return ["CALL calculator: 1 + 1"] * n

    with scripted_provider(ScriptedLLM(respond)):
        out = _climb_two(env, tasks, [HintLevel.NONE, HintLevel.FULL])
    assert overlapped.is_set()
    assert out.rungs[0].seconds < 10
    assert {index: level.value for index, level in out.solved_at.items()} == {0: "full", 1: "full"}
    rungs = [rung_index(a.sample_index) for a in out.attempts]
    assert rungs == sorted(rungs)  # attempts are reported rung by rung, whatever order they finished in


def test_a_demonstrations_rung_shows_the_successes_every_task_verified_below_it() -> None:
    env = HintedArithmetic()
    tasks = [env.generate(3, random.Random(seed)) for seed in range(2)]
    shown: list[str] = []

    def respond(messages: list[dict[str, Any]], n: int) -> list[str]:
        last = _last_user(messages)
        if last.startswith("RESULT: "):
            return [f"ANSWER: {last.removeprefix('RESULT: ').split()[0]}"] * n
        if last == tasks[0].prompt:
            return [f"CALL calculator: {tasks[0].reference['expression']}"] * n
        if tasks[1].prompt in last:
            shown.append(" ".join(m["content"] for m in messages))
        return ["CALL calculator: 1 + 1"] * n

    with scripted_provider(ScriptedLLM(respond)):
        out = _climb_two(env, tasks, [HintLevel.NONE, HintLevel.DEMONSTRATIONS])
    assert {index: level.value for index, level in out.solved_at.items()} == {0: "none"}
    assert [(r.tasks, r.solved, r.unavailable) for r in out.rungs] == [(2, 1, 0), (1, 0, 0)]
    assert [tasks[0].prompt in text for text in shown] == [False, True]  # task 0's success, shown at rung 2


def _climb_two(env: HintedArithmetic, tasks: list[TaskSpec], rungs: list[HintLevel]) -> LadderOutcome:
    return run_ladder(
        Executor(_gateway(), {"arithmetic": env}),
        ExecutorInput(tasks=tasks, model_version="m", harnesses={"arithmetic": default_harness("arithmetic")}),
        {"arithmetic": env},
        rungs=rungs,
    )
