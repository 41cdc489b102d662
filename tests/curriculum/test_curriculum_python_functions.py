from __future__ import annotations

import ast
import random

import pytest

from lamarck.curriculum.environment import Environment, extract_code
from lamarck.curriculum.environments.code_harness import SandboxMissing
from lamarck.curriculum.environments.python_families import FAMILIES, REPORT_FAMILIES, families_for
from lamarck.curriculum.environments.python_functions import PythonFunctionsEnv

ALL_FAMILIES = FAMILIES + REPORT_FAMILIES


def _split_of(family_name):
    return "report" if family_name in {f.name for f in REPORT_FAMILIES} else "train"


def _task_for(env, family_name, seed=0):
    family = next(f for f in ALL_FAMILIES if f.name == family_name)
    for s in range(seed, seed + 500):
        task = env.generate(family.level, random.Random(s), split=_split_of(family_name))
        if task.metadata["family"] == family_name:
            return task
    raise AssertionError(family_name)


def _passes_in_process(task):
    namespace = {"_same": lambda a, b: type(a) is type(b) and a == b}
    exec(task.reference["solution"], namespace)
    return all(eval(test, namespace) for test in task.reference["tests"])


def test_ladder_and_generation():
    env = PythonFunctionsEnv()
    assert isinstance(env, Environment)
    assert list(env.difficulties) == list(range(1, 9))
    assert all(len(families_for(d)) >= 3 for d in env.difficulties)
    prompts = {env.generate(d, random.Random(s)).prompt for d in env.difficulties for s in range(50)}
    assert len(prompts) > 300  # constants make the space large
    task = env.generate(3, random.Random(7))
    assert task == env.generate(3, random.Random(7))
    assert len(task.reference["tests"]) >= 4 and task.reference["function_name"] in task.prompt
    with pytest.raises(ValueError, match="valid levels are 1..8"):
        env.generate(42, random.Random(0))


@pytest.mark.parametrize("split", ["train", "report"])
def test_reference_solutions_pass_in_process(split):
    """Every family's reference passes its own tests (cheap check over many seeds, no sandbox)."""
    env = PythonFunctionsEnv()
    for d in env.difficulties:
        for seed in range(60):
            task = env.generate(d, random.Random(seed), split=split)
            assert task.metadata["split"] == split
            assert _passes_in_process(task), task.prompt


def test_reference_solution_of_every_family_passes_in_sandbox(sandbox):
    env = PythonFunctionsEnv(sandbox=sandbox)
    for family in ALL_FAMILIES:
        task = _task_for(env, family.name)
        answer = f"Here you go:\n```python\n{task.reference['solution']}```\nThis works."
        reward = env.verify(task, answer)
        assert reward.passed and reward.score == 1.0, (family.name, reward.details)


def test_wrong_answers_fail_with_details(sandbox):
    env = PythonFunctionsEnv(sandbox=sandbox, wall_seconds=2.0)
    task = _task_for(env, "add_constant")
    k = task.metadata["constants"]["k"]
    n = len(task.reference["tests"])

    wrong = env.verify(task, f"def add_constant(x):\n    return x + {k + 1}\n")
    assert not wrong.passed and wrong.score == 0.0 and f"0/{n} tests passed" in wrong.details

    partial = env.verify(task, f"def add_constant(x):\n    return x + {k} if x > 0 else 0\n")
    assert 0.0 <= partial.score < 1.0 and not partial.passed

    syntax = env.verify(task, "def add_constant(x)\n    return x")
    assert not syntax.passed and "syntax error" in syntax.details

    missing = env.verify(task, "def add(x):\n    return x\n")
    assert not missing.passed and "'add_constant' is not defined" in missing.details

    crash = env.verify(task, "raise SystemExit(3)\n")
    assert not crash.passed and "failed while loading" in crash.details

    loop = env.verify(task, "def add_constant(x):\n    while True:\n        pass\n")
    assert not loop.passed and loop.score == 0.0 and "limit" in loop.details

    forged = env.verify(
        task, "class E(int):\n    def __eq__(self, o):\n        return True\ndef add_constant(x):\n    return E(0)\n"
    )
    assert not forged.passed

    assert not env.verify(task, "").passed


def test_needs_a_sandbox():
    env = PythonFunctionsEnv()
    task = env.generate(1, random.Random(0))
    with pytest.raises(SandboxMissing, match="sandbox"):
        env.verify(task, task.reference["solution"])


def test_extract_code():
    assert extract_code("x\n```python\ndef f():\n    return 1\n```\nmore ```py\nf()\n```") == "def f():\n    return 1\n"
    assert extract_code("def f(): return 2") == "def f(): return 2\n"
    assert extract_code("```\ndef g(): pass\n") == "def g(): pass\n"


def test_phrasing_varies_and_hints():
    from lamarck.curriculum.environment import provides_hints

    env = PythonFunctionsEnv()
    tasks = [env.generate(d, random.Random(s)) for d in env.difficulties for s in range(20)]
    assert len({t.prompt.split("`", 1)[0] for t in tasks}) >= 3
    assert provides_hints(env) and "```python" in env.glossary()
    task = _task_for(env, "grade")
    solution = task.reference["solution"].rstrip()
    assert solution in env.solution_hint(task, 1.0)
    half = env.solution_hint(task, 0.5)
    assert solution not in half and solution.splitlines()[0] in half
    proposed = task.model_copy(update={"reference": {"function_name": "f", "tests": []}})
    assert env.solution_hint(proposed, 1.0) is None


