"""Turning an LLM's task proposal into a verified TaskSpec, or a recorded reason why not.

A proposal is accepted only if a program can check it: the arithmetic answer must be
what the expression computes, a string task is recomputed from its operations, and a
Python task's reference solution must pass its own tests in the sandbox.
"""

from __future__ import annotations

import ast
import json
import re
from typing import TYPE_CHECKING, Any

from lamarck.curriculum.calculator import CalculatorError, calculate
from lamarck.curriculum.environment import TaskSpec
from lamarck.curriculum.environments.code_harness import run_tests
from lamarck.curriculum.environments.string_ops import OPS_BY_NAME
from lamarck.platform.python_ast import parse_module

if TYPE_CHECKING:
    from lamarck.platform.sandbox import Sandbox

MIN_PROPOSED_TESTS = 3
_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)
_NUMBER = re.compile(r"\d+")


class ProposalRejected(ValueError):
    """A proposal that cannot become a task; ``category`` groups the reasons for reporting."""

    def __init__(self, category: str, detail: str) -> None:
        super().__init__(detail)
        self.category = category
        self.detail = detail


SCHEMAS: dict[str, str] = {
    "arithmetic": (
        '{"question": "Sam has 12 apples and buys 30 more. How many apples does Sam have?", '
        '"expression": "12 + 30", "answer": 42}'
    ),
    "string_ops": (
        '{"input": "green tree", "steps": [{"name": "reverse", "params": {}}, {"name": "upper", "params": {}}]}'
    ),
    "python_functions": (
        '{"function_name": "add_one", "description": "Return x plus one.", '
        '"solution": "def add_one(x):\\n    return x + 1", '
        '"tests": ["assert add_one(1) == 2", "assert add_one(-1) == 0", "assert add_one(10) == 11"]}'
    ),
}


def parse_proposal(text: str) -> dict[str, Any]:
    """The first JSON object in a reply (models often wrap it in prose or a code fence)."""
    match = _JSON_OBJECT.search(text)
    if match is None:
        raise ProposalRejected("invalid_json", "no JSON object in the reply")
    try:
        data = json.loads(match.group(0))
    except json.JSONDecodeError as exc:
        raise ProposalRejected("invalid_json", f"not valid JSON: {exc.msg} at char {exc.pos}") from exc
    if not isinstance(data, dict):
        raise ProposalRejected("invalid_json", "the JSON is not an object")
    return data


def build_task(environment: str, difficulty: int, data: dict[str, Any], *, sandbox: Sandbox | None) -> TaskSpec:
    if environment == "arithmetic":
        return _arithmetic(difficulty, data)
    if environment == "string_ops":
        return _string_ops(difficulty, data)
    if environment == "python_functions":
        return _python_functions(difficulty, data, sandbox)
    raise ProposalRejected("not_supported", f"{environment} does not accept LLM-written tasks")


def _field(data: dict[str, Any], name: str, kind: type) -> Any:
    value = data.get(name)
    if not isinstance(value, kind) or (isinstance(value, str) and not value.strip()):
        raise ProposalRejected("invalid_fields", f"field {name!r} must be a non-empty {kind.__name__}")
    return value


def _arithmetic(difficulty: int, data: dict[str, Any]) -> TaskSpec:
    question = _field(data, "question", str).strip()
    expression = _field(data, "expression", str)
    claimed = data.get("answer")
    try:
        value = calculate(expression)
    except CalculatorError as exc:
        raise ProposalRejected("invalid_fields", f"expression does not compute: {exc}") from exc
    if isinstance(value, float) and not value.is_integer():
        raise ProposalRejected("reference_failed", f"the expression gives {value}, not a whole number")
    value = int(value)
    try:
        claimed_int = int(str(claimed).strip())
    except ValueError as exc:
        raise ProposalRejected("invalid_fields", f"answer {claimed!r} is not a whole number") from exc
    if claimed_int != value:
        raise ProposalRejected("reference_failed", f"the answer {claimed_int} disagrees with the expression ({value})")
    missing = [n for n in _NUMBER.findall(expression) if n not in _NUMBER.findall(question)]
    if missing:
        raise ProposalRejected("invalid_fields", f"numbers {missing} of the expression are not in the question")
    prompt = f"{question}\nGive the final number."
    return TaskSpec(
        environment="arithmetic",
        difficulty=difficulty,
        prompt=prompt,
        reference={"answer": value, "expression": expression},
        metadata={"proposed": True},
    )


