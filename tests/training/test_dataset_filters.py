"""What becomes a row: sound passes only, at most a few per task, anchors capped, rows counted by hint source."""

from __future__ import annotations

import random

from lamarck.curriculum.environments.arithmetic import ArithmeticEnv
from lamarck.curriculum.heldout import training_task
from lamarck.platform.settings import TrainingSettings
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database
from lamarck.platform.storage.trajectory import (
    HINT,
    HINT_TEXT,
    STUDENT_OPENING,
    STUDENT_TOOLS,
    Message,
    ToolCall,
    Trajectory,
)
from lamarck.training.traces_to_rows import build_dataset

STUDENT = [{"role": "system", "content": "You solve word problems. Tools: calculator."}]


def _task(db: Database, difficulty: int, seed: int) -> tuple[str, str, str]:
    spec = training_task(ArithmeticEnv(), difficulty, random.Random(seed))
    with db.session() as session:
        task = repo.add_task(
            session, environment="arithmetic", difficulty=difficulty, prompt=spec.prompt, reference=spec.reference
        )
        return task.id, spec.prompt, str(spec.reference["expression"])


def _episode(
    db: Database,
    task_id: str,
    prompt: str,
    expression: str,
    *,
    hint: str | None = None,
    guess: bool = False,
    variant: int = 0,
    harness: str | None = None,
) -> str:
    from lamarck.curriculum.calculator import calculate, format_number

    value = format_number(calculate(expression))
    system = Message(
        role="system",
        content="teacher system prompt with skills and lessons",
        meta={STUDENT_OPENING: [*STUDENT, {"role": "user", "content": prompt}], STUDENT_TOOLS: ["calculator"]},
    )
    task_message = Message(role="user", content=prompt)
    if hint is not None:
        task_message = Message(role="user", content=f"{prompt}\n\nHint: {hint}", meta={HINT: "full", HINT_TEXT: hint})
    messages = [system, task_message]
    if not guess:
        call = ToolCall(id="call_1", name="calculator", arguments={"input": expression})
        messages += [
            Message(
                role="assistant",
                content=f"Let me compute.{' ' * variant}\nCALL calculator: {expression}",
                tool_calls=[call],
            ),
            Message(role="tool", name="calculator", tool_call_id="call_1", content=value),
        ]
    messages.append(Message(role="assistant", content=f"ANSWER: {value}"))
    with db.session() as session:
        return repo.record_episode(
            session,
            task_id=task_id,
            model_version="smollm2-135m",
            trajectory=Trajectory(messages=messages),
            outcome="passed",
            answer=f"ANSWER: {value}",
            harness_version=harness,
        ).id


def _build(db: Database, **settings: object):  # type: ignore[no-untyped-def]
    with db.session() as session:
        return build_dataset(session, parent_version="smollm2-135m", settings=TrainingSettings(**settings))


def test_only_sound_passes_become_rows_shown_as_the_student_sees_them(sqlite_db: Database) -> None:
    task, prompt, expression = _task(sqlite_db, 3, seed=1)
    sound = _episode(sqlite_db, task, prompt, expression, hint=f"The answer is the value of {expression}.")
    _episode(sqlite_db, task, prompt, expression, guess=True)  # a bare number: verified, but not from its work
    dataset = _build(sqlite_db, anchor_levels=0)
    [row] = dataset.rows
    assert row.episode_id == sound and row.hint_level == "full"
    assert row.messages[:2] == [*STUDENT, {"role": "user", "content": prompt}]
    assert all("Hint" not in m["content"] and "teacher" not in m["content"] for m in row.messages)
    assert dataset.dropped["no_calculation"] == 1
    assert dataset.by_hint() == {"full": 1}


def test_stepwise_rows_teach_the_models_own_expression_one_operation_per_call(sqlite_db: Database) -> None:
    task, prompt, expression = _task(sqlite_db, 5, seed=3)
    _episode(sqlite_db, task, prompt, expression, hint=f"The answer is the value of {expression}.")
    [whole] = _build(sqlite_db, anchor_levels=0).rows
    [chained] = _build(sqlite_db, anchor_levels=0, stepwise_rows=True).rows
    assert [m["content"] for m in whole.messages[2:]][0].endswith(f"CALL calculator: {expression}")
    calls = [m["content"] for m in chained.messages if m["content"].startswith("CALL calculator:")]
    assert len(calls) == 3 and all(call.count(" ") == 4 for call in calls)  # "CALL calculator: a op b"
    assert chained.messages[:2] == whole.messages[:2] and chained.messages[-1] == whole.messages[-1]
    assert chained.train_turns == [2, 4, 6, 8] and chained.hint_level == "full"


def test_at_most_two_rows_per_task_and_anchor_rows_capped(sqlite_db: Database) -> None:
    task, prompt, expression = _task(sqlite_db, 3, seed=2)
    for variant in range(4):  # four distinct sound passes of one task
        _episode(sqlite_db, task, prompt, expression, variant=variant)
    for seed in range(10, 18):  # eight level-1 tasks, each solved
        anchor, anchor_prompt, anchor_expression = _task(sqlite_db, 1, seed=seed)
        _episode(sqlite_db, anchor, anchor_prompt, anchor_expression)
    dataset = _build(sqlite_db, rows_per_task=2, anchor_levels=1, anchor_share=0.2)
    assert dataset.counts() == {"arithmetic": {"3": 2}}  # 2 frontier rows allow 0 anchors at a 20% share
    assert dataset.dropped["over_rows_per_task"] == 2
    assert dataset.dropped["over_anchor_share"] == 8
    wider = _build(sqlite_db, rows_per_task=2, anchor_levels=1, anchor_share=0.5)
    assert wider.counts() == {"arithmetic": {"1": 2, "3": 2}}


def test_after_a_harness_promotion_only_episodes_that_showed_its_opening_become_rows(sqlite_db: Database) -> None:
    tasks = [_task(sqlite_db, 3, seed=30 + i) for i in range(4)]
    older = _episode(sqlite_db, *tasks[0], harness="h-root")  # another prompt: another opening
    served = _episode(sqlite_db, *tasks[1], harness="h-better")
    warmer = _episode(sqlite_db, *tasks[2], harness="h-better-warm")  # the served prompt, another temperature
    unknown = _episode(sqlite_db, *tasks[3], harness="h-never-archived")  # left to the student-view check
    assert len(_build(sqlite_db, anchor_levels=0).rows) == 4  # nothing promoted: every harness's episodes count
    with sqlite_db.session() as session:
        for harness_id, prompt, temperature, status in [
            ("h-root", "old", 0.7, "retired"),
            ("h-better", "new", 0.0, "promoted"),
            ("h-better-warm", "new", 0.7, "rejected"),
        ]:
            repo.add_harness(
                session,
                harness_id=harness_id,
                digest=harness_id,
                environment="arithmetic",
                spec={"system_prompt": prompt, "sampling": {"temperature": temperature}},
                status=status,
            )
        repo.add_harness(
            session, harness_id="h-string", spec={}, digest="e", environment="string_ops", status="promoted"
        )
    dataset = _build(sqlite_db, anchor_levels=0)
    assert {row.episode_id for row in dataset.rows} == {served, warmer, unknown}
    assert dataset.dropped["older_harness"] == 1 and older not in {row.episode_id for row in dataset.rows}