def test_task_key_is_family_and_constants():
    env = PythonFunctionsEnv()
    task = _task_for(env, "scale")
    assert env.task_key(task) == f'scale:{{"k": {task.metadata["constants"]["k"]}}}'
    assert env.task_key(task.model_copy(update={"prompt": "reworded"})) == env.task_key(task)


def test_report_families_are_separate_and_cover_every_level():
    env = PythonFunctionsEnv()
    assert set(env.training_families) == {f.name for f in FAMILIES}
    assert set(env.report_families) == {f.name for f in REPORT_FAMILIES}
    assert not set(env.training_families) & set(env.report_families)
    assert all(families_for(d, "report") for d in env.difficulties)
    for d in env.difficulties:
        drawn = {env.generate(d, random.Random(s)).metadata["family"] for s in range(300)}
        assert drawn == {f.name for f in families_for(d)}  # the default split is training, all its families
        report = {env.generate(d, random.Random(s), split="report").metadata["family"] for s in range(300)}
        assert report == {f.name for f in families_for(d, "report")}
    with pytest.raises(ValueError, match="split must be"):
        env.generate(1, random.Random(0), split="gate")


@pytest.mark.parametrize("family", ALL_FAMILIES, ids=lambda f: f.name)
def test_every_family_has_key_hints_and_a_passing_reference(family):
    env = PythonFunctionsEnv()
    task = _task_for(env, family.name)
    assert _passes_in_process(task) and len(task.reference["tests"]) >= 4
    assert env.task_key(task).startswith(f"{family.name}:")
    assert env.task_key(task.model_copy(update={"prompt": "other words"})) == env.task_key(task)
    solution = task.reference["solution"].rstrip()
    assert solution in env.solution_hint(task, 1.0)
    part = env.solution_hint(task, 0.4)
    assert part is None or (solution not in part and solution.splitlines()[0] in part)
    assert "```python" in env.glossary() and family.name not in env.glossary()


def test_training_families_span_enough_programs_to_reserve_some():
    """About a thousand programs or more per training family, so reserving ~25 per family leaves training the rest.

    Report families only fill the report slice (50 distinct keys a level); training never draws them.
    """

    def programs(family):
        rng = random.Random(0)
        return len({repr(sorted(family.consts(rng).items())) for _ in range(4000)})

    for family in FAMILIES:
        assert programs(family) >= 800, family.name
    for level in PythonFunctionsEnv.difficulties:
        assert sum(programs(family) for family in families_for(level, "report")) >= 100, level


# The families added to widen training (33 -> 68): per level, 4 or 5 new kinds of function, none a report kind.
ADDED_FAMILIES = {
    1: {"subtract_from", "floor_divide", "wrap_text", "first_or_default", "square_plus"},
    2: {"spread", "slice_middle", "lookup_or_default", "parity_shift"},
    3: {"join_shifted", "mask_letters", "powers_mod", "basket_total"},
    4: {"first_word", "triangle_kind", "apply_command", "quadrant"},
    5: {"first_per_remainder", "palindrome_without", "sort_by_remainder", "rotate_right", "pair_sum_count"},
    6: {"parse_assignments", "ranked_names", "sum_number_tokens", "bucket_counts"},
    7: {"depth_sum", "roman_value", "pascal_row_mod", "wrap_lines"},
    8: {"grid_paths", "knapsack_best", "min_rooms", "subset_sum_count", "plus_before_times"},
}


def _tasks_of(env, family, n):
    """The first ``n`` training tasks of ``family`` that seeds 0, 1, ... draw at its level."""
    tasks = []
    for seed in range(100 * n):
        task = env.generate(family.level, random.Random(seed))
        if task.metadata["family"] == family.name:
            tasks.append(task)
            if len(tasks) == n:
                return tasks
    raise AssertionError(f"{family.name}: fewer than {n} tasks in {100 * n} seeds")


def test_added_families_are_training_only_and_widen_every_level():
    report = {f.name for f in REPORT_FAMILIES}
    for level, names in ADDED_FAMILIES.items():
        assert len(names) >= 4, level
        assert names <= {f.name for f in families_for(level)}, level  # at that level, in the training pool
        assert not names & report, level
        assert len(families_for(level)) >= 8, level
    assert len(FAMILIES) >= 65
    assert len({f.name for f in FAMILIES}) == len(FAMILIES)  # a name is one family: it is half of a task's key


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.name)
def test_every_training_family_passes_its_own_tests_over_seeds(family):
    """Over several seeds: the reference passes its generated tests (after the repr round trip the sandbox sees),
    the prompt names the function and spells out no template field, and tests exercise more than one answer."""
    env = PythonFunctionsEnv()
    tasks = _tasks_of(env, family, 6)
    expected = set()
    for task in tasks:
        assert _passes_in_process(task), task.prompt
        assert len(task.reference["tests"]) >= 4 and family.name in task.prompt
        assert "{" not in family.describe.format(**{k: "" for k in task.metadata["constants"]})
        expected |= {ast.unparse(ast.parse(test, mode="eval").body.args[1]) for test in task.reference["tests"]}
    assert len(expected) >= 2, family.name  # not a constant function
    assert len({env.task_key(task) for task in tasks}) == len(tasks)


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.name)
def test_every_training_family_has_many_distinct_task_keys(family):
    """Task keys (family and constants, as ``heldout`` reserves them) of 2000 constant draws: most distinct, so
    reserving the gate's and dev's programs leaves training almost all of the family."""
    env = PythonFunctionsEnv()
    task = _tasks_of(env, family, 1)[0]
    rng = random.Random(1)
    keys = {
        env.task_key(task.model_copy(update={"metadata": {**task.metadata, "constants": family.consts(rng)}}))
        for _ in range(2000)
    }
    assert len(keys) >= 700, family.name