def _string_ops(difficulty: int, data: dict[str, Any]) -> TaskSpec:
    text = _field(data, "input", str).strip()
    steps = _field(data, "steps", list)
    if not 1 <= len(steps) <= 8 or len(text) > 120:
        raise ProposalRejected("invalid_fields", "use 1 to 8 steps on an input of at most 120 characters")
    result = text
    lines, ops = [], []
    for index, step in enumerate(steps, start=1):
        if not isinstance(step, dict) or step.get("name") not in OPS_BY_NAME:
            raise ProposalRejected("invalid_fields", f"step {index} names no known operation: {sorted(OPS_BY_NAME)}")
        op = OPS_BY_NAME[step["name"]]
        params = step.get("params") or {}
        try:
            result = op.fn(result, **params)
            lines.append(f"{index}. {op.describe.format(**params)}")
        except (TypeError, ValueError, KeyError) as exc:
            raise ProposalRejected("invalid_fields", f"step {index} ({op.name}) has bad params: {exc}") from exc
        ops.append({"name": op.name, "params": params})
    if not result.strip() or result == text:
        raise ProposalRejected("invalid_fields", "the steps leave the text empty or unchanged")
    prompt = f'Start with the text "{text}" and apply these steps in order:\n' + "\n".join(lines)
    prompt += "\nWhat is the final text?"
    return TaskSpec(
        environment="string_ops",
        difficulty=difficulty,
        prompt=prompt,
        reference={"answer": result, "input": text, "ops": ops},
        metadata={"proposed": True, "n_ops": len(ops)},
    )


def _python_functions(difficulty: int, data: dict[str, Any], sandbox: Sandbox | None) -> TaskSpec:
    name = _field(data, "function_name", str).strip()
    description = _field(data, "description", str).strip()
    solution = _field(data, "solution", str)
    raw_tests = _field(data, "tests", list)
    if not name.isidentifier():
        raise ProposalRejected("invalid_fields", f"function_name {name!r} is not a Python identifier")
    tests = [_as_check(test, name) for test in raw_tests]
    if len(tests) < MIN_PROPOSED_TESTS:
        raise ProposalRejected("invalid_fields", f"give at least {MIN_PROPOSED_TESTS} tests, got {len(tests)}")
    try:
        parse_module(solution)
    except SyntaxError as exc:
        raise ProposalRejected("invalid_code", f"solution has a syntax error at line {exc.lineno}: {exc.msg}") from exc
    if sandbox is None:
        raise ProposalRejected("not_supported", "no sandbox to check the reference solution")
    reward = run_tests(sandbox, solution, tests, required=[name])
    if not reward.passed:
        raise ProposalRejected("reference_failed", f"the reference solution fails its tests: {reward.details}")
    prompt = f"Write a Python function `{name}`.\n{description}"
    return TaskSpec(
        environment="python_functions",
        difficulty=difficulty,
        prompt=prompt,
        reference={"function_name": name, "tests": tests, "solution": solution},
        metadata={"proposed": True, "n_tests": len(tests)},
    )


def _as_check(test: Any, name: str) -> str:
    """``assert f(x) == y`` becomes the harness's typed comparison ``_same(f(x), y)``."""
    if not isinstance(test, str):
        raise ProposalRejected("invalid_fields", "each test must be a string like 'assert f(1) == 2'")
    try:
        node = parse_module(test.strip()).body
    except SyntaxError as exc:
        raise ProposalRejected("invalid_code", f"test {test!r} is not valid Python") from exc
    if len(node) != 1 or not isinstance(node[0], ast.Assert):
        raise ProposalRejected("invalid_fields", f"test {test!r} must be one assert statement")
    check = node[0].test
    if not (isinstance(check, ast.Compare) and len(check.ops) == 1 and isinstance(check.ops[0], ast.Eq)):
        raise ProposalRejected("invalid_fields", f"test {test!r} must compare with ==")
    called = {n.func.id for n in ast.walk(check.left) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    if name not in called:
        raise ProposalRejected("invalid_fields", f"test {test!r} does not call {name}")
    return f"_same({ast.unparse(check.left)}, {ast.unparse(check.comparators[0])})"
