from __future__ import annotations

import random

import pytest

from lamarck.curriculum.calculator import calculate
from lamarck.curriculum.environment import Environment
from lamarck.curriculum.environments.arithmetic import ArithmeticEnv, extract_integer


@pytest.fixture
def env():
    return ArithmeticEnv()


def test_conforms_and_ladder(env):
    assert isinstance(env, Environment)
    assert list(env.difficulties) == list(range(1, len(env.difficulties) + 1)) and len(env.difficulties) >= 6
    with pytest.raises(ValueError, match=r"valid levels are 1\.\.9"):
        env.generate(0, random.Random(0))


def test_generation_is_deterministic_and_answers_match_expression(env):
    for d in env.difficulties:
        for seed in range(40):
            a, b = env.generate(d, random.Random(seed)), env.generate(d, random.Random(seed))
            assert a == b
            assert a.reference["answer"] == calculate(a.reference["expression"]) >= 0
            assert a.metadata["steps"] == len(a.metadata["ops"])


def test_difficulty_grows(env):
    def mean_steps(d):
        return sum(env.generate(d, random.Random(s)).metadata["steps"] for s in range(30)) / 30

    level1 = env.generate(1, random.Random(1))
    assert level1.metadata["ops"] == ["add"]
    assert mean_steps(1) < mean_steps(4) < mean_steps(9)
    ops = {op for s in range(100) for op in env.generate(7, random.Random(s)).metadata["ops"]}
    assert {"mul", "div", "mod"} <= ops


@pytest.mark.parametrize(
    "template",
    [
        "{}",
        "The answer is {}.",
        "#### {}",
        "{}.0",
        "so... \\boxed{{{}}}",
        "3 + 4 = 7, then more. **Answer:** {}",
        "Answer = {}\n",
    ],
)
def test_correct_answers_pass(env, template):
    task = env.generate(6, random.Random(3))
    reward = env.verify(task, "Let me think. 12 and 5. " + template.format(task.reference["answer"]))
    assert reward.passed and reward.score == 1.0


def test_wrong_and_malformed_answers_fail_cleanly(env):
    task = env.generate(3, random.Random(5))
    expected = task.reference["answer"]
    wrong = env.verify(task, f"The answer is {expected + 1}.")
    assert not wrong.passed and wrong.score == 0.0 and f"expected {expected}" in wrong.details
    for bad in ["", "I don't know", "The answer is forty-two", f"{expected}.5"]:
        reward = env.verify(task, bad)
        assert not reward.passed and reward.score == 0.0 and reward.details


def test_extract_integer_prefers_final_marker():
    assert extract_integer("Step 1: 3 + 4 = 7. Step 2: 7 * 2 = 14. The answer is 14.") == (14, "")
    assert extract_integer("#### 1,234") == (1234, "")
    assert extract_integer("The answer is 9. Check: 4 + 5 = 9, 10") == (9, "")


def test_calculator_tool_is_exposed(env):
    (tool,) = env.tools()
    assert tool.name == "calculator" and tool.fn is not None and tool.fn("2 * 21") == "42"
    assert tool.to_openai()["function"]["parameters"]["required"] == ["expression"]
    assert "fn" not in tool.model_dump()
