"""String transformations composed from small, reusable operations; difficulty = ops composed and text length."""

from __future__ import annotations

import json
import math
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
    min_level: int = 4
    variants: tuple[str, ...] = ()  # other wordings of ``describe``, same placeholders

    def wordings(self) -> tuple[str, ...]:
        return (self.describe, *self.variants)


OPS: tuple[Op, ...] = (
    Op("reverse", reverse, "reverse the whole string", min_level=3,
       variants=("write the text backwards", "reverse the order of all its characters")),
    Op("upper", upper, "convert every letter to upper case", min_level=2,
       variants=("write it in capital letters", "make every letter uppercase")),
    Op("lower", lower, "convert every letter to lower case", min_level=3,
       variants=("write it in small letters", "make every letter lowercase")),
    Op("remove_vowels", remove_vowels, "remove every vowel (a, e, i, o, u in either case)",
       variants=("delete all vowels (a, e, i, o, u, upper or lower case)",)),
    Op("reverse_words", reverse_words, "reverse the order of the words (separated by single spaces)", min_level=5,
       variants=("put the words in the opposite order, keeping each word as it is",)),
    Op("sort_words", sort_words, "sort the words by character code (upper case sorts first)", min_level=5),
    Op("reverse_each_word", reverse_each_word, "reverse the letters of each word, keeping the word order",
       min_level=5, variants=("write each word backwards but keep the words where they are",)),
    Op("capitalize_words", capitalize_words, "capitalize each word (first letter upper case, the rest lower case)",
       min_level=2, variants=("upper-case the first letter of each word, lower-case the rest",)),
    Op("swap_case", swap_case, "swap the case of every letter", min_level=6,
       variants=("turn upper-case letters into lower case and lower-case letters into upper case",)),
    Op(
        "caesar",
        caesar,
        "shift every letter {shift} places forward in the alphabet, wrapping z to a and keeping case",
        lambda rng: {"shift": rng.randint(1, 25)},
        min_level=6,
    ),
    Op(
        "dedupe_chars",
        dedupe_chars,
        "remove every character that already appeared earlier in the string (case-sensitive; spaces are kept)",
        min_level=6,
    ),
    Op(
        "rotate_left",
        rotate_left,
        "move the first {k} characters of the string to its end",
        lambda rng: {"k": rng.randint(1, 4)},
        min_level=7,
    ),
    Op(
        "replace_char",
        replace_char,
        "replace every '{old}' with '{new}'",
        lambda rng: {"old": rng.choice("aeinorst"), "new": rng.choice("xyzqjk")},
        min_level=7,
        variants=("change each '{old}' into '{new}'",),
    ),
)  # fmt: skip
OPS_BY_NAME = {op.name: op for op in OPS}


@dataclass(frozen=True)
class Level:
    n_ops: int
    words: tuple[int, int]
    max_word_length: int = 99
    capitals: float = 0.0  # chance that a word is capitalised (or, at the easy levels, all upper case)


# Level 1 names the tool that does the whole job, on one made-up word: the base model succeeds there by calling it
# and copying its result. Levels 2-4 (levels 1-3 before level 1 came first) are one op on one real word, described
# in words with the tool unnamed; 5-11 use more words and compose more ops, some without a tool (Caesar shift,
# rotation, replacement), which must be done by hand.
LEVELS: dict[int, Level] = {
    1: Level(1, (1, 1)),
    2: Level(1, (1, 1), max_word_length=5),
    3: Level(1, (1, 1), capitals=0.4),
    4: Level(1, (1, 1)),
    5: Level(1, (2, 3)),
    6: Level(2, (2, 3)),
    7: Level(2, (3, 4)),
    8: Level(3, (3, 5), capitals=0.3),
    9: Level(4, (4, 6), capitals=0.3),
    10: Level(5, (5, 7), capitals=0.3),
    11: Level(6, (6, 9), capitals=0.3),
}
TOOL_LEVEL = 1
TOOL_LEVEL_OPS = ("upper", "reverse", "capitalize_words", "remove_vowels")
ALL_CAPS_UP_TO = 3  # at levels 2-3 a "capital" word is all upper case (lower and capitalize then change it)

WORDS = (
    "cat", "dog", "sun", "tree", "river", "stone", "light", "green", "table", "music", "paper", "cloud", "bright",
    "garden", "pocket", "silver", "window", "planet", "rocket", "forest", "candle", "yellow", "bridge", "winter",
    "marble", "copper", "violet", "thunder", "blanket", "crystal", "lantern", "harbor", "meadow", "pepper", "quartz",
    "jungle", "kitten", "lemon", "mango", "north", "orbit", "puzzle", "salt", "tiger", "velvet", "wagon", "zebra",
)  # fmt: skip

# Level 1's words are made up from these syllables: far more words than any slice reserves, so its held-out tasks
# are protected by their computation (word and op), not only by their prompt.
_ONSETS = "bdfgklmnprstvz"
_VOWELS_LOWER = "aeiou"


