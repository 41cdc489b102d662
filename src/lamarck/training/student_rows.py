"""A rollout re-rendered as the student would have seen it (context distillation), or the reason it cannot be.

Rollouts run under the teacher harness: retrieved skills, lessons, worked examples and hints may be in the
opening. The gate and users get the student harness, so a row keeps the model's own turns and replaces
everything before them with the student's opening, which the executor recorded with the rollout. A row is
refused when the model's turns would teach what the student cannot do (call a tool it does not have) or
when they repeat the hint (a copied hint teaches nothing the student can reproduce).
"""

from __future__ import annotations

import re

from pydantic import BaseModel

from lamarck.platform.storage.trajectory import (
    HINT,
    HINT_TEXT,
    STUDENT_OPENING,
    STUDENT_TOOLS,
    Message,
    Trajectory,
    render_for_model,
)

MIN_COPIED_CHARS = 20  # a hint sentence at least this long, repeated by the model, counts as copied


class StudentRow(BaseModel):
    messages: list[dict[str, str]]
    train_turns: list[int]
    prompt_length: int
    hint_level: str = "none"


class RowRefused(ValueError):
    """The rollout cannot become a student row; ``reason`` is a short key for the dataset's drop counts."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


def hint_level(trajectory: Trajectory) -> str:
    """The teacher's help in this rollout ('none' when there was none)."""
    for message in trajectory.messages:
        if message.meta.get(HINT):
            return str(message.meta[HINT])
    return "none"


def opening_length(trajectory: Trajectory) -> int:
    """How many messages come before the model's first own reply (few-shot replies are part of the opening)."""
    for index, message in enumerate(trajectory.messages):
        if message.role == "assistant" and not message.meta.get("few_shot"):
            return index
    return len(trajectory.messages)


def trained_turns(messages: list[Message]) -> list[int]:
    """Assistant turns the model produced and the harness accepted: not few-shot, not followed by format feedback."""
    turns = []
    for index, message in enumerate(messages):
        if message.role != "assistant" or message.meta.get("few_shot"):
            continue
        following = messages[index + 1] if index + 1 < len(messages) else None
        if following is not None and following.role == "user" and following.meta.get("feedback"):
            continue
        turns.append(index)
    return turns


def student_row(trajectory: Trajectory) -> StudentRow:
    """The rollout under the student's opening; raises RowRefused with the reason it cannot be trained on."""
    if not trajectory.messages or STUDENT_OPENING not in trajectory.messages[0].meta:
        raise RowRefused("no_student_view", "the rollout did not record the student's opening")
    system = trajectory.messages[0].meta
    opening: list[dict[str, str]] = [dict(m) for m in system[STUDENT_OPENING]]
    tools = set(system.get(STUDENT_TOOLS) or [])
    cut = opening_length(trajectory)
    own = trajectory.messages[cut:]
    turns = [cut + i for i in trained_turns(own)]
    turns = [len(opening) + (index - cut) for index in turns]
    if not turns:
        raise RowRefused("no_own_turn", "the model wrote no accepted reply")
    hints = [str(m.meta[HINT_TEXT]) for m in trajectory.messages[:cut] if m.meta.get(HINT_TEXT)]
    for message in own:
        for call in message.tool_calls or []:
            if call.name not in tools:
                raise RowRefused("tool_not_in_student", f"the model called {call.name!r}, which the student lacks")
        if message.role == "assistant" and (copied := _copied(message.content or "", hints)):
            raise RowRefused("copied_hint", f"the reply repeats the hint {copied!r}")
    messages = [*opening, *render_for_model(Trajectory(messages=own))]
    for rendered in messages:
        for hint in hints:
            if hint and hint in rendered["content"]:
                raise RowRefused("hint_in_row", "the hint text is still in the re-rendered row")
    return StudentRow(
        messages=messages, train_turns=turns, prompt_length=len(opening), hint_level=hint_level(trajectory)
    )


def _copied(reply: str, hints: list[str]) -> str | None:
    for hint in hints:
        for sentence in re.split(r"(?<=[.!?])\s+", hint):
            sentence = sentence.strip()
            if len(sentence) >= MIN_COPIED_CHARS and sentence.rstrip(".!?") in reply:
                return sentence
    return None
