from __future__ import annotations

import random

import pytest

from lamarck.curriculum.environment import Environment, TrainingNotAllowed
from lamarck.curriculum.environments.humaneval import HumanEvalEnv, assemble_program, load_problems


def test_eval_set_is_all_164_and_training_is_refused():
    env = HumanEvalEnv()
    assert isinstance(env, Environment) and env.training_allowed is False
    tasks = env.eval_set()
    assert len(tasks) == len(load_problems()) == 164
    assert tasks[0].source_id == "HumanEval/0" and "has_close_elements" in tasks[0].prompt
    assert "check(" in tasks[0].reference["test"]
    with pytest.raises(TrainingNotAllowed, match="evaluation-only"):
        env.generate(1, random.Random(0))


@pytest.mark.parametrize("task_id", ["HumanEval/0", "HumanEval/10", "HumanEval/32", "HumanEval/53"])
def test_canonical_solutions_pass_in_sandbox(sandbox, task_id):
    env = HumanEvalEnv(sandbox=sandbox)
    task = env.task(task_id)
    reward = env.verify(task, task.reference["canonical_solution"])
    assert reward.passed and reward.score == 1.0, reward.details


def test_full_function_answer_passes_and_wrong_one_fails(sandbox):
    env = HumanEvalEnv(sandbox=sandbox)
    task = env.task("HumanEval/53")  # add(x, y)
    good = env.verify(task, "```python\ndef add(x: int, y: int):\n    return x + y\n```")
    assert good.passed, good.details
    bad = env.verify(task, "```python\ndef add(x: int, y: int):\n    return x - y\n```")
    assert not bad.passed and bad.score == 0.0 and "AssertionError" in bad.details
    assert not env.verify(task, "```python\ndef add(x, y) return\n```").passed


def test_assemble_program_body_or_function():
    header = 'def f(x):\n    """doc"""\n'
    assert assemble_program(header, "f", "    return x\n").endswith('"""doc"""\n    return x\n')
    assert assemble_program(header, "f", "return x").endswith("    return x\n")
    assert assemble_program(header, "f", "def f(x):\n    return 1\n").endswith("def f(x):\n    return 1\n")