def made_up_word(rng: random.Random) -> str:
    """Two different consonant-vowel syllables ("kedo"): 4 900 words, short enough for the model to copy."""
    syllables = [c + v for c in _ONSETS for v in _VOWELS_LOWER]
    first = rng.choice(syllables)
    return first + rng.choice([s for s in syllables if s != first])


_TOOL_NAMED = (
    'Use the {tool} tool on the word "{text}". What does it give?',
    'Apply {tool} to "{text}" and give the result.',
    'Call {tool} on "{text}"; it will {step}. What is the result?',
    'The {tool} tool can {step}. What is {tool} of "{text}"?',
)
_SINGLE = (
    'Take the word "{text}" and {step}. What is the result?',
    'What do you get when you take "{text}" and {step}?',
    'Start with the text "{text}" and {step}. What is the final text?',
)
_MULTI = (
    ('Start with the text "{text}" and apply these steps in order:\n', "\nWhat is the final text?"),
    ('Take the string "{text}". Apply the following steps one after another:\n', "\nWhat string do you get?"),
    ('Here is a text: "{text}"\nTransform it with these steps, in order:\n', "\nGive the resulting text."),
)

ANSWER_FORMAT = "Think step by step, then end with a final line 'ANSWER: <final string>' (no quotes)."
DESCRIPTION = (
    "Apply a sequence of string transformations (reverse, case, vowels, Caesar shift, word order, ...). "
    "An operation that has a tool is done by calling the tool on the text; answer with what it returns."
)


class StringOpsEnv:
    name = "string_ops"
    description = DESCRIPTION
    difficulties: tuple[int, ...] = tuple(LEVELS)
    answer_format = ANSWER_FORMAT
    training_allowed = True

    def generate(self, difficulty: int, rng: random.Random) -> TaskSpec:
        check_difficulty(self.name, self.difficulties, difficulty)
        if difficulty == TOOL_LEVEL:
            return self._tool_named(rng)
        level = LEVELS[difficulty]
        words_pool = [w for w in WORDS if len(w) <= level.max_word_length]
        pool = [op for op in OPS if op.min_level <= difficulty]
        while True:
            words = [rng.choice(words_pool) for _ in range(rng.randint(*level.words))]
            if difficulty <= ALL_CAPS_UP_TO:
                words = [w.upper() if rng.random() < level.capitals else w for w in words]
            else:
                words = [w.capitalize() if rng.random() < level.capitals else w for w in words]
            text = " ".join(words)
            steps: list[tuple[Op, dict[str, Any]]] = []
            for _ in range(level.n_ops):
                op = rng.choice([o for o in pool if not steps or o.name != steps[-1][0].name])
                steps.append((op, op.params(rng) if op.params else {}))
            result, trace = text, []
            for op, params in steps:
                result = op.fn(result, **params)
                trace.append(result)
            if result and result == result.strip() and "  " not in result and result != text:
                break
        described = [rng.choice(op.wordings()).format(**params) for op, params in steps]
        if len(steps) == 1:  # one step reads as a sentence: a numbered list of one made the model answer "1. ..."
            prompt = rng.choice(_SINGLE).format(text=text, step=described[0])
        else:
            head, tail = rng.choice(_MULTI)
            lines = [f"{i}. {step}" for i, step in enumerate(described, start=1)]
            prompt = head.format(text=text) + "\n".join(lines) + tail
        return _task(difficulty, prompt, text, steps, trace, n_ops=level.n_ops)

    def _tool_named(self, rng: random.Random) -> TaskSpec:
        """One op on one made-up word, the tool that does it named in the task: calling it is the whole solution."""
        op = OPS_BY_NAME[rng.choice(TOOL_LEVEL_OPS)]
        text = made_up_word(rng)
        result = op.fn(text)
        step = rng.choice(op.wordings())
        prompt = rng.choice(_TOOL_NAMED).format(tool=TOOL_NAMES[op.name], text=text, step=step)
        return _task(TOOL_LEVEL, prompt, text, [(op, {})], [result], n_ops=1, tool_named=True)

    def task_key(self, task: TaskSpec) -> str:
        """The underlying transformation: the input text and the op list with parameters, not the wording."""
        return str(task.reference["input"]) + "|" + json.dumps(task.reference["ops"], sort_keys=True)

    def glossary(self) -> str:
        return glossary()

    def solution_hint(self, task: TaskSpec, share: float) -> str | None:
        return solution_hint(task, share)

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
        return [
            ToolSpec(
                name=TOOL_NAMES[op.name],
                description=f"{op.describe[:1].upper()}{op.describe[1:]}. Input: the text only.",
                parameters={
                    "type": "object",
                    "properties": {"text": {"type": "string", "description": "the text to transform, without quotes"}},
                    "required": ["text"],
                },
                fn=op_tool(op.name),
            )
            for op in OPS
            if op.name in TOOL_OPS
        ]


# Operations without parameters have a tool, named after the op except where the model reaches for a shorter
# name (it wrote `CALL capitalize:` for capitalize_words); Caesar shift, rotation and replacement have none.
TOOL_OPS: tuple[str, ...] = tuple(op.name for op in OPS if op.params is None)
_TOOL_RENAMES = {"capitalize_words": "capitalize"}
TOOL_NAMES: dict[str, str] = {op: _TOOL_RENAMES.get(op, op) for op in TOOL_OPS}  # op name -> tool name
MAX_TOOL_TEXT = 200
_QUOTED = re.compile(r'"([^"\n]*)"')


