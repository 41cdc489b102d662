"""Can help at rollout lift the model above its frontier? The early, cheap check before an hour of evolution.

On 50 arithmetic training tasks (10 per level 2-6) with the base model: greedy success of the student (the gate's
view), pass@k without hints at two temperatures, pass@k with each rung of the hint ladder applied to every task
(a glossary, the model's own verified successes as worked examples, part and all of the reference solution),
and the ladder itself (each task gets the weakest help that works). A row only counts as "sound" if it survives
the process filter and the student re-rendering, i.e. if it could become a training row.

Writes benchmarks/results/bench_hints.json (top-level ``summary``) and prints a table.
Run: ``python benchmarks/bench_hints.py [--per-level 10] [--samples 4]``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from lamarck.agents.evaluation import default_harness_for  # noqa: E402
from lamarck.agents.executor import Attempt, Executor, ExecutorInput  # noqa: E402
from lamarck.agents.harness import FewShotExample, HarnessSpec  # noqa: E402
from lamarck.agents.hint_ladder import run_ladder  # noqa: E402
from lamarck.agents.teacher import HintLevel, NoHelp, demonstration, help_for  # noqa: E402
from lamarck.curriculum.environment import TaskSpec  # noqa: E402
from lamarck.curriculum.heldout import training_task  # noqa: E402
from lamarck.curriculum.registry import get_environment  # noqa: E402
from lamarck.platform.llm.engine import LocalEngine  # noqa: E402
from lamarck.platform.llm.gateway import LLMGateway  # noqa: E402
from lamarck.platform.llm.model_store import ModelStore  # noqa: E402
from lamarck.platform.llm.provider import register_local_provider  # noqa: E402
from lamarck.platform.settings import EngineSettings, GatewaySettings, ModelRoutes  # noqa: E402
from lamarck.training.process_filter import process_problem  # noqa: E402
from lamarck.training.student_rows import RowRefused, student_row  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
MODEL = "smollm2-135m"
LEVELS = (2, 3, 4, 5, 6)
DEMO_LEVELS = (1, 2, 3)


def tasks_for(env_name: str, levels: tuple[int, ...], per_level: int, seed: int) -> list[TaskSpec]:
    env = get_environment(env_name)
    rng = random.Random(seed)
    return [training_task(env, level, rng) for level in levels for _ in range(per_level)]


def sound(task: TaskSpec, attempt: Attempt) -> bool:
    """Whether a passing attempt could become a training row: a sound process and a clean student re-rendering."""
    if process_problem(task, attempt.trajectory, attempt.answer or "") is not None:
        return False
    try:
        student_row(attempt.trajectory)
    except RowRefused:
        return False
    return True


def score(env_name: str, tasks: list[TaskSpec], attempts: list[Attempt]) -> dict[str, object]:
    env = get_environment(env_name)
    passed: dict[int, list[bool]] = defaultdict(list)
    kept: dict[int, list[bool]] = defaultdict(list)
    for attempt in attempts:
        task = tasks[attempt.task_index]
        ok = attempt.answer is not None and env.verify(task, attempt.answer).passed
        passed[attempt.task_index].append(ok)
        kept[attempt.task_index].append(ok and sound(task, attempt))
    per_level: dict[str, list[float]] = defaultdict(list)
    for index, task in enumerate(tasks):
        per_level[str(task.difficulty)].append(float(any(passed[index])))
    return {
        "pass_at_k": sum(any(passed[i]) for i in range(len(tasks))) / len(tasks),
        "sound_at_k": sum(any(kept[i]) for i in range(len(tasks))) / len(tasks),
        "sample_success": sum(sum(v) for v in passed.values()) / max(1, sum(len(v) for v in passed.values())),
        "per_level": {level: sum(v) / len(v) for level, v in sorted(per_level.items())},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--environment", default="arithmetic")
    parser.add_argument("--per-level", type=int, default=10)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--temperatures", type=float, nargs="+", default=(0.7, 1.0))
    parser.add_argument("--teacher-temperature", type=float, default=0.7)
    parser.add_argument(
        "--store", type=Path, default=Path(os.environ.get("LAMARCK_TEST_MODEL_STORE", REPO / ".cache" / "test-models"))
    )
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "bench_hints.json")
    args = parser.parse_args()

    store = ModelStore(args.store)
    store.import_default()
    engine = LocalEngine(store, EngineSettings())
    register_local_provider(engine)
    gateway = LLMGateway(ModelRoutes(), GatewaySettings(retries=0))
    env = get_environment(args.environment)
    environments = {env.name: env}
    executor = Executor(gateway, environments, max_concurrency=256)
    student = default_harness_for(env)
    tasks = tasks_for(env.name, LEVELS, args.per_level, seed=1)
    console = Console()
    results: dict[str, dict[str, object]] = {}
    seconds: dict[str, float] = {}

    def run(
        label: str,
        harness: HarnessSpec,
        samples: int,
        help_level: HintLevel | None = None,
        demos: list[FewShotExample] | None = None,
    ) -> list[Attempt]:
        help = {}
        if help_level is not None:
            for index, task in enumerate(tasks):
                try:
                    help[index] = help_for(task, env, help_level, demos or [])
                except NoHelp:
                    pass
        started = time.perf_counter()
        prefilled = engine.prefix_stats["prefilled_tokens"]
        out = executor.run(
            ExecutorInput(
                tasks=tasks,
                model_version=MODEL,
                harnesses={env.name: harness},
                samples_per_task=samples,
                seed=11,
                help=help,
            )
        )
        seconds[label] = time.perf_counter() - started
        results[label] = score(env.name, tasks, out.attempts)
        steps = [step for step in engine.steps if step.at >= started]  # the engine keeps the last 2,000 steps
        results[label]["engine"] = {
            "steps": len(steps),
            "decode_seconds": sum(s.seconds for s in steps),
            "generated_tokens": sum(a.completion_tokens for a in out.attempts),
            "prefilled_tokens": engine.prefix_stats["prefilled_tokens"] - prefilled,
            "mean_rows_per_step": sum(s.rows for s in steps) / max(1, len(steps)),
            "episode_steps_mean": sum(a.steps for a in out.attempts) / max(1, len(out.attempts)),
        }
        partial_report()
        console.print(
            f"{label}: pass@{samples} {results[label]['pass_at_k']:.0%} "
            f"(sound {results[label]['sound_at_k']:.0%}) in {seconds[label]:.0f} s"
        )
        return out.attempts

    def partial_report() -> None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"partial": True, "results": results, "seconds": seconds}, indent=2) + "\n")

    greedy = student.derive(sampling={"temperature": 0.0, "top_p": 1.0})
    run("student greedy", greedy, 1)
    for temperature in args.temperatures:
        sampled = student.derive(sampling={"temperature": temperature})
        run(f"no hint T={temperature}", sampled, args.samples)
    teacher = student.derive(sampling={"temperature": args.teacher_temperature})

    # worked examples: the model's own verified, process-sound successes on other (easier) training tasks
    demo_tasks = tasks_for(env.name, DEMO_LEVELS, 8, seed=2)
    out = executor.run(
        ExecutorInput(
            tasks=demo_tasks,
            model_version=MODEL,
            harnesses={env.name: teacher},
            samples_per_task=args.samples,
            seed=12,
            help={
                i: help_for(t, env, HintLevel.GLOSSARY)
                for i, t in enumerate(demo_tasks)
                if _has(env, HintLevel.GLOSSARY, t)
            },
        )
    )
    demos: list[FewShotExample] = []
    for attempt in out.attempts:
        task = demo_tasks[attempt.task_index]
        if attempt.answer and env.verify(task, attempt.answer).passed and sound(task, attempt):
            example = demonstration(task, attempt.trajectory)
            if example is not None and example not in demos:
                demos.append(example)
    console.print(f"bootstrapped {len(demos)} worked examples from {len(demo_tasks)} easier training tasks")

    for level in (HintLevel.GLOSSARY, HintLevel.DEMONSTRATIONS, HintLevel.PARTIAL, HintLevel.FULL):
        run(f"hint: {level.value}", teacher, args.samples, level, demos)

    started = time.perf_counter()
    ladder = run_ladder(
        executor,
        ExecutorInput(
            tasks=tasks, model_version=MODEL, harnesses={env.name: teacher}, samples_per_task=args.samples, seed=13
        ),
        environments,
        demonstrations={env.name: demos},
    )
    seconds["ladder"] = time.perf_counter() - started
    results["ladder"] = score(env.name, tasks, ladder.attempts)
    solved_by = defaultdict(int)
    for level in ladder.solved_at.values():
        solved_by[level.value] += 1
    engine.close()

    table = Table(title=f"{env.name}: {len(tasks)} training tasks (levels {LEVELS[0]}-{LEVELS[-1]}), base {MODEL}")
    table.add_column("configuration")
    table.add_column("pass@k", justify="right")
    table.add_column("sound@k", justify="right")
    for level in LEVELS:
        table.add_column(f"L{level}", justify="right")
    table.add_column("seconds", justify="right")
    for label, result in results.items():
        per_level = result["per_level"]
        assert isinstance(per_level, dict)
        table.add_row(
            label,
            f"{result['pass_at_k']:.0%}",
            f"{result['sound_at_k']:.0%}",
            *[f"{per_level.get(str(level), 0.0):.0%}" for level in LEVELS],
            f"{seconds[label]:.0f}",
        )
    console.print(table)
    console.print("ladder: tasks first solved at " + ", ".join(f"{k} {v}" for k, v in solved_by.items()))
    summary = {
        "student_greedy": results["student greedy"]["pass_at_k"],
        **{f"no_hint_pass_at_{args.samples}_t{t}": results[f"no hint T={t}"]["pass_at_k"] for t in args.temperatures},
        **{
            f"{level.value}_pass_at_{args.samples}": results[f"hint: {level.value}"]["pass_at_k"]
            for level in (HintLevel.GLOSSARY, HintLevel.DEMONSTRATIONS, HintLevel.PARTIAL, HintLevel.FULL)
        },
        "ladder_pass_at_k": results["ladder"]["pass_at_k"],
        "ladder_sound_at_k": results["ladder"]["sound_at_k"],
        "ladder_solved_at": dict(solved_by),
    }
    report = {
        "summary": summary,
        "results": results,
        "seconds": seconds,
        "tasks": len(tasks),
        "samples": args.samples,
        "demonstrations": len(demos),
        "ladder_rungs": [r.model_dump(mode="json") for r in ladder.rungs],
        "engine": "llama.cpp Q8_0 (embedded default)",
        "load_average": os.getloadavg(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")


def _has(env: object, level: HintLevel, task: TaskSpec) -> bool:
    try:
        help_for(task, env, level)  # type: ignore[arg-type]
    except NoHelp:
        return False
    return True


if __name__ == "__main__":
    main()
