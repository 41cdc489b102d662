from __future__ import annotations

import random
import re
from collections import Counter

import pytest
from arithmetic_templates import matching_templates

from lamarck.curriculum.calculator import calculate
from lamarck.curriculum.environment import provides_hints
from lamarck.curriculum.environments.arithmetic import ArithmeticEnv
from lamarck.curriculum.environments.arithmetic_families import REPORT_FAMILIES, TRAINING_FAMILIES
from lamarck.curriculum.environments.arithmetic_hints import expression_key, solution_steps
from lamarck.curriculum.environments.arithmetic_language import NUMBER_WORDS

SYMBOL = {"add": "+", "sub": "-", "mul": "*", "div": "//", "mod": "%"}


@pytest.fixture(scope="module")
def env():
    return ArithmeticEnv()


@pytest.fixture(scope="module")
def training_tasks(env):
    return [env.generate(d, random.Random(seed)) for d in env.difficulties for seed in range(150)]


def _mentions(prompt: str, number: int) -> bool:
    words = [re.escape(str(number))] + ([NUMBER_WORDS[number]] if number < len(NUMBER_WORDS) else [])
    return re.search(r"\b(?:" + "|".join(words) + r")\b", prompt, re.IGNORECASE) is not None


def test_metadata_rebuilds_the_expression_and_names_every_number(training_tasks):
    for task in training_tasks:
        meta = task.metadata
        quantities, ops = meta["quantities"], meta["ops"]
        assert len(quantities) == meta["steps"] + 1 == len(ops) + 1
        rebuilt = str(quantities[0])
        for op, operand in zip(ops, quantities[1:], strict=True):
            rebuilt = f"({rebuilt} {SYMBOL[op]} {operand})"
        assert rebuilt.removeprefix("(").removesuffix(")") == task.reference["expression"] or len(ops) == 0
        assert calculate(task.reference["expression"]) == task.reference["answer"]
        assert all(_mentions(task.prompt, number) for number in quantities + meta["distractors"]), task.prompt
        assert not set(meta["distractors"]) & set(quantities)


def test_language_varies(env, training_tasks):
    families = Counter(task.metadata["family"] for task in training_tasks)
    assert set(families) == {family.name for family in TRAINING_FAMILIES} and len(families) >= 8
    orders = Counter(task.metadata["order"] for task in training_tasks)
    assert {"story_first", "question_first", "if"} <= set(orders)
    assert orders["story_first"] < 0.8 * len(training_tasks)
    assert any(re.search(r"\b(?:two|three|four|five|six|seven|eight|nine)\b", t.prompt) for t in training_tasks)
    first_words = Counter(task.prompt.split(" ", 1)[0] for task in training_tasks)
    assert len(first_words) > 30
    add_sentences = {t.prompt for t in training_tasks if t.difficulty == 1}
    assert len(add_sentences) > 140  # level 1 has few sums but many wordings

    def distractor_rate(level):
        tasks = [t for t in training_tasks if t.difficulty == level]
        return sum(bool(t.metadata["distractors"]) for t in tasks) / len(tasks)

    assert distractor_rate(1) == 0 < distractor_rate(3) < distractor_rate(8)


def test_every_template_of_every_family_formats():
    slots = {"name": "Mia", "item": "x", "n": 3, "a": 4, "b": 5, "pron": "she", "Pron": "She", "poss": "her",
             "Poss": "Her", "obj": "her", "clauses": "c"}  # fmt: skip
    for family in TRAINING_FAMILIES + REPORT_FAMILIES:
        for template in family.templates():
            template.format(**slots)
    complete = {"add", "sub", "mul", "div", "mod"}
    assert any(family.ops == complete for family in TRAINING_FAMILIES)
    assert any(family.ops == complete for family in REPORT_FAMILIES)


def test_report_families_never_reach_training(env, training_tasks):
    assert set(env.report_families) == {family.name for family in REPORT_FAMILIES}
    assert not set(env.report_families) & set(env.training_families)
    report_items = {item for family in REPORT_FAMILIES for item in family.items}
    for task in training_tasks:
        assert task.metadata["family"] in env.training_families and task.metadata["split"] == "train"
        assert not matching_templates(task.prompt, REPORT_FAMILIES), task.prompt
        assert not {word.strip(".,?") for word in task.prompt.lower().split()} & report_items, task.prompt


