"""String transformations composed from small, reusable operations; difficulty = ops composed and text length."""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lamarck.curriculum.environment import Reward, TaskSpec, ToolSpec, check_difficulty, check_task

VOWELS = set("aeiouAEIOU")


def reverse(text: str) -> str:
    return text[::-1]


def upper(text: str) -> str:
    return text.upper()


def lower(text: str) -> str:
    return text.lower()


def swap_case(text: str) -> str:
    return text.swapcase()


def remove_vowels(text: str) -> str:
    return "".join(ch for ch in text if ch not in VOWELS)


def caesar(text: str, shift: int) -> str:
    def move(ch: str) -> str:
        if "a" <= ch <= "z":
            return chr((ord(ch) - 97 + shift) % 26 + 97)
        if "A" <= ch <= "Z":
            return chr((ord(ch) - 65 + shift) % 26 + 65)
        return ch

    return "".join(move(ch) for ch in text)


def dedupe_chars(text: str) -> str:
    seen: set[str] = set()
    kept = []
    for ch in text:
        if ch == " " or ch not in seen:
            kept.append(ch)
            seen.add(ch)
    return "".join(kept)


def sort_words(text: str) -> str:
    return " ".join(sorted(text.split(" ")))


def reverse_words(text: str) -> str:
    return " ".join(reversed(text.split(" ")))


def reverse_each_word(text: str) -> str:
    return " ".join(word[::-1] for word in text.split(" "))


def capitalize_words(text: str) -> str:
    return " ".join(word[:1].upper() + word[1:].lower() for word in text.split(" "))


def rotate_left(text: str, k: int) -> str:
    if not text:
        return text
    k %= len(text)
    return text[k:] + text[:k]


def replace_char(text: str, old: str, new: str) -> str:
    return text.replace(old, new)


@dataclass(frozen=True)
class Op:
    name: str
    fn: Callable[..., str]
    describe: str
    params: Callable[[random.Random], dict[str, Any]] | None = None
    min_level: int = 1


OPS: tuple[Op, ...] = (
    Op("reverse", reverse, "reverse the whole string"),
    Op("upper", upper, "convert every letter to upper case"),
    Op("lower", lower, "convert every letter to lower case"),
    Op("remove_vowels", remove_vowels, "remove every vowel (a, e, i, o, u in either case)"),
    Op("reverse_words", reverse_words, "reverse the order of the words (separated by single spaces)", min_level=2),
    Op("sort_words", sort_words, "sort the words by character code (upper case sorts first)", min_level=2),
    Op("reverse_each_word", reverse_each_word, "reverse the letters of each word, keeping the word order", min_level=2),
    Op("capitalize_words", capitalize_words, "upper-case the first letter of each word, lower-case the rest", min_level=2),
    Op("swap_case", swap_case, "swap the case of every letter", min_level=3),
    Op(
        "caesar",
        caesar,
        "shift every letter {shift} places forward in the alphabet, wrapping z to a and keeping case",
        lambda rng: {"shift": rng.randint(1, 25)},
        min_level=3,
    ),
    Op(
        "dedupe_chars",
        dedupe_chars,
        "remove every character that already appeared earlier in the string (case-sensitive; spaces are kept)",
        min_level=3,
    ),
    Op(
        "rotate_left",
        rotate_left,
        "move the first {k} characters of the string to its end",
        lambda rng: {"k": rng.randint(1, 4)},
        min_level=4,
    ),
    Op(
        "replace_char",
        replace_char,
        "replace every '{old}' with '{new}'",
        lambda rng: {"old": rng.choice("aeinorst"), "new": rng.choice("xyzqjk")},
        min_level=4,
    ),
)
OPS_BY_NAME = {op.name: op for op in OPS}

# level -> (number of composed ops, (min words, max words))
LEVELS: dict[int, tuple[int, tuple[int, int]]] = {
    1: (1, (1, 1)),
    2: (1, (2, 3)),
    3: (2, (2, 3)),
    4: (2, (3, 4)),
    5: (3, (3, 5)),
    6: (4, (4, 6)),
    7: (5, (5, 7)),
    8: (6, (6, 9)),
}

