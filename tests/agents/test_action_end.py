"""``ACTION_END``, the executor's ``stop_after`` pattern: stopping where it first matches never changes the action.

Replies are built from the lines a small model writes (prose, calls, answers, guessed results, fenced code) and fed
to the pattern as an engine would, a token at a time; wherever it first matches, the reply cut there must parse to
exactly what the whole reply parses to."""

from __future__ import annotations

import random
import re

import pytest

from lamarck.agents.actions import ACTION_END, parse_action

PATTERN = re.compile(ACTION_END)
LINES = [
    "Let me think step by step.",
    "First I add the numbers.",
    "",
    "  ",
    "RESULT: 12",
    "The answer is 7.",
    "CALL calculator: 3 + 4",
    "CALL calculator: (16 - 2) + 12 = 26",
    "**CALL** `calculator`: 2*3",
    "CALL python:",
    "CALL calculator(5 * 6)",
    "call calculator:",
    "Calling the calculator now",
    "TOOL: calculator 9-1",
    "ANSWER: 7",
    "**Answer:** 42",
    "FINAL ANSWER = 3",
    "ANSWER:",
    "ANSWER: ```python",
    "answer: 5 apples",
    "```python",
    "```",
    "def add(a, b):",
    "    return a + b",
    "`inline` code",
    "``",
    "> ANSWER: 8",
]
KNOWN = {"calculator", "python"}


def reply(rng: random.Random) -> str:
    lines = [rng.choice(LINES) for _ in range(rng.randint(1, 9))]
    return "\n".join(lines) + rng.choice(["", "\n", "\n\n"])


def stopped(text: str, rng: random.Random) -> str:
    """What an engine returns: tokens of 1-6 characters, the pattern checked after each one."""
    end = 0
    while end < len(text):
        end = min(len(text), end + rng.randint(1, 6))
        match = PATTERN.search(text[:end])
        if match is not None:
            return text[: match.end()]
    return text


@pytest.mark.parametrize("seed", range(4))
def test_stopping_at_the_pattern_never_changes_the_action(seed: int) -> None:
    rng = random.Random(seed)
    cut_somewhere = 0
    for _ in range(2500):
        text = reply(rng)
        short = stopped(text, rng)
        cut_somewhere += short != text
        assert parse_action(short, known_tools=KNOWN) == parse_action(text, known_tools=KNOWN), (text, short)
    assert cut_somewhere > 1000  # most replies carry a tail after their first action, and it is not decoded


def test_the_pattern_ends_each_kind_of_action_where_its_text_ends() -> None:
    cases = {
        "I will use the tool.\nCALL calculator: 3 + 4\nRESULT: 7\nANSWER: 7": "CALL calculator: 3 + 4",
        "ANSWER: 12\nThat is because": "ANSWER: 12",
        "ANSWER:\n```python\ndef f():\n    return 1\n```\nThis function": "```\n",
        "CALL python:\n```\nprint(2)\n```\nRESULT: 2": "```\n",
    }
    for text, ending in cases.items():
        match = PATTERN.search(text)
        assert match is not None and text[: match.end()].rstrip("\n").endswith(ending.rstrip("\n"))
        assert parse_action(text[: match.end()]).text == parse_action(text).text
    # an answer that opens its fence on the ANSWER line takes the rest of the reply: nothing to stop at
    assert PATTERN.search("ANSWER: ```python\nx = 1\n```\nCALL calculator: 1\nmore") is None
    # a call waits for the next line, which could open the fenced input it takes
    assert PATTERN.search("CALL python:\n") is None and PATTERN.search("CALL python:\n`") is None
