from __future__ import annotations

import random

import pytest

from lamarck.curriculum.environment import Environment, provides_hints
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
            assert all(f"{i}. " not in task.prompt for i in range(len(ref["ops"]) + 1, 9))
    assert env.generate(1, random.Random(0)).metadata["n_ops"] < env.generate(8, random.Random(0)).metadata["n_ops"]
    with pytest.raises(ValueError, match="valid levels are 1..10"):
        env.generate(11, random.Random(0))


@pytest.mark.parametrize(
    "template", ["{}", "ANSWER: {}", 'Steps...\nFinal answer: "{}"', "**Answer:** `{}`", "work\n\n{}\n"]
)
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


def test_first_levels_are_one_easy_op_on_one_short_word(env):
    """Where the base model can succeed: one op a greedy reader can do by eye, on one word of at most 6 letters."""
    for d, allowed in ((1, {"upper", "capitalize_words"}), (2, {"upper", "capitalize_words", "reverse", "lower"})):
        for seed in range(200):
            task = env.generate(d, random.Random(seed))
            ref = task.reference
            assert len(ref["ops"]) == 1 and ref["ops"][0]["name"] in allowed
            assert " " not in ref["input"] and len(ref["answer"]) <= (5 if d == 1 else 7)
            assert env.verify(task, f"ANSWER: {ref['answer']}").passed
    later = {op for seed in range(200) for op in env.generate(7, random.Random(seed)).metadata["ops"]}
    assert {"caesar", "rotate_left", "swap_case"} & later


def test_phrasing_varies(env):
    openings = {env.generate(d, random.Random(s)).prompt.split('"', 1)[0] for d in (1, 5) for s in range(100)}
    assert len(openings) >= 5


def test_hints(env):
    assert provides_hints(env)
    glossary = env.glossary()
    assert "ANSWER:" in glossary and "reverse" in glossary
    task = env.generate(7, random.Random(4))
    ref = task.reference
    assert ref["answer"] in env.solution_hint(task, 1.0)
    half = env.solution_hint(task, 0.5)
    assert ref["answer"] not in half and ref["intermediate"][0] in half
    single = env.generate(1, random.Random(2))
    partial = env.solution_hint(single, 0.5)
    assert single.reference["answer"] not in partial and single.reference["answer"][:1] in partial
    assert task.reference["input"] not in glossary


def test_task_key_is_the_input_and_ops(env):
    task = env.generate(6, random.Random(9))
    reworded = task.model_copy(update={"prompt": "Different words, same job: " + task.prompt[::-1]})
    assert env.task_key(reworded) == env.task_key(task)
    other = env.generate(6, random.Random(10))
    assert env.task_key(other) != env.task_key(task)