WORDS = (
    "cat", "dog", "sun", "tree", "river", "stone", "light", "green", "table", "music", "paper", "cloud", "bright",
    "garden", "pocket", "silver", "window", "planet", "rocket", "forest", "candle", "yellow", "bridge", "winter",
    "marble", "copper", "violet", "thunder", "blanket", "crystal", "lantern", "harbor", "meadow", "pepper", "quartz",
    "jungle", "kitten", "lemon", "mango", "north", "orbit", "puzzle", "salt", "tiger", "velvet", "wagon", "zebra",
)  # fmt: skip

ANSWER_FORMAT = "Think step by step, then end with a final line 'ANSWER: <final string>' (no quotes)."


class StringOpsEnv:
    name = "string_ops"
    description = "Apply a sequence of string transformations (reverse, case, vowels, Caesar shift, word order, ...)."
    difficulties: tuple[int, ...] = tuple(LEVELS)
    answer_format = ANSWER_FORMAT
    training_allowed = True

    def generate(self, difficulty: int, rng: random.Random) -> TaskSpec:
        check_difficulty(self.name, self.difficulties, difficulty)
        n_ops, (low, high) = LEVELS[difficulty]
        while True:
            words = [rng.choice(WORDS) for _ in range(rng.randint(low, high))]
            if difficulty >= 5:
                words = [w.capitalize() if rng.random() < 0.3 else w for w in words]
            text = " ".join(words)
            pool = [op for op in OPS if op.min_level <= difficulty]
            steps = []
            for _ in range(n_ops):
                op = rng.choice([o for o in pool if not steps or o.name != steps[-1][0].name])
                steps.append((op, op.params(rng) if op.params else {}))
            result, trace = text, []
            for op, params in steps:
                result = op.fn(result, **params)
                trace.append(result)
            if result and result == result.strip() and "  " not in result and result != text:
                break
        lines = [f"{i}. {op.describe.format(**params)}" for i, (op, params) in enumerate(steps, start=1)]
        prompt = (
            f'Start with the text "{text}" and apply these steps in order:\n'
            + "\n".join(lines)
            + "\nWhat is the final text?"
        )
        return TaskSpec(
            environment=self.name,
            difficulty=difficulty,
            prompt=prompt,
            reference={
                "answer": result,
                "input": text,
                "ops": [{"name": op.name, "params": params} for op, params in steps],
                "intermediate": trace,
            },
            metadata={"n_ops": n_ops, "length": len(text), "ops": [op.name for op, _ in steps]},
        )

    def verify(self, task: TaskSpec, answer: str) -> Reward:
        check_task(self.name, task)
        expected = str(task.reference["answer"])
        got = extract_string_answer(answer)
        if got is None:
            return Reward.fail("empty answer")
        if got == expected:
            return Reward(score=1.0, passed=True, details="exact match")
        if got.casefold() == expected.casefold():
            return Reward.fail(f"case differs: expected {expected!r}, got {got!r}")
        return Reward.fail(f"expected {expected!r}, got {got!r}")

    def tools(self) -> list[ToolSpec]:
        return []


_ANSWER_LINE = re.compile(
    r"^\s*(?:\*\*)?(?:final\s+)?answer(?:\*\*)?\s*[:=]\s*(?:\*\*)?(.*?)\s*$", re.IGNORECASE | re.MULTILINE
)
_QUOTES = ('"', "'", "`", "“”", "‘’")


def extract_string_answer(answer: str) -> str | None:
    """The final string: the last 'ANSWER: ...' line, else the last non-empty line; one pair of quotes is stripped."""
    matches = _ANSWER_LINE.findall(answer)
    if matches:
        candidate = matches[-1]
    else:
        lines = [line for line in answer.splitlines() if line.strip()]
        if not lines:
            return None
        candidate = lines[-1].strip()
    candidate = candidate.strip()
    if candidate.endswith("**"):
        candidate = candidate[:-2].rstrip()
    for quote in _QUOTES:
        opening, closing = (quote[0], quote[-1])
        if len(candidate) >= 2 and candidate[0] == opening and candidate[-1] == closing:
            candidate = candidate[1:-1]
            break
    return candidate if candidate else None


def apply_ops(text: str, ops: list[dict[str, Any]]) -> str:
    """Replay a reference op list (useful to critics and skill tests)."""
    for step in ops:
        text = OPS_BY_NAME[step["name"]].fn(text, **step.get("params", {}))
    return text
