"""The process filter: a pass becomes a row only if its answer follows from its own calculations."""

from __future__ import annotations

import pytest

from lamarck.curriculum.environment import TaskSpec
from lamarck.platform.storage.trajectory import Message, ToolCall, Trajectory
from lamarck.training.process_filter import chain_process, process_problem, tidy_process

TASK = TaskSpec(
    environment="arithmetic",
    difficulty=3,
    prompt="Mia has 16 coins. She loses 2. She finds 12 more. How many coins does Mia have now?",
    reference={"answer": 26, "expression": "(16 - 2) + 12"},
)


def _trajectory(*calls: tuple[str, str], final: str) -> Trajectory:
    messages = [Message(role="system", content="tools"), Message(role="user", content=TASK.prompt)]
    for index, (expression, result) in enumerate(calls):
        call = ToolCall(id=f"call_{index}", name="calculator", arguments={"input": expression})
        messages.append(Message(role="assistant", content=f"CALL calculator: {expression}", tool_calls=[call]))
        messages.append(Message(role="tool", name="calculator", tool_call_id=f"call_{index}", content=result))
    messages.append(Message(role="assistant", content=final))
    return Trajectory(messages=messages)


def test_an_answer_computed_from_the_tasks_quantities_is_sound() -> None:
    assert process_problem(TASK, _trajectory(("(16 - 2) + 12", "26"), final="ANSWER: 26"), "26") is None
    stepwise = _trajectory(("16 - 2", "14"), ("14 + 12", "26"), final="ANSWER: 26")
    assert process_problem(TASK, stepwise, "26") is None  # an earlier result may feed the next call


@pytest.mark.parametrize(
    ("trajectory", "reason"),
    [
        (_trajectory(final="ANSWER: 26"), "no_calculation"),  # a bare number
        (_trajectory(("16 + 12", "28"), final="ANSWER: 26"), "quantity_unused"),  # a lucky guess after a wrong sum
        (_trajectory(("16 - 2 + 12", "26"), ("30 - 4", "26"), final="ANSWER: 26"), "unfounded_number"),
        (
            _trajectory(("(16 - 2) + 12 = 25", "26 (evaluated ...)"), ("30 - 4", "26"), final="ANSWER: 26"),
            "unfounded_number",
        ),  # a guess after '=' is ignored, as the calculator ignores it; the left side must hold
        (_trajectory(("(16 - 2) + 12", "26"), ("2 * 12", "24"), final="ANSWER: 26"), "answer_not_from_work"),
    ],
)
def test_guesses_and_unfounded_answers_are_refused(trajectory: Trajectory, reason: str) -> None:
    problem = process_problem(TASK, trajectory, "26")
    assert problem is not None and problem.startswith(reason)


def test_environments_without_a_process_check_trust_the_verifier() -> None:
    task = TASK.model_copy(update={"environment": "string_ops"})
    assert process_problem(task, _trajectory(final="ANSWER: x"), "x") is None


def test_a_call_with_a_guess_is_sound_and_tidied_to_the_call_the_student_should_learn() -> None:
    trajectory = _trajectory(
        ("(16 - 2) + 12 = 25", "26 (evaluated `(16 - 2) + 12` and ignored `= 25`: ...)"), final="ANSWER: 26"
    )
    assert process_problem(TASK, trajectory, "26") is None
    tidy = tidy_process(TASK, trajectory)
    call = next(m for m in tidy.messages if m.tool_calls)
    assert call.content == "CALL calculator: (16 - 2) + 12" and "25" not in call.tool_calls[0].arguments
    assert next(m for m in tidy.messages if m.role == "tool").content == "26"
    assert "= 25" in next(m for m in trajectory.messages if m.tool_calls).content  # the episode itself is unchanged


def test_a_whole_expression_call_becomes_one_call_per_operation_with_the_calculators_results() -> None:
    trajectory = _trajectory(("(16 - 2) + 12", "26"), final="ANSWER: 26")
    chained = chain_process(TASK, trajectory)
    calls = [m.content for m in chained.messages if m.tool_calls]
    assert calls == ["CALL calculator: 16 - 2", "CALL calculator: 14 + 12"]
    assert [m.content for m in chained.messages if m.role == "tool"] == ["14", "26"]
    ids = [m.tool_calls[0].id for m in chained.messages if m.tool_calls]
    assert [m.tool_call_id for m in chained.messages if m.role == "tool"] == ids and len(set(ids)) == 2
    assert chained.messages[-1].content == "ANSWER: 26" and chained.messages[:2] == trajectory.messages[:2]
    assert process_problem(TASK, chained, "26") is None  # the chain is as sound as the call it replaces


def test_calls_that_are_one_operation_wrong_or_not_arithmetic_are_kept() -> None:
    single = _trajectory(("16 - 2", "14"), ("14 + 12", "26"), final="ANSWER: 26")
    assert chain_process(TASK, single) == single
    misrecorded = _trajectory(("(16 - 2) + 12", "27"), final="ANSWER: 27")
    assert chain_process(TASK, misrecorded) == misrecorded
    fraction = _trajectory(("(16 - 2) / 12", "1.1666"), final="ANSWER: 1")
    assert chain_process(TASK, fraction) == fraction
    other = TASK.model_copy(update={"environment": "string_ops"})
    assert chain_process(other, _trajectory(("(16 - 2) + 12", "26"), final="ANSWER: 26")).messages[2].content == (
        "CALL calculator: (16 - 2) + 12"
    )
