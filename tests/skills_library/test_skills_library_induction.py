"""Induction: verified candidates from successful episodes, deduplicated against the library, never auto-added."""

from __future__ import annotations

from typing import Any

from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database
from lamarck.platform.storage.records import Episode
from lamarck.platform.storage.trajectory import Message, ToolCall, Trajectory
from lamarck.skills_library.induction import InductionConfig, induce_skills
from lamarck.skills_library.library import SkillLibrary
from lamarck.skills_library.skill import SkillCandidate

SQUARES = "```python\ndef sum_of_squares(xs):\n    return sum(x * x for x in xs)\n\nprint(sum_of_squares([1, 2]))\n```"
SQUARES_AGAIN = (
    "```python\ndef sum_of_squares(values):\n    total = 0\n    for v in values:\n        total += v ** 2\n"
    "    return total\n```"
)


SQUARES_PROMPT = "Write a Python function `sum_of_squares(xs)`.\nReturn the sum of the squares of the numbers in xs."


def _episode(
    db: Database,
    *,
    environment: str,
    reference: dict[str, Any],
    messages: list[Message],
    answer: str,
    outcome: str = "passed",
    prompt: str = SQUARES_PROMPT,
) -> Episode:
    with db.session() as session:
        task = repo.add_task(session, environment=environment, difficulty=1, prompt=prompt, reference=reference)
        episode = repo.record_episode(
            session,
            task_id=task.id,
            model_version="m",
            answer=answer,
            outcome=outcome,
            reward=1.0 if outcome == "passed" else 0.0,
            trajectory=Trajectory(messages=messages),
        )
        return episode


def _code_episode(db: Database, answer: str, outcome: str = "passed") -> Episode:
    reference = {
        "function_name": "sum_of_squares",
        "tests": ["_same(sum_of_squares([1, 2]), 5)", "_same(sum_of_squares([]), 0)", "_same(sum_of_squares([-3]), 9)"],
    }
    messages = [Message(role="user", content="task"), Message(role="assistant", content=answer)]
    return _episode(
        db, environment="python_functions", reference=reference, messages=messages, answer=answer, outcome=outcome
    )


def test_function_from_a_code_episode_is_verified_then_deduped(library: SkillLibrary) -> None:
    first = _code_episode(library.db, SQUARES)
    failed = _code_episode(library.db, SQUARES_AGAIN, outcome="failed")
    candidates = induce_skills([first, failed], library=library)
    assert len(candidates) == 1
    candidate = candidates[0]
    assert candidate.name == "sum_of_squares" and candidate.provenance == "induced"
    assert candidate.source_episode_ids == [first.id] and candidate.environment == "python_functions"
    assert "print(" not in candidate.code and "assert sum_of_squares([1, 2]) == 5" in candidate.tests
    assert "sum of the squares" in candidate.description
    assert library.list() == []  # induction proposes; it does not add
    assert library.add(candidate).status == "added"
    assert library.get("sum_of_squares").provenance == "induced"  # type: ignore[union-attr]

    again = _code_episode(library.db, SQUARES)  # same code
    rewritten = _code_episode(library.db, SQUARES_AGAIN)  # other code, same behaviour
    assert induce_skills([again, rewritten], library=library) == []


def _call_messages(calls: list[tuple[str, str, str]], answer: str) -> list[Message]:
    messages = [Message(role="system", content="tools"), Message(role="user", content="task")]
    for index, (name, argument, observation) in enumerate(calls, start=1):
        call = ToolCall(id=f"call_{index}", name=name, arguments={"input": argument})
        messages.append(Message(role="assistant", content=f"CALL {name}: {argument}", tool_calls=[call]))
        messages.append(Message(role="tool", name=name, tool_call_id=f"call_{index}", content=observation))
    messages.append(Message(role="assistant", content=f"ANSWER: {answer}"))
    return messages


def test_chain_of_skill_calls_becomes_a_composed_skill(library: SkillLibrary) -> None:
    library.ensure_builtins()
    calls = [
        ("reverse_text", "hello big world", "dlrow gib olleh"),
        ("reverse_words", "dlrow gib olleh", "olleh gib dlrow"),
    ]
    episode = _episode(
        library.db,
        environment="string_ops",
        reference={"answer": "olleh gib dlrow"},
        messages=_call_messages(calls, "olleh gib dlrow"),
        answer="olleh gib dlrow",
    )
    [candidate] = induce_skills([episode], library=library)
    assert candidate.name == "reverse_text_then_reverse_words"
    assert candidate.tests == "assert reverse_text_then_reverse_words('hello big world') == 'olleh gib dlrow'\n"
    assert library.add(candidate).status == "added"
    assert library.call("reverse_text_then_reverse_words", "ab cd") == "ba dc"

    # a user skill with the same behaviour makes the same chain a duplicate
    reverse_each = SkillCandidate(
        name="reverse_each_word",
        code="def reverse_each_word(text):\n    return ' '.join(w[::-1] for w in text.split())\n",
        tests="assert reverse_each_word('ab cd') == 'ba dc'\n",
    )
    other = _episode(
        library.db,
        environment="string_ops",
        reference={},
        answer="olleh gib dlrow",
        messages=_call_messages(calls, "olleh gib dlrow"),
    )
    library2 = SkillLibrary(library.db, library.sandbox)
    library2.add(reverse_each)
    assert induce_skills([other], library=library2) == []


def test_single_calls_and_failed_observations_give_nothing(library: SkillLibrary) -> None:
    library.ensure_builtins()
    calls = [("calculator", "2 + 3", "5"), ("reverse_text", "x", "error: boom"), ("reverse_words", "boom", "boom")]
    episode = _episode(
        library.db, environment="arithmetic", reference={"answer": 5}, messages=_call_messages(calls, "5"), answer="5"
    )
    assert induce_skills([episode], library=library) == []


def test_a_candidate_very_near_an_existing_skill_in_meaning_is_dropped(memory_library: SkillLibrary) -> None:
    library = memory_library
    upper = SkillCandidate(
        name="to_upper",
        code='def to_upper(text):\n    """Convert a text to upper case."""\n    return text.upper()\n',
        tests="assert to_upper('a') == 'A'\n",
    )
    assert library.add(upper).status == "added"
    answer = "```python\ndef shout(text):\n    return text.upper() + '!'\n```"
    episode = _episode(
        library.db,
        environment="python_functions",
        answer=answer,
        reference={"function_name": "shout", "tests": ["_same(shout('a'), 'A!')"]},
        messages=[Message(role="assistant", content=answer)],
        prompt="Write a Python function `shout(text)`.\nConvert a text to upper case.",
    )
    assert [c.name for c in induce_skills([episode], library=library)] == ["shout"]  # different behaviour
    near = InductionConfig(near_distance=0.5)
    assert induce_skills([episode], library=library, config=near) == []