def op_tool(op_name: str) -> Callable[[str], str]:
    """The tool callable of one operation: its result on the text, or ``error: ...`` saying how to fix the call.

    Lenient where the intent is clear: surrounding quotes or backticks are dropped; with ``text = guess`` only the
    text before ``=`` is used (as the calculator does, silently); an input holding one double-quoted string, such as
    ``the word "zebra"``, works on that string.
    """
    op, name = OPS_BY_NAME[op_name], TOOL_NAMES[op_name]
    how = f"write only the text to transform after `CALL {name}:`, on one line, without quotes"

    def tool(text: str) -> str:
        given = text.strip()
        if "=" in given and given.partition("=")[0].strip():
            given = given.partition("=")[0].strip()
        quoted = _QUOTED.findall(given)
        if len(quoted) == 1 and quoted[0].strip():
            given = quoted[0]
        given = _strip_quotes(given.strip().strip("`").strip())
        if not given:
            return f"error: no text to transform; {how}"
        if "\n" in given or len(given) > MAX_TOOL_TEXT:
            return f"error: the text has more than one line or over {MAX_TOOL_TEXT} characters; {how}"
        result = op.fn(given)
        return result if result else "(the empty string)"

    tool.__name__ = name
    return tool


def _task(
    difficulty: int,
    prompt: str,
    text: str,
    steps: list[tuple[Op, dict[str, Any]]],
    trace: list[str],
    *,
    n_ops: int,
    tool_named: bool = False,
) -> TaskSpec:
    metadata: dict[str, Any] = {"n_ops": n_ops, "length": len(text), "ops": [op.name for op, _ in steps]}
    if tool_named:
        metadata["tool_named"] = True
    return TaskSpec(
        environment=StringOpsEnv.name,
        difficulty=difficulty,
        prompt=prompt,
        reference={
            "answer": trace[-1],
            "input": text,
            "ops": [{"name": op.name, "params": params} for op, params in steps],
            "intermediate": trace,
        },
        metadata=metadata,
    )


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
    candidate = _strip_quotes(candidate)
    return candidate if candidate else None


def _strip_quotes(text: str) -> str:
    """``text`` without one pair of surrounding quotes or backticks."""
    for quote in _QUOTES:
        opening, closing = (quote[0], quote[-1])
        if len(text) >= 2 and text[0] == opening and text[-1] == closing:
            return text[1:-1]
    return text


def apply_ops(text: str, ops: list[dict[str, Any]]) -> str:
    """Replay a reference op list (useful to critics and skill tests)."""
    for step in ops:
        text = OPS_BY_NAME[step["name"]].fn(text, **step.get("params", {}))
    return text


_GLOSSARY_TEXT = "banana Red"
_GLOSSARY_PARAMS: dict[str, dict[str, Any]] = {
    "caesar": {"shift": 2},
    "rotate_left": {"k": 2},
    "replace_char": {"old": "a", "new": "x"},
}


def glossary() -> str:
    """General help without any task's text: what each operation does, shown on one fixed example."""
    lines = [
        "Apply the steps one at a time, in the order given, each to the text the previous step produced.",
        "Write down the text after every step, then give only the last one on the final line 'ANSWER: <text>'.",
        f'What each operation does, shown on "{_GLOSSARY_TEXT}":',
    ]
    for op in OPS:
        params = _GLOSSARY_PARAMS.get(op.name, {})
        lines.append(f'- {op.describe.format(**params)}: "{op.fn(_GLOSSARY_TEXT, **params)}"')
    return "\n".join(lines)


def solution_hint(task: TaskSpec, share: float) -> str | None:
    """The text after the first ceil(share * ops) steps (all steps with share 1.0).

    With one step and share < 1 it reveals the start of the answer instead: the first share of its characters.
    """
    if not 0.0 < share <= 1.0:
        raise ValueError(f"share must be in (0, 1], got {share}")
    ops = task.reference.get("ops")
    text = task.reference.get("input")
    if not ops or text is None:
        return None
    trace, current = [], str(text)
    for step in ops:
        current = OPS_BY_NAME[step["name"]].fn(current, **step.get("params", {}))
        trace.append(current)
    if share >= 1.0:
        steps = "; ".join(f'after step {i} it is "{value}"' for i, value in enumerate(trace, start=1))
        return f'Starting from "{text}": {steps}. The final text is "{trace[-1]}".'
    shown = min(math.ceil(share * len(trace)), len(trace) - 1)
    if shown == 0:
        answer = trace[-1]
        prefix = answer[: max(1, min(len(answer) - 1, math.floor(share * len(answer))))]
        return f'The resulting text starts with "{prefix}".'
    steps = "; ".join(f'after step {i} it is "{value}"' for i, value in enumerate(trace[:shown], start=1))
    return f'Starting from "{text}": {steps}. Continue with the remaining steps.'
