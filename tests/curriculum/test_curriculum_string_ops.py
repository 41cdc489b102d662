from __future__ import annotations

import random

import pytest

from lamarck.curriculum import heldout
from lamarck.curriculum.environment import Environment, provides_hints
from lamarck.curriculum.environments.string_ops import (
    TOOL_LEVEL_OPS,
    TOOL_NAMES,
    StringOpsEnv,
    apply_ops,
    caesar,
    dedupe_chars,
)


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
    with pytest.raises(ValueError, match="valid levels are 1..11"):
        env.generate(12, random.Random(0))


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


def test_level_one_names_the_tool_whose_call_is_the_whole_solution(env):
    """Where the base model succeeds some of the time (6 of 10 greedy): call the named tool, copy its result."""
    tools = {tool.name: tool for tool in env.tools()}
    for seed in range(200):
        task = env.generate(1, random.Random(seed))
        ref = task.reference
        (op,) = ref["ops"]
        name = TOOL_NAMES[op["name"]]
        assert op["name"] in TOOL_LEVEL_OPS and task.metadata["tool_named"] and name in task.prompt
        assert ref["input"].isalpha() and ref["input"].islower() and len(ref["input"]) == 4
        assert f'"{ref["input"]}"' in task.prompt and ref["answer"] != ref["input"]
        assert tools[name].fn(ref["input"]) == ref["answer"]
        assert env.verify(task, f"ANSWER: {ref['answer']}").passed


def test_next_levels_are_one_easy_op_on_one_short_word_in_plain_words(env):
    """Levels 2 and 3 (levels 1 and 2 before the tool-named level 1 came first): one op a greedy reader can do by
    eye, described in a sentence, not a numbered list of one step, on one real word."""
    for d, allowed in ((2, {"upper", "capitalize_words"}), (3, {"upper", "capitalize_words", "reverse", "lower"})):
        for seed in range(200):
            task = env.generate(d, random.Random(seed))
            ref = task.reference
            assert len(ref["ops"]) == 1 and ref["ops"][0]["name"] in allowed
            assert " " not in ref["input"] and len(ref["answer"]) <= (5 if d == 2 else 7)
            assert "1. " not in task.prompt and not task.metadata.get("tool_named")
            assert env.verify(task, f"ANSWER: {ref['answer']}").passed
    later = {op for seed in range(200) for op in env.generate(8, random.Random(seed)).metadata["ops"]}
    assert {"caesar", "rotate_left", "swap_case"} & later


def test_tools_do_the_ops_and_their_errors_say_how_to_fix_the_call(env):
    tools = {tool.name: tool for tool in env.tools()}
    assert set(tools) == set(TOOL_NAMES.values()) and "capitalize" in tools
    assert not {"caesar", "rotate_left", "replace_char"} & set(tools)  # ops with parameters are done by hand
    upper = tools["upper"].fn
    for given in ("red cat", '"red cat"', "`red cat`", "red cat = RED CAT", 'the text "red cat"'):
        assert upper(given) == "RED CAT", given
    assert tools["capitalize"].fn("bRIDGE") == "Bridge" and tools["remove_vowels"].fn("aei") == "(the empty string)"
    for bad in ("", '""', "a\nb", "x" * 500):
        error = upper(bad)
        assert error.startswith("error: ") and "only the text to transform after `CALL upper:`" in error, error
    for name, tool in tools.items():
        assert name in tool.fn("") and tool.description


def test_held_out_slices_stay_disjoint_from_training_at_the_new_levels(env):
    """Level 1 draws from thousands of made-up words, so its slices are reserved by computation (word and op): a
    training draw never repeats a gate, dev or report task reworded; the report slice shares no key with the gate's."""
    assert 1 in heldout.protected_levels(env.name, env=env)
    gate = {heldout.task_key(t, env) for t in heldout.heldout_set(env.name, per_level=50, env=env) if t.difficulty == 1}
    report = {
        heldout.task_key(t, env) for t in heldout.report_set(env.name, per_level=50, env=env) if t.difficulty == 1
    }
    assert report and not report & gate
    rng = random.Random(0)
    for _ in range(200):
        task = heldout.training_task(env, 1, rng)
        assert not heldout.is_heldout_task(task, env=env)
        assert heldout.task_key(task, env) not in report


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
    single = env.generate(2, random.Random(2))
    partial = env.solution_hint(single, 0.5)
    assert single.reference["answer"] not in partial and single.reference["answer"][:1] in partial
    assert task.reference["input"] not in glossary


def test_task_key_is_the_input_and_ops(env):
    task = env.generate(6, random.Random(9))
    reworded = task.model_copy(update={"prompt": "Different words, same job: " + task.prompt[::-1]})
    assert env.task_key(reworded) == env.task_key(task)
    other = env.generate(6, random.Random(10))
    assert env.task_key(other) != env.task_key(task)
