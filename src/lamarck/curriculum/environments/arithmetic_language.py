"""Turns a chain of arithmetic steps into a word problem of one family, with varied language.

Variation, all drawn from the task's rng: the family's templates, sentence order (story then question, question
first, or one question with ``if`` clauses), number words for small numbers, openings that state the start and
the first step in one sentence (rates, boxes of N), and distractor sentences whose numbers do not matter.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from lamarck.curriculum.environments.arithmetic_families import Family

NAMES: tuple[tuple[str, str], ...] = (
    ("Mia", "f"), ("Omar", "m"), ("Lena", "f"), ("Ravi", "m"), ("Sofia", "f"), ("Tom", "m"), ("Aiko", "f"),
    ("Noah", "m"), ("Zara", "f"), ("Ivan", "m"), ("Priya", "f"), ("Leo", "m"), ("Nia", "f"), ("Jonas", "m"),
    ("Elena", "f"), ("Kofi", "m"), ("Hana", "f"), ("Mateo", "m"),
)  # fmt: skip
_PRONOUNS = {
    "f": {"pron": "she", "Pron": "She", "poss": "her", "Poss": "Her", "obj": "her"},
    "m": {"pron": "he", "Pron": "He", "poss": "his", "Poss": "His", "obj": "him"},
}
NUMBER_WORDS = (
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
    "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty",
)  # fmt: skip
_NAME_SET = frozenset(name for name, _ in NAMES)


@dataclass(frozen=True)
class Style:
    """How much variation a level gets: level 1 stays plain so the base model solves it most of the time."""

    word_numbers: float
    distractor: float
    second_distractor: float
    question_first: float
    if_form: float
    opening: float


def style_for(level: int) -> Style:
    if level <= 1:
        return Style(word_numbers=0.1, distractor=0.0, second_distractor=0.0, question_first=0.15, if_form=0.1,
                     opening=0.2)  # fmt: skip
    return Style(
        word_numbers=0.25,
        distractor=min(0.7, 0.1 * level),
        second_distractor=0.3 if level >= 6 else 0.0,
        question_first=0.25,
        if_form=0.2 if level <= 4 else 0.0,
        opening=0.35,
    )


@dataclass(frozen=True)
class Problem:
    prompt: str
    distractors: tuple[int, ...]
    order: str


def render(
    family: Family, start: int, steps: list[tuple[str, int]], rng: random.Random, style: Style, distractor_max: int
) -> Problem:
    """The prompt for ``start`` followed by ``steps`` ((op, operand) pairs) in ``family``'s language."""
    name, gender = rng.choice(NAMES)
    item = rng.choice(family.items)
    slots: dict[str, object] = {"name": name, "item": item, **_PRONOUNS[gender]}
    named: dict[str, object] = {"name": name, "item": item, "pron": name, "Pron": name, "obj": name,
                                "poss": f"{name}'s", "Poss": f"{name}'s"}  # fmt: skip
    introduced = False

    def sentence(template: str, **numbers: object) -> str:
        """A pronoun only once the name has appeared (a start sentence may not name anyone)."""
        nonlocal introduced
        text = _fill(template, slots if introduced else named, **numbers)
        introduced = introduced or name in text
        return text

    def number(n: int) -> str:
        return NUMBER_WORDS[n] if n < len(NUMBER_WORDS) and rng.random() < style.word_numbers else str(n)

    story: list[str] = []
    first_op, first_operand = steps[0] if steps else ("", 0)
    openings = family.openings.get(first_op, ())
    remaining = steps
    if openings and rng.random() < style.opening:
        story.append(sentence(rng.choice(openings), a=number(start), b=number(first_operand)))
        remaining = steps[1:]
    else:
        story.append(sentence(rng.choice(family.start), n=number(start)))
    last: dict[str, str] = {}
    for op, operand in remaining:
        choices = [t for t in family.steps[op] if t != last.get(op)] or list(family.steps[op])
        last[op] = rng.choice(choices)
        story.append(sentence(last[op], n=number(operand)))

    used = {start, *(operand for _, operand in steps)}
    distractors: list[int] = []
    wanted = int(rng.random() < style.distractor) + int(rng.random() < style.second_distractor)
    templates = rng.sample(family.distractors, min(wanted, len(family.distractors)))
    for template in templates:
        value = _fresh_number(rng, used, distractor_max)
        used.add(value)
        distractors.append(value)
        at = rng.randint(1, len(story))
        known = any(name in earlier for earlier in story[:at])
        story.insert(at, _fill(template, slots if known else named, n=number(value)))

    roll = rng.random()
    if roll < style.if_form and family.if_questions:
        clauses = [_clause(sentence) for sentence in story]
        joined = clauses[0] if len(clauses) == 1 else ", ".join(clauses[:-1]) + " and " + clauses[-1]
        prompt = _fill(rng.choice(family.if_questions), slots, clauses=joined)
        return Problem(prompt, tuple(distractors), "if")
    question = _fill(rng.choice(family.questions), slots)
    if roll < style.if_form + style.question_first:
        return Problem(" ".join([question, *story]), tuple(distractors), "question_first")
    return Problem(" ".join([*story, question]), tuple(distractors), "story_first")


def _fill(template: str, slots: dict[str, object], **extra: object) -> str:
    text = template.format(**slots, **extra)
    return text[:1].upper() + text[1:]


def _clause(sentence: str) -> str:
    """A sentence as a clause for 'if ...': no final period, a lower-case start unless it is a name."""
    text = sentence.rstrip(".")
    if text.split(" ", 1)[0].split("'")[0] in _NAME_SET:
        return text
    return text[:1].lower() + text[1:]


def _fresh_number(rng: random.Random, used: set[int], high: int) -> int:
    for _ in range(50):
        value = rng.randint(2, max(high, 12))
        if value not in used:
            return value
    return max(used) + 1
