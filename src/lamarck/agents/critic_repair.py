"""Repairs without the answer: what the critic's repair call is shown, and the trajectory a kept repair becomes.

A repair is a corrected reply to a task the executor failed, kept for training once the verifier passes it. The
repair call sees the task, the critic's first wrong step (the attempt's own words at that step, as the judge
numbered them) and a hint from the environment (its partial solution hint, through the ``Hints`` protocol), never
the expected answer nor the verifier's feedback, which names it ("expected 42, got 41"). A hint that would state
the answer is left out.

A kept repair is its own source of training data: the task message of its trajectory carries
``meta["hint"] = "critic_repair"`` and the hint text, so rows are counted by source apart from native ones
(``DistillationSet.by_hint``), and a reply that copies the hint is refused like any copied hint.
"""

from __future__ import annotations

import re

from lamarck.agents.harness import load_prompt
from lamarck.agents.teacher import PARTIAL_SHARE
from lamarck.curriculum.environment import Environment, TaskSpec, provides_hints
from lamarck.platform.storage.trajectory import HINT, HINT_TEXT, Message, Trajectory

REPAIR_SOURCE = "critic_repair"  # the hint source of a repaired row, beside the teacher's rungs
MAX_STEP_CHARS = 600


def attempt_steps(messages: list[Message]) -> list[str]:
    """The attempt's own replies in the judge's numbering (step 1 is the first; few-shot examples are not steps)."""
    return [m.content or "" for m in messages if m.role == "assistant" and not m.meta.get("few_shot")]


def step_number(first_error: str | None) -> int | None:
    """The judge names the first wrong step in free text ("2", "step 2: ..."): its first number, if it has one."""
    found = re.search(r"\d+", first_error) if first_error else None
    return int(found.group()) if found else None


def first_step_sentence(messages: list[Message], first_error: str | None) -> str:
    """What the repair is told about where the attempt went wrong: the critic's first wrong step, in its words."""
    steps = attempt_steps(messages)
    number = step_number(first_error)
    if number is not None and 1 <= number <= len(steps):
        text = " ".join(steps[number - 1].split())
        text = text if len(text) <= MAX_STEP_CHARS else text[:MAX_STEP_CHARS] + " ..."
        return f'Its first wrong step, as the critic found it, was step {number}: "{text}"'
    if first_error and number is None:
        return f"The critic says it first went wrong here: {first_error}"
    return "The critic did not point to a wrong step."


def reveals_answer(text: str, task: TaskSpec) -> bool:
    """Whether ``text`` states the task's expected answer (as a whole token) where the task itself does not."""
    answer = str(task.reference.get("answer", "")).strip()
    if not answer:
        return False
    token = re.compile(r"(?<![\w.])" + re.escape(answer) + r"(?![\w]|\.\d)")
    return bool(token.search(text)) and not token.search(task.prompt)


def repair_hint(environment: Environment, task: TaskSpec) -> str | None:
    """The environment's partial solution hint, or None where it has none or the hint would give the answer away."""
    if not provides_hints(environment):
        return None
    try:
        hint = (environment.solution_hint(task, PARTIAL_SHARE) or "").strip()  # type: ignore[attr-defined]
    except Exception:  # a hint bug costs the repair its hint, nothing more
        return None
    if not hint or reveals_answer(hint, task):
        return None
    return hint


def repair_prompt(task: TaskSpec, first_step: str, hint: str | None, answer_format: str) -> str:
    return load_prompt("critic_repair.md").format(
        first_step=first_step,
        hint=f"A hint: {hint}\n" if hint else "",
        task=task.prompt,
        answer_format=answer_format,
    )


def repaired_trajectory(task: TaskSpec, original: Trajectory, reply: str, hint: str | None) -> Trajectory:
    """The attempt's opening (without the teacher's help it had) and the repaired reply, marked as a repair.

    The opening is every message before the attempt's first own reply: the system prompt, the harness's worked
    examples and the task. The rollout's teacher help is dropped (the repair never saw it), and the task message is
    marked with the repair's source and hint, which training reads."""
    opening: list[Message] = []
    for message in original.messages:
        if message.role == "assistant" and not message.meta.get("few_shot"):
            break
        if message.role == "tool" or (message.meta.get("few_shot") and HINT in message.meta):
            continue  # tool results before any own reply, and the teacher's demonstrations
        opening.append(_without_help(message))
    tasks = [i for i, m in enumerate(opening) if m.role == "user" and not m.meta.get("few_shot")]
    if not tasks:
        opening.append(Message(role="user", content=task.prompt))
        tasks = [len(opening) - 1]
    marked = opening[tasks[-1]]
    meta = {**marked.meta, HINT: REPAIR_SOURCE, **({HINT_TEXT: hint} if hint else {})}
    opening[tasks[-1]] = marked.model_copy(update={"meta": meta})
    return Trajectory(messages=[*opening, Message(role="assistant", content=reply, meta={"repaired": True})])


def _without_help(message: Message) -> Message:
    meta = {k: v for k, v in message.meta.items() if k not in (HINT, HINT_TEXT)}
    content = message.content
    shown = message.meta.get(HINT_TEXT)
    if content and shown and content.endswith(f"\n\nHint: {shown}"):
        content = content[: -len(f"\n\nHint: {shown}")]
    return message.model_copy(update={"meta": meta, "content": content})
