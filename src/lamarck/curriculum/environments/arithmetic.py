"""Multi-step arithmetic word problems with exact integer answers, phrased in many template families.

The difficulty ladder fixes the computation (steps, operand sizes, operations); the family and the language
(``arithmetic_language``) vary on top of it, so a model cannot pass by learning a handful of sentence templates.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Literal

from lamarck.curriculum.calculator import calculator_tool
from lamarck.curriculum.environment import Reward, TaskSpec, ToolSpec, check_difficulty, check_task
from lamarck.curriculum.environments.arithmetic_families import REPORT_FAMILIES, TRAINING_FAMILIES
from lamarck.curriculum.environments.arithmetic_hints import expression_key, glossary, solution_hint
from lamarck.curriculum.environments.arithmetic_language import render, style_for


@dataclass(frozen=True)
class Level:
    steps: int
    max_start: int
    max_operand: int
    ops: tuple[str, ...]
    max_factor: int = 9


# Level 1: one addition of small numbers. Later levels add steps, digits and operations.
LEVELS: dict[int, Level] = {
    1: Level(1, 9, 9, ("add",)),
    2: Level(1, 20, 20, ("add", "sub")),
    3: Level(2, 50, 30, ("add", "sub")),
    4: Level(2, 99, 60, ("add", "sub", "mul"), max_factor=5),
    5: Level(3, 99, 99, ("add", "sub", "mul", "div")),
    6: Level(3, 999, 250, ("add", "sub", "mul", "div", "mod"), max_factor=12),
    7: Level(4, 999, 999, ("add", "sub", "mul", "div", "mod"), max_factor=25),
    8: Level(5, 9999, 2500, ("add", "sub", "mul", "div", "mod"), max_factor=40),
    9: Level(7, 9999, 9999, ("add", "sub", "mul", "div", "mod"), max_factor=99),
}

_SYMBOL = {"add": "+", "sub": "-", "mul": "*", "div": "//", "mod": "%"}
Split = Literal["train", "report"]

ANSWER_FORMAT = "Work step by step, then end with a final line 'The answer is N.' where N is a whole number."


class ArithmeticEnv:
    name = "arithmetic"
    description = "Word problems needing several exact integer steps (+, -, *, integer division, remainder)."
    difficulties: tuple[int, ...] = tuple(LEVELS)
    answer_format = ANSWER_FORMAT
    training_allowed = True

    training_families: tuple[str, ...] = tuple(family.name for family in TRAINING_FAMILIES)
    report_families: tuple[str, ...] = tuple(family.name for family in REPORT_FAMILIES)

    def generate(self, difficulty: int, rng: random.Random, *, split: Split = "train") -> TaskSpec:
        """A task of ``difficulty``; ``split="report"`` draws from the report families, which training never sees."""
        check_difficulty(self.name, self.difficulties, difficulty)
        if split not in ("train", "report"):
            raise ValueError(f"{self.name}: split must be 'train' or 'report', got {split!r}")
        level = LEVELS[difficulty]
        value = start = rng.randint(2, level.max_start)
        expression = str(value)
        steps: list[tuple[str, int]] = []
        for _ in range(level.steps):
            op, operand = _pick_step(rng, level, value)
            value = _apply(op, value, operand)
            expression = f"({expression} {_SYMBOL[op]} {operand})"
            steps.append((op, operand))
        ops = [op for op, _ in steps]
        pool = TRAINING_FAMILIES if split == "train" else REPORT_FAMILIES
        family = rng.choice([family for family in pool if set(ops) <= family.ops])
        distractor_max = min(60, max(20, level.max_operand))
        problem = render(family, start, steps, rng, style_for(difficulty), distractor_max=distractor_max)
        return TaskSpec(
            environment=self.name,
            difficulty=difficulty,
            prompt=problem.prompt,
            reference={"answer": value, "expression": expression[1:-1] if ops else expression},
            metadata={
                "family": family.name,
                "split": split,
                "ops": ops,
                "steps": len(ops),
                "quantities": [start, *(operand for _, operand in steps)],
                "distractors": list(problem.distractors),
                "order": problem.order,
            },
        )

    def task_key(self, task: TaskSpec) -> str:
        """The task's underlying computation, whatever its wording: its canonical expression."""
        return expression_key(str(task.reference["expression"]))

    def glossary(self) -> str:
        return glossary(TRAINING_FAMILIES)

    def solution_hint(self, task: TaskSpec, share: float) -> str | None:
        return solution_hint(task, share)

    def verify(self, task: TaskSpec, answer: str) -> Reward:
        check_task(self.name, task)
        expected = int(task.reference["answer"])
        got, problem = extract_integer(answer)
        if got is None:
            return Reward.fail(problem)
        if got == expected:
            return Reward(score=1.0, passed=True, details=f"correct: {expected}")
        return Reward.fail(f"expected {expected}, got {got}")

    def tools(self) -> list[ToolSpec]:
        return [
            ToolSpec(
                name="calculator",
                description="Evaluate an arithmetic expression with numbers, + - * / // % ** and parentheses.",
                parameters={
                    "type": "object",
                    "properties": {"expression": {"type": "string", "description": "for example (12 + 7) * 3 // 4"}},
                    "required": ["expression"],
                },
                fn=calculator_tool,
            )
        ]


def _pick_step(rng: random.Random, level: Level, value: int) -> tuple[str, int]:
    choices = list(level.ops)
    if value < 2:
        choices = [op for op in choices if op not in ("sub", "div", "mod")] or ["add"]
    if value > 10 * level.max_start:  # keep numbers from running away
        choices = [op for op in choices if op != "mul"]
    op = rng.choice(choices)
    if op == "add":
        return op, rng.randint(1, level.max_operand)
    if op == "sub":
        return op, rng.randint(1, min(level.max_operand, value - 1)) if value > 1 else 1
    if op == "mul":
        return op, rng.randint(2, level.max_factor)
    return op, rng.randint(2, max(2, min(level.max_factor, value)))


def _apply(op: str, value: int, operand: int) -> int:
    if op == "add":
        return value + operand
    if op == "sub":
        return value - operand
    if op == "mul":
        return value * operand
    if op == "div":
        return value // operand
    return value % operand


_NUMBER = r"[-−]?\d[\d,]*(?:\.\d+)?"
_MARKERS = (
    re.compile(r"####\s*\$?\s*(" + _NUMBER + ")"),
    re.compile(r"\\boxed\{\s*\$?(" + _NUMBER + r")\s*\}"),
    re.compile(r"answer\s*(?:is\s*:?|:|=)\s*\**\s*\$?\s*(" + _NUMBER + ")", re.IGNORECASE),
)
_ANY_NUMBER = re.compile(_NUMBER)


def extract_integer(answer: str) -> tuple[int | None, str]:
    """The final integer stated in an answer, or ``(None, why)``.

    Prefers explicit markers ('#### 42', '\\boxed{42}', 'the answer is 42'), last one wins; else the last number.
    """
    text = answer.strip()
    if not text:
        return None, "empty answer"
    found: str | None = None
    for pattern in _MARKERS:
        matches = pattern.findall(text)
        if matches:
            found = matches[-1]
            break
    if found is None:
        numbers = _ANY_NUMBER.findall(text)
        if not numbers:
            return None, f"no number found in the answer: {_clip(text)!r}"
        found = numbers[-1]
    cleaned = found.replace(",", "").replace("−", "-")
    try:
        number = Decimal(cleaned)
    except InvalidOperation:
        return None, f"cannot read {found!r} as a number"
    if number != number.to_integral_value():
        return None, f"final number {found} is not a whole number"
    return int(number), ""


def _clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
