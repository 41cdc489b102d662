from __future__ import annotations

import random

import pytest

from lamarck.curriculum.environment import Environment
from lamarck.curriculum.environments.string_ops import StringOpsEnv, apply_ops, caesar, dedupe_chars


@pytest.fixture
def env():
    return StringOpsEnv()


def test_ops():
    assert caesar("xyz Abc", 3) == "abc Def"
    assert dedupe_chars("hello world") == "helo wrd"


def test_generation(env):
    assert isinstance(env, Environment) and len(env.difficulties) >= 6
    for d in env.difficulties:
        for seed in range(30):
            task = env.generate(d, random.Random(seed))
            assert task == env.generate(d, random.Random(seed))
            ref = task.reference
            assert apply_ops(ref["input"], ref["ops"]) == ref["answer"] == ref["answer"].strip()
            assert len(ref["ops"]) == task.metadata["n_ops"]
            assert f'"{ref["input"]}"' in task.prompt
    assert env.generate(1, random.Random(0)).metadata["n_ops"] < env.generate(8, random.Random(0)).metadata["n_ops"]
    with pytest.raises(ValueError, match="valid levels are 1..8"):
        env.generate(9, random.Random(0))


@pytest.mark.parametrize("template", ["{}", "ANSWER: {}", "Steps...\nFinal answer: \"{}\"", "**Answer:** `{}`",
                                      "work\n\n{}\n"])
def test_correct_answers_pass(env, template):
    task = env.generate(5, random.Random(11))
    reward = env.verify(task, template.format(task.reference["answer"]))
    assert reward.passed, reward.details


def test_wrong_and_malformed_fail(env):
    task = env.generate(4, random.Random(2))
    answer = task.reference["answer"]
    assert not env.verify(task, f"ANSWER: {answer}x").passed
    case = env.verify(task, f"ANSWER: {answer.swapcase()}") if answer.swapcase() != answer else None
    assert case is None or (not case.passed and "case differs" in case.details)
    empty = env.verify(task, "   \n ")
    assert not empty.passed and empty.details == "empty answer"
