"""A training recipe that fits: today's recipe against the new one, on the same rows, the same step budget.

The rows are built the way the distillation upper bound was: arithmetic training tasks (levels 2-6, training
seeds, no held-out prompt), each a chat the student harness would show (``student_opening``: system prompt, the
worked example, the task) followed by one calculator call with the environment's reference expression, the
calculator's real observation and the answer. Both recipes train LoRA adapters from the base on the same training
tasks; the same tasks are held out for validation (split by task):

- old: constant learning rate 3e-4, no warmup, a fixed number of steps, the last weights (the evolution runs' recipe;
  it is validated here only to report its curve, and nothing stops it);
- new: the TrainingSettings defaults (peak 1e-3, warmup then cosine decay, steps from the data size up to the same
  cap, early stopping on validation loss, the best checkpoint).

Each adapter is then served by the local engine (llama.cpp, Q8_0 base) and evaluated greedily with the student
harness on held-out arithmetic tasks of the same levels: the gate slice (training template families, held-out
seeds) and the report slice (template families no training task uses). Both recipes target every linear layer of
the decoder (q, k, v, o, gate, up, down): that was already the default before this recipe.

Scale: the upper bound trained 160 rows for 40 steps (10 minutes); this benchmark must fit about 8 minutes on two
shared cores, so it trains fewer rows for fewer steps (the JSON's ``scale`` says how many).

Writes benchmarks/results/bench_recipe.json (top-level ``summary``) and prints a table.
Run: ``.venv/bin/python benchmarks/bench_recipe.py [--tasks 36] [--steps 12] [--batch 4] [--per-level 6]
[--slices gate report] [--recipes old new] [--levels 2 3 4 5 6] [--style expression|stepwise]``
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch loads libgomp: spinning threads lose on shared cores

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from lamarck.agents.evaluation import EvaluationResult, default_harness_for, evaluate  # noqa: E402
from lamarck.agents.executor import student_opening  # noqa: E402
from lamarck.agents.toolbox import Toolbox  # noqa: E402
from lamarck.curriculum.environment import TaskSpec  # noqa: E402
from lamarck.curriculum.environments.arithmetic import ArithmeticEnv  # noqa: E402
from lamarck.curriculum.environments.arithmetic_hints import solution_steps  # noqa: E402
from lamarck.curriculum.heldout import heldout_set, report_set, training_task  # noqa: E402
from lamarck.platform.llm.engine import LocalEngine  # noqa: E402
from lamarck.platform.llm.gateway import LLMGateway  # noqa: E402
from lamarck.platform.llm.model_store import ModelStore  # noqa: E402
from lamarck.platform.llm.provider import register_local_provider  # noqa: E402
from lamarck.platform.settings import EngineSettings, GatewaySettings, ModelRoutes, TrainingSettings  # noqa: E402
from lamarck.platform.storage.trajectory import Message, ToolCall, Trajectory, render_for_model  # noqa: E402
from lamarck.training.gate import sign_test_p  # noqa: E402
from lamarck.training.sft import TrainResult, train_sft  # noqa: E402
from lamarck.training.traces_to_rows import TrainingRow  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
MODEL = "smollm2-135m"
LEVELS = (2, 3, 4, 5, 6)


def reference_row(task: TaskSpec, env: ArithmeticEnv, toolbox: Toolbox, style: str = "expression") -> TrainingRow:
    """The student's opening, the reference solution as calculator calls with their real results, the answer.

    ``expression``: one call with the whole reference expression (the upper bound's rows); ``stepwise``: one call per
    operation on the result of the one before (``solution_steps``, the form ``stepwise_rows`` trains)."""
    expression = str(task.reference["expression"])
    calls = [expression] if style == "expression" else [step for step, _ in solution_steps(expression) or []]
    messages = student_opening(task, env, default_harness_for(env))
    opening = len(messages)
    observation = ""
    for index, call in enumerate(calls, start=1):
        observation = toolbox.call("calculator", call)
        tool_call = ToolCall(id=f"call_{index}", name="calculator", arguments={"input": call})
        messages += [
            Message(role="assistant", content=f"CALL calculator: {call}", tool_calls=[tool_call]),
            Message(role="tool", name="calculator", tool_call_id=f"call_{index}", content=observation),
        ]
    messages.append(Message(role="assistant", content=f"ANSWER: {observation}"))
    chat = render_for_model(Trajectory(messages=messages))
    return TrainingRow(
        task_id=task.source_id or task.fingerprint,
        episode_id=f"reference:{task.fingerprint[:12]}",
        environment=env.name,
        difficulty=task.difficulty,
        messages=chat,
        train_turns=[index for index in range(opening, len(chat)) if chat[index]["role"] == "assistant"],
        prompt_length=opening,
    )


def reference_rows(
    count: int, seed: int, levels: tuple[int, ...] = LEVELS, style: str = "expression"
) -> list[TrainingRow]:
    env = ArithmeticEnv()
    toolbox = Toolbox(tools=env.tools())
    rng = random.Random(seed)
    return [reference_row(training_task(env, levels[i % len(levels)], rng), env, toolbox, style) for i in range(count)]


def recipes(steps: int, base: TrainingSettings) -> dict[str, TrainingSettings]:
    old = base.model_copy(
        update={
            "learning_rate": 3e-4,
            "lr_scheduler": "constant",
            "warmup_ratio": 0.0,
            "early_stopping_patience": 0,
            "keep_best": False,
            "min_steps": steps,
            "max_steps": steps,
        }
    )
    new = base.model_copy(update={"max_steps": steps})
    return {"old": old, "new": new}


def run_recipe(
    name: str, settings: TrainingSettings, rows: list[TrainingRow], store: ModelStore, work: Path, console: Console
) -> tuple[TrainResult, float]:
    console.print(
        f"[bold]{name}[/]: lr {settings.learning_rate:g} {settings.lr_scheduler}, warmup "
        f"{settings.warmup_ratio:g}, cap {settings.max_steps} steps, patience "
        f"{settings.early_stopping_patience}"
    )
    started = time.perf_counter()
    result = train_sft(base_dir=store.resolve(MODEL).base_dir, rows=rows, work_dir=work / name, settings=settings)
    return result, time.perf_counter() - started


def curve(result: TrainResult) -> dict[str, Any]:
    report = result.validation
    assert report is not None, "the benchmark's rows always have a validation side"
    kept_loss = report.best_loss if report.kept == "best" else report.last_loss
    return {
        "steps": result.steps,
        "planned_steps": result.planned_steps,
        "stopped_early": report.stopped_early,
        "learning_rate": result.learning_rate,
        "lr_scheduler": result.lr_scheduler,
        "warmup_steps": result.warmup_steps,
        "train_rows": result.train_rows,
        "train_loss_first": result.first_loss,
        "train_loss_last": result.last_loss,
        "val_loss_start": report.start_loss,
        "val_loss_best": report.best_loss,
        "val_best_step": report.best_step,
        "val_loss_last": report.last_loss,
        "kept": report.kept,
        "val_loss_kept": kept_loss,
        "val_curve": [[e.step, round(e.loss, 4)] for e in report.evaluations],
        "train_seconds": round(result.seconds, 1),
        "train_tokens_per_s": round(result.tokens_per_second, 1),
    }


def score(gateway: LLMGateway, env: ArithmeticEnv, tasks: list[TaskSpec], version: str) -> EvaluationResult:
    return evaluate(gateway, env, tasks, version, default_harness_for(env), max_concurrency=64)


def paired(a: EvaluationResult, b: EvaluationResult) -> dict[str, Any]:
    wins = sum(1 for k in a.per_task if b.per_task[k] > a.per_task[k])
    losses = sum(1 for k in a.per_task if b.per_task[k] < a.per_task[k])
    return {"new_only": wins, "old_only": losses, "sign_test_p": sign_test_p(wins, losses)}


def summarise(
    curves: dict[str, dict[str, Any]], scores: dict[str, dict[str, EvaluationResult]], seconds: dict[str, float]
) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for slice_name, prefix in (("gate", "heldout"), ("report", "report")):
        for name, result in scores.get(slice_name, {}).items():
            summary[f"{prefix}_{name}" if name == "base" else f"{prefix}_{name}_recipe"] = result.score
    if set(curves) != {"old", "new"}:
        return summary | {f"val_loss_{name}": c["val_loss_kept"] for name, c in curves.items()}
    return summary | {
        "val_loss_start": curves["new"]["val_loss_start"],
        "val_loss_old": curves["old"]["val_loss_kept"],
        "val_loss_new": curves["new"]["val_loss_kept"],
        "steps_old": curves["old"]["steps"],
        "steps_new": curves["new"]["steps"],
        "seconds_old": round(seconds["old"], 1),
        "seconds_new": round(seconds["new"], 1),
    }


def print_table(
    rows: int,
    curves: dict[str, dict[str, Any]],
    scores: dict[str, dict[str, EvaluationResult]],
    seconds: dict[str, float],
) -> None:
    table = Table(title=f"recipes on {rows} reference rows, greedy held-out success")
    for column in (
        "",
        "steps",
        "train loss",
        "val loss start → kept (best@step)",
        "seconds",
        *(f"{name} slice" for name in scores),
    ):
        table.add_column(column, justify="left" if not column else "right")
    if all("base" in by_version for by_version in scores.values()) and scores:
        table.add_row("base", "", "", "", "", *(f"{by_version['base'].score:.1%}" for by_version in scores.values()))
    for name, c in curves.items():
        table.add_row(
            f"{name}: lr {c['learning_rate']:g} {c['lr_scheduler']}",
            f"{c['steps']}/{c['planned_steps']}" + (" (early stop)" if c["stopped_early"] else ""),
            f"{c['train_loss_first']:.3f} → {c['train_loss_last']:.3f}",
            f"{c['val_loss_start']:.3f} → {c['val_loss_kept']:.3f} ({c['val_loss_best']:.3f}@{c['val_best_step']})",
            f"{seconds[name]:.0f}",
            *(f"{by_version[name].score:.1%}" if name in by_version else "—" for by_version in scores.values()),
        )
    Console().print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=36, help="arithmetic training tasks (one row each), levels 2-6")
    parser.add_argument("--steps", type=int, default=12, help="the step budget of both recipes (the new one's cap)")
    parser.add_argument("--batch", type=int, default=4, help="rows per step (both recipes)")
    parser.add_argument("--per-level", type=int, default=6, help="held-out tasks per level (gate and report slice)")
    parser.add_argument("--slices", nargs="+", default=["gate", "report"], choices=["gate", "report"])
    parser.add_argument("--no-base", action="store_true", help="do not evaluate the base model (saves a third)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--recipes", nargs="+", default=["old", "new"], choices=["old", "new"])
    parser.add_argument("--style", default="expression", choices=["expression", "stepwise"], help="rows' solutions")
    parser.add_argument("--levels", nargs="+", type=int, default=list(LEVELS), help="levels trained and evaluated")
    parser.add_argument(
        "--store", type=Path, default=Path(os.environ.get("LAMARCK_TEST_MODEL_STORE", REPO / ".cache" / "test-models"))
    )
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "bench_recipe.json")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a timeout still cleans the store and the work dir
    console = Console()
    started = time.perf_counter()
    load_start = os.getloadavg()

    store = ModelStore(args.store)
    store.import_default()
    levels = tuple(args.levels)
    rows = reference_rows(args.tasks, args.seed, levels, args.style)
    base = TrainingSettings(validation_share=0.2, evaluations=4, batch_size=args.batch, seed=args.seed)
    work = Path(tempfile.mkdtemp(prefix="bench-recipe-"))
    results: dict[str, TrainResult] = {}
    seconds: dict[str, float] = {}
    curves: dict[str, dict[str, Any]] = {}
    scores: dict[str, dict[str, EvaluationResult]] = {}

    def write(complete: bool) -> None:
        """Written after every phase, so a run cut short still leaves what it measured."""
        out = {
            "summary": summarise(curves, scores, seconds) if len(curves) == len(args.recipes) else {},
            "complete": complete,
            "scale": {
                "rows": len(rows),
                "train_rows": results["new"].train_rows if "new" in results else None,
                "step_budget": args.steps,
                "batch_size": args.batch,
                "slices": args.slices,
                "heldout_per_level": args.per_level,
                "levels": list(levels),
                "style": args.style,
                "note": (
                    f"{len(rows)} rows and at most {args.steps} steps of {args.batch} rows per recipe (the upper "
                    "bound trained 160 rows for 40 steps at 1e-3)"
                ),
            },
            "recipes": curves,
            "per_level": {s: {name: r.per_level for name, r in by_version.items()} for s, by_version in scores.items()},
            "paired_old_vs_new": {
                s: paired(by_version["old"], by_version["new"])
                for s, by_version in scores.items()
                if "old" in by_version and "new" in by_version
            },
            "eval_seconds": {
                s: {name: round(r.seconds, 1) for name, r in by_version.items()} for s, by_version in scores.items()
            },
            "total_seconds": round(time.perf_counter() - started, 1),
            "loadavg_start": load_start,
            "loadavg_end": os.getloadavg(),
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=2) + "\n")

    env = ArithmeticEnv()
    makers = {"gate": heldout_set, "report": report_set}
    slices = {
        name: [t for t in makers[name](env.name, per_level=args.per_level, env=env) if t.difficulty in levels]
        for name in args.slices
    }
    versions = {} if args.no_base else {"base": MODEL}
    tag = f"{args.seed}-{int(time.time())}"
    try:
        for name, settings in recipes(args.steps, base).items():
            if name not in args.recipes:
                continue
            results[name], seconds[name] = run_recipe(name, settings, rows, store, work, console)
            curves[name] = curve(results[name])
            write(complete=False)
        with LocalEngine(store, EngineSettings()) as engine:
            register_local_provider(engine)
            gateway = LLMGateway(ModelRoutes(), GatewaySettings(retries=0))
            for name, result in results.items():
                versions[name] = f"bench-recipe-{name}-{tag}"
                store.add_adapter(versions[name], Path(result.output_dir), base=MODEL)
            for slice_name, tasks in slices.items():
                for name, version in versions.items():
                    scores.setdefault(slice_name, {})[name] = score(gateway, env, tasks, version)
                    write(complete=False)
    finally:
        for name, version in versions.items():
            if name != "base" and version in store.versions():
                store.remove_adapter(version)
        shutil.rmtree(work, ignore_errors=True)
    write(complete=True)
    print_table(len(rows), curves, scores, seconds)
    console.print(f"wrote {args.out} in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
