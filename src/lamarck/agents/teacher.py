"""The teacher's help at rollout: a ladder of hints, from none to the whole privileged solution.

The student harness is what the gate and users get. The teacher harness is the student's plus help for one
task, and is used only for rollouts: a general glossary of the environment, a few of the model's own verified
successes as demonstrations, or part (then all) of the environment's reference solution. Every piece of help
is marked in the trajectory (``meta["hint"]``), so a training row can be re-rendered with the student's opening
(context distillation) and checked for leaks.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from lamarck.agents.harness import FewShotExample
from lamarck.curriculum.environment import Environment, TaskSpec, provides_hints
from lamarck.platform.storage.trajectory import HINT, HINT_TEXT, OBSERVATION_PREFIX, Message, Trajectory

PARTIAL_SHARE = 0.5
PRIVILEGED_TEMPERATURE = 0.3
"""Sampling temperature cap at the privileged rungs. Given the whole expression at T=0.7, the base model copied it
into a correct calculator call in about one rollout of ten (the rest garbled it: `89 - 10 + 29 - 29 = 39`); the
hint already supplies the solution, so diversity buys nothing there."""


class HintLevel(StrEnum):
    """The ladder's rungs, weakest first."""

    NONE = "none"
    GLOSSARY = "glossary"
    DEMONSTRATIONS = "demonstrations"
    PARTIAL = "partial"
    FULL = "full"

    @property
    def privileged(self) -> bool:
        """Help drawn from the task's hidden reference solution."""
        return self in (HintLevel.PARTIAL, HintLevel.FULL)


LADDER: tuple[HintLevel, ...] = tuple(HintLevel)


class TeacherHelp(BaseModel):
    """What the teacher adds to one task's opening: a hint after the task, worked examples before it."""

    model_config = ConfigDict(frozen=True)

    level: HintLevel
    hint: str = ""
    demonstrations: tuple[FewShotExample, ...] = ()
    max_temperature: float | None = None  # caps the harness's sampling temperature for this task's rollouts


class NoHelp(LookupError):
    """The environment cannot give this rung of help for this task (the reason says why)."""


def help_for(
    task: TaskSpec,
    environment: Environment,
    level: HintLevel,
    demonstrations: Sequence[FewShotExample] = (),
) -> TeacherHelp:
    """The help of ``level`` for ``task``; raises NoHelp when the environment has none of that kind."""
    if level is HintLevel.NONE:
        return TeacherHelp(level=level)
    if level is HintLevel.DEMONSTRATIONS:
        chosen = tuple(d for d in demonstrations if d.task != task.prompt)
        if not chosen:
            raise NoHelp(f"no verified demonstrations for {task.environment} yet")
        return TeacherHelp(level=level, demonstrations=chosen)
    if not provides_hints(environment):
        raise NoHelp(f"environment {environment.name!r} provides no hints (glossary, solution_hint)")
    if level is HintLevel.GLOSSARY:
        text = environment.glossary().strip()  # type: ignore[attr-defined]
    else:
        share = PARTIAL_SHARE if level is HintLevel.PARTIAL else 1.0
        text = (environment.solution_hint(task, share) or "").strip()  # type: ignore[attr-defined]
    if not text:
        raise NoHelp(f"environment {environment.name!r} gave no {level.value} hint for this task")
    return TeacherHelp(level=level, hint=text, max_temperature=PRIVILEGED_TEMPERATURE if level.privileged else None)


def apply_help(messages: list[Message], help: TeacherHelp) -> list[Message]:
    """The opening with the teacher's help: demonstrations before the task message, the hint appended to it."""
    if help.level is HintLevel.NONE:
        return messages
    *before, task_message = messages
    shown: list[Message] = []
    for example in help.demonstrations:
        meta = {"few_shot": True, HINT: help.level.value}
        shown.append(Message(role="user", content=example.task, meta=meta))
        for index, turn in enumerate(example.turns):
            role, content = ("assistant", turn) if index % 2 == 0 else ("user", f"{OBSERVATION_PREFIX}{turn}")
            shown.append(Message(role=role, content=content, meta=meta))
    content = task_message.content or ""
    meta = {**task_message.meta}
    if help.hint:
        content = f"{content}\n\nHint: {help.hint}"
        meta.update({HINT: help.level.value, HINT_TEXT: help.hint})
    return [*before, *shown, task_message.model_copy(update={"content": content, "meta": meta})]


def demonstration(task: TaskSpec, trajectory: Trajectory) -> FewShotExample | None:
    """A verified success as a worked example: the task, then the model's own replies and the tools' results."""
    turns: list[str] = []
    for message in trajectory.messages:
        if message.meta.get("few_shot") or message.role == "system":
            continue
        if message.role == "assistant":
            turns.append(message.content or "")
        elif message.role == "tool" and turns:
            turns.append(message.content or "")
        elif message.role == "user" and turns:
            return None  # format feedback in the middle: not an example worth showing
    if not turns or len(turns) % 2 == 0:
        return None
    return FewShotExample(task=task.prompt, turns=tuple(turns))