def test_report_split_uses_only_report_families(env):
    for d in env.difficulties:
        for seed in range(40):
            task = env.generate(d, random.Random(seed), split="report")
            assert task.metadata["family"] in env.report_families
            assert calculate(task.reference["expression"]) == task.reference["answer"]
            assert not matching_templates(task.prompt, TRAINING_FAMILIES), task.prompt
    with pytest.raises(ValueError, match="split"):
        env.generate(1, random.Random(0), split="test")


def test_the_leak_regexes_can_fire(env):
    """The template matcher recognises a family's own output, so the negative tests above can fail."""
    task = env.generate(4, random.Random(2), split="report")
    assert matching_templates(task.prompt, REPORT_FAMILIES)
    assert matching_templates(env.generate(4, random.Random(2)).prompt, TRAINING_FAMILIES)


def test_level_one_stays_one_small_addition(env):
    for seed in range(200):
        task = env.generate(1, random.Random(seed))
        assert task.metadata["ops"] == ["add"] and max(task.metadata["quantities"]) <= 9
        assert not task.metadata["distractors"]


def test_glossary_is_general(env, training_tasks):
    assert provides_hints(env)
    glossary = env.glossary()
    assert set(re.findall(r"\d+", glossary)) <= {"16", "2", "12"}  # only the fixed call example
    assert "CALL calculator: (16 - 2) + 12" in glossary
    for phrase in ("+", "-", "*", "//", "%"):
        assert f"({phrase})" in glossary
    report_cues = [word for family in REPORT_FAMILIES for word in family.items]
    assert not any(word in glossary for word in report_cues)
    assert all(task.reference["expression"] not in glossary for task in training_tasks if task.difficulty > 2)


def test_solution_hint_reveals_a_share(env):
    task = env.generate(5, random.Random(1))
    expression = task.reference["expression"]
    full = env.solution_hint(task, 1.0)
    assert full.endswith(f"the number the tool returns: CALL calculator: {expression}")  # nothing to copy after it
    half = env.solution_hint(task, 0.5)
    assert expression not in half and half.startswith("Start with (")
    inner = half.removeprefix("Start with (").split("), then")[0]
    assert expression.startswith(("(" + inner, "((" + inner))
    one_step = env.generate(2, random.Random(3))
    partial = env.solution_hint(one_step, 0.5)
    assert one_step.reference["expression"] not in partial
    assert str(one_step.metadata["quantities"][0]) in partial
    with pytest.raises(ValueError):
        env.solution_hint(task, 0.0)


def test_solution_hint_of_a_proposed_expression():
    from lamarck.curriculum.environment import TaskSpec

    task = TaskSpec(environment="arithmetic", difficulty=3, prompt="q", reference={"answer": 84,
                    "expression": "12+30*2+ 0"})  # fmt: skip
    assert (
        ArithmeticEnv()
        .solution_hint(task, 0.3)
        .startswith("Start with (30 * 2), then continue with the remaining steps")
    )
    half = ArithmeticEnv().solution_hint(task, 0.5)
    assert half.startswith("Start with (12 + (30 * 2)), then continue")
    assert half.endswith("CALL calculator: (12 + (30 * 2))")
    assert ArithmeticEnv().solution_hint(task.model_copy(update={"reference": {}}), 0.5) is None


def test_solution_steps_follow_evaluation_order():
    assert solution_steps("((19 + 33) + 64) // 9") == [("19 + 33", 52), ("52 + 64", 116), ("116 // 9", 12)]
    assert solution_steps("12+30*2+ 0") == [("30 * 2", 60), ("12 + 60", 72), ("72 + 0", 72)]
    assert solution_steps("7 / 2") is None and solution_steps("7 //") is None and solution_steps("5 // 0") is None


def test_expression_key_ignores_spacing_and_redundant_parentheses(env, training_tasks):
    assert expression_key("(16-2)+12") == expression_key("16 - 2 + 12") != expression_key("16 - (2 + 12)")
    task = training_tasks[500]
    assert env.task_key(task) == expression_key(task.reference["expression"])


def test_a_pronoun_never_comes_before_the_name(env):
    from lamarck.curriculum.environments.arithmetic_language import NAMES

    names = re.compile(r"\b(?:" + "|".join(name for name, _ in NAMES) + r")\b")
    pronoun = re.compile(r"\b(?:she|he|her|his|him)\b", re.IGNORECASE)
    for d in env.difficulties:
        for seed in range(100):
            for split in ("train", "report"):
                prompt = env.generate(d, random.Random(seed), split=split).prompt
                first_pronoun = pronoun.search(prompt)
                first_name = names.search(prompt)
                assert first_pronoun is None or (first_name and first_name.start() < first_pronoun.start()), prompt
