"""Episodes in a real database, shaped like the executor and critic record them."""

from __future__ import annotations

import random

from lamarck.curriculum.heldout import training_task
from lamarck.curriculum.registry import get_environment
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database
from lamarck.platform.storage.trajectory import Message, ToolCall, Trajectory

SYSTEM = (
    "You are a careful problem solver. Word problems.\n\nYou can use these tools.\n- calc: evaluate\n\n"
    "Lessons from earlier attempts:\n- Always double check the remainder.\n- Use calc for products.\n"
    "When you know the answer, write a final line of the form\nANSWER: <integer>"
)


def trajectory(
    prompt: str,
    answer: str,
    *,
    few_shot: str | None = None,
    bad_first: bool = False,
    student: dict[str, object] | None = None,
) -> Trajectory:
    """``student``: the student view the executor records with a rollout (its opening and tools); without it the
    episode looks like one recorded before the executor kept it."""
    messages = [Message(role="system", content=SYSTEM, meta={"lessons": ["l1", "l2"], **(student or {})})]
    if few_shot is not None:
        messages += [
            Message(role="user", content=few_shot, meta={"few_shot": True}),
            Message(role="assistant", content="ANSWER: 1", meta={"few_shot": True}),
        ]
    messages.append(Message(role="user", content=prompt))
    if bad_first:
        messages += [
            Message(role="assistant", content="hmm"),
            Message(role="user", content="Write CALL or ANSWER.", meta={"feedback": True}),
        ]
    messages += [
        Message(
            role="assistant",
            content="CALL calc: 2*3",
            tool_calls=[ToolCall(id="call_1", name="calc", arguments={"input": "2*3"})],
        ),
        Message(role="tool", name="calc", tool_call_id="call_1", content="6"),
        Message(role="assistant", content=f"ANSWER: {answer}"),
    ]
    return Trajectory(messages=messages)


def add_task(db: Database, difficulty: int = 1, seed: int = 0, prompt: str | None = None) -> tuple[str, str]:
    env = get_environment("arithmetic")
    spec = training_task(env, difficulty, random.Random(seed))
    with db.session() as session:
        task = repo.add_task(session, environment="arithmetic", difficulty=difficulty, prompt=prompt or spec.prompt)
        return task.id, task.prompt


def add_episode(
    db: Database,
    task_id: str,
    prompt: str,
    *,
    outcome: str = "passed",
    answer: str = "6",
    repaired_from: str | None = None,
    **shape: object,
) -> str:
    with db.session() as session:
        episode = repo.record_episode(
            session,
            task_id=task_id,
            model_version="smollm2-135m",
            trajectory=trajectory(prompt, answer, **shape),
            outcome=outcome,  # type: ignore[arg-type]
            repaired_from_id=repaired_from,
        )
        return episode.id
