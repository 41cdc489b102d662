from __future__ import annotations

import json

import pytest

from lamarck.curriculum.environments.arithmetic import ArithmeticEnv
from lamarck.curriculum.environments.python_functions import PythonFunctionsEnv
from lamarck.curriculum.environments.string_ops import StringOpsEnv
from lamarck.curriculum.proposals import SCHEMAS, ProposalRejected, build_task, parse_proposal
from lamarck.platform.sandbox import Sandbox
from lamarck.platform.settings import SandboxSettings


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    return Sandbox(SandboxSettings())


def test_the_schema_examples_are_themselves_valid(sandbox: Sandbox) -> None:
    for environment, schema in SCHEMAS.items():
        task = build_task(environment, 1, parse_proposal(schema), sandbox=sandbox)
        assert task.environment == environment and task.metadata["proposed"]


def test_accepted_tasks_verify_with_their_environment(sandbox: Sandbox) -> None:
    arithmetic = build_task(
        "arithmetic",
        2,
        {"question": "Ann has 7 pens and buys 5 more. How many?", "expression": "7+5", "answer": 12},
        sandbox=None,
    )
    assert ArithmeticEnv().verify(arithmetic, "12").passed
    strings = build_task(
        "string_ops", 2, {"input": "green tree", "steps": [{"name": "reverse"}, {"name": "upper"}]}, sandbox=None
    )
    assert strings.reference["answer"] == "EERT NEERG"
    assert StringOpsEnv().verify(strings, "ANSWER: EERT NEERG").passed
    code = build_task("python_functions", 1, json.loads(SCHEMAS["python_functions"]), sandbox=sandbox)
    assert PythonFunctionsEnv(sandbox=sandbox).verify(code, code.reference["solution"]).passed


@pytest.mark.parametrize(
    ("environment", "reply", "category"),
    [
        ("arithmetic", "Sure! Here is a task: question = ...", "invalid_json"),
        ("arithmetic", '{"question": "x", "expression": "1+", "answer": 1', "invalid_json"),
        ("arithmetic", '{"question": "Bo has 3 and 4.", "expression": "3+4", "answer": 8}', "reference_failed"),
        ("arithmetic", '{"question": "Bo has 3 apples.", "expression": "3*9", "answer": 27}', "invalid_fields"),
        ("arithmetic", '{"question": "Bo has 3 and 4.", "expression": "__import__(1)", "answer": 1}', "invalid_fields"),
        ("string_ops", '{"input": "abc", "steps": [{"name": "explode"}]}', "invalid_fields"),
        ("humaneval", '{"anything": 1}', "not_supported"),
        (
            "python_functions",
            '{"function_name": "f", "description": "d", "solution": "def f(x):\\n    return x", '
            '"tests": ["assert f(1) == 2", "assert f(2) == 3", "assert f(3) == 4"]}',
            "reference_failed",
        ),
        (
            "python_functions",
            '{"function_name": "f", "description": "d", "solution": "def f(x) return x", '
            '"tests": ["assert f(1) == 1", "assert f(2) == 2", "assert f(3) == 3"]}',
            "invalid_code",
        ),
        (
            "python_functions",
            '{"function_name": "f", "description": "d", "solution": "def f(x):\\n    return x", '
            '"tests": ["assert f(1) == 1"]}',
            "invalid_fields",
        ),
        (
            "python_functions",
            '{"function_name": "f", "description": "d", "solution": "import os\\ndef f(x):\\n    return x", '
            '"tests": ["assert f(1) == 1", "assert g(2) == 2", "assert f(3) == 3"]}',
            "invalid_fields",
        ),
    ],
)
def test_bad_proposals_are_rejected_with_a_category(
    environment: str, reply: str, category: str, sandbox: Sandbox
) -> None:
    with pytest.raises(ProposalRejected) as info:
        build_task(environment, 1, parse_proposal(reply), sandbox=sandbox)
    assert info.value.category == category
    assert "\n" not in info.value.detail


def test_code_that_tries_to_escape_cannot_pass(sandbox: Sandbox) -> None:
    reply = {
        "function_name": "f",
        "description": "d",
        "solution": "import socket\ndef f(x):\n"
        "    socket.create_connection(('127.0.0.1', 6379), timeout=1)\n    return x",
        "tests": ["assert f(1) == 1", "assert f(2) == 2", "assert f(3) == 3"],
    }
    with pytest.raises(ProposalRejected) as info:
        build_task("python_functions", 1, reply, sandbox=sandbox)
    assert info.value.category == "reference_failed"
