from __future__ import annotations

import json
import random
from importlib import resources

from arithmetic_templates import matching_templates

from lamarck.curriculum.calculator import calculate
from lamarck.curriculum.environments.arithmetic import ArithmeticEnv
from lamarck.curriculum.environments.arithmetic_families import REPORT_FAMILIES, TRAINING_FAMILIES
from lamarck.curriculum.environments.arithmetic_probe import transfer_probe
from lamarck.curriculum.heldout import training_task


def test_probe_is_a_fixed_file_of_checked_problems():
    raw = (resources.files("lamarck.curriculum") / "data" / "arithmetic_transfer.jsonl").read_text()
    rows = [json.loads(line) for line in raw.splitlines() if line.strip()]
    tasks = transfer_probe()
    assert len(tasks) == len(rows) >= 45
    assert len({task.prompt for task in tasks}) == len(tasks)
    assert {task.difficulty for task in tasks} == {1, 2, 3, 4}
    env = ArithmeticEnv()
    for row, task in zip(rows, tasks, strict=True):
        assert set(row) == {"prompt", "expression", "answer"}
        assert calculate(row["expression"]) == row["answer"] == task.reference["answer"] >= 0
        assert isinstance(row["answer"], int)
        assert task.environment == "arithmetic" and task.metadata["family"] == "transfer-probe"
        assert env.verify(task, f"The answer is {row['answer']}.").passed
        assert not env.verify(task, f"The answer is {row['answer'] + 1}.").passed


def test_no_probe_prompt_could_come_from_the_generator():
    for task in transfer_probe():
        assert not matching_templates(task.prompt, TRAINING_FAMILIES + REPORT_FAMILIES), task.prompt


def test_the_template_matcher_would_notice_a_generator_sentence():
    task = ArithmeticEnv().generate(3, random.Random(0))
    assert matching_templates(task.prompt, TRAINING_FAMILIES)


def test_probe_tasks_are_not_drawn_for_training():
    env = ArithmeticEnv()
    probe = {task.prompt for task in transfer_probe()}
    rng = random.Random(3)
    assert not any(training_task(env, d, rng).prompt in probe for d in (1, 2, 3, 4) for _ in range(50))
