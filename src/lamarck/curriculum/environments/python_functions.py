"""Write a Python function from a description; hidden unit tests run in the platform sandbox."""

from __future__ import annotations

import hashlib
import json
import logging
import math
import random
from typing import TYPE_CHECKING, Any

from lamarck.curriculum.environment import Reward, TaskSpec, ToolSpec, check_difficulty, check_task, extract_code
from lamarck.curriculum.environments.code_harness import run_tests
from lamarck.curriculum.environments.python_families import (
    FAMILIES,
    LEVELS,
    REPORT_FAMILIES,
    Family,
    Split,
    families_for,
)

if TYPE_CHECKING:
    from lamarck.platform.sandbox import Sandbox

logger = logging.getLogger(__name__)

ANSWER_FORMAT = "Reply with the complete Python function (and any helpers it needs) in one ```python code block."
MIN_TESTS = 4
MAX_REPR = 300
_OPENERS = (
    "Write a Python function `{signature}`.",
    "Implement the Python function `{signature}`.",
    "Define `{signature}` in Python.",
    "Complete this Python function: `{signature}`.",
)
_EXAMPLES = (
    "Example: {call} returns {expected}.",
    "For example, {call} should return {expected}.",
    "Example: `{call}` gives {expected}.",
    "e.g. {call} == {expected}",
)
GLOSSARY = (
    "Reply with one ```python block that defines the function with exactly the name and parameters given.\n"
    "Return the value (do not print it) and do not read input; helpers may be defined in the same block.\n"
    "The example shows the types: return the same type (int, str, bool, list).\n"
    "Hidden tests call the function with other inputs: think about empty inputs, zero, negative numbers and ties.\n"
    "Check the description's boundaries (below, at least, inclusive) against the example before answering."
)


class PythonFunctionsEnv:
    name = "python_functions"
    description = "Write a Python function from a short description; hidden unit tests decide."
    difficulties: tuple[int, ...] = LEVELS
    answer_format = ANSWER_FORMAT
    training_allowed = True

    training_families: tuple[str, ...] = tuple(family.name for family in FAMILIES)
    report_families: tuple[str, ...] = tuple(family.name for family in REPORT_FAMILIES)

    def __init__(self, sandbox: Sandbox | None = None, *, wall_seconds: float | None = None) -> None:
        self.sandbox = sandbox
        self.wall_seconds = wall_seconds

    def generate(self, difficulty: int, rng: random.Random, *, split: Split = "train") -> TaskSpec:
        """A task of ``difficulty``; ``split="report"`` draws from the report families, which training never sees."""
        check_difficulty(self.name, self.difficulties, difficulty)
        if split not in ("train", "report"):
            raise ValueError(f"{self.name}: split must be 'train' or 'report', got {split!r}")
        family = rng.choice(families_for(difficulty, split))
        while True:
            consts = family.consts(rng)
            cases = _cases(family, consts, rng)
            if len(cases) >= MIN_TESTS + 1:
                break
        (example_args, example_expected), hidden = cases[0], cases[1:]
        call = _call(family.name, example_args)
        opener = rng.choice(_OPENERS).format(signature=family.signature)
        example = rng.choice(_EXAMPLES).format(call=call, expected=repr(example_expected))
        prompt = f"{opener}\n{family.describe.format(**consts)}\n{example}"
        tests = [f"_same({_call(family.name, args)}, {expected!r})" for args, expected in hidden]
        return TaskSpec(
            environment=self.name,
            difficulty=difficulty,
            prompt=prompt,
            reference={
                "function_name": family.name,
                "tests": tests,
                "solution": family.code.format(**consts),
            },
            metadata={"family": family.name, "split": split, "constants": consts, "n_tests": len(tests)},
        )

    def task_key(self, task: TaskSpec) -> str:
        """The underlying program: the family and its constants (a proposed task: its reference solution)."""
        family = task.metadata.get("family")
        if family is not None:
            return f"{family}:" + json.dumps(task.metadata.get("constants", {}), sort_keys=True, default=repr)
        solution = str(task.reference.get("solution", ""))
        return f"{task.reference.get('function_name')}:" + hashlib.sha256(solution.encode()).hexdigest()[:16]

    def glossary(self) -> str:
        return GLOSSARY

    def solution_hint(self, task: TaskSpec, share: float) -> str | None:
        """The first ceil(share * lines) lines of the reference solution (all of it with share 1.0), if it has one."""
        if not 0.0 < share <= 1.0:
            raise ValueError(f"share must be in (0, 1], got {share}")
        solution = str(task.reference.get("solution") or "").rstrip()
        if not solution:
            return None
        lines = solution.splitlines()
        if share >= 1.0:
            return f"A correct solution:\n```python\n{solution}\n```"
        shown = min(math.ceil(share * len(lines)), len(lines) - 1)
        if shown < 1:
            return None
        return "A correct solution starts like this; complete it:\n```python\n" + "\n".join(lines[:shown]) + "\n```"

    def verify(self, task: TaskSpec, answer: str) -> Reward:
        check_task(self.name, task)
        code = extract_code(answer)
        if not code.strip():
            return Reward.fail("empty answer: no code found")
        name = str(task.reference["function_name"])
        return run_tests(
            self.sandbox, code, list(task.reference["tests"]), required=[name], wall_seconds=self.wall_seconds
        )

    def tools(self) -> list[ToolSpec]:
        return []


def _call(name: str, args: tuple[Any, ...]) -> str:
    return f"{name}({', '.join(repr(arg) for arg in args)})"


def _cases(family: Family, consts: dict[str, Any], rng: random.Random) -> list[tuple[tuple[Any, ...], Any]]:
    """(args, expected) pairs from the family's reference solution (our own trusted code, run here)."""
    namespace: dict[str, Any] = {}
    exec(compile(family.code.format(**consts), f"<family {family.name}>", "exec"), namespace)  # noqa: S102
    solution = namespace[family.name]
    cases: list[tuple[tuple[Any, ...], Any]] = []
    seen: set[str] = set()
    for _ in range(3):
        for args in family.inputs(rng, consts):
            key = repr(args)
            if key in seen:
                continue
            try:
                expected = solution(*_copy(args))
            except (ArithmeticError, ValueError, IndexError):
                continue
            if isinstance(expected, float) or len(repr(expected)) > MAX_REPR:
                continue
            seen.add(key)
            cases.append((args, expected))
        if len(cases) >= MIN_TESTS + 1:
            break
    return cases


def _copy(args: tuple[Any, ...]) -> tuple[Any, ...]:
    import copy

    return copy.deepcopy(args)
