"""What the harness-critic gains with the base model and no training: rounds on each environment within a budget,
then report-slice success of the default and of the final harness.

Per environment: first a seeding phase (``--seed-minutes``, 0 to skip): the executor runs the default (student)
harness on fresh training-seed tasks, drawn by the curriculum's training source and checked by the held-out leak
check, and its attempts are recorded and verified as a run records them, so the bootstrapped-demonstrations source
finds verified successes as it would after a run's rollouts. Then harness-critic rounds (challengers from
bootstrapped demonstrations, the knob search and the harness_critic model; champion/challenger on the development
slice) until the minutes are spent. The default and the final harness are then scored as they run (their own
sampling and samples per task, a task passing when half its samples pass) on the report slice, which neither the
seeding nor any round ever sees.
Writes benchmarks/results/bench_harness.json (top-level ``summary``: per environment ``default`` and ``final`` as
fractions; per environment the seeding's attempts and successes, and per round the challenger sources proposed)
and prints a table.

Run: .venv/bin/python benchmarks/bench_harness.py [--minutes 10] [--seed-minutes 3] [--env arithmetic string_ops]
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from collections import Counter
from pathlib import Path
from typing import Any

from lamarck.agents.demonstrations import verified_examples
from lamarck.agents.evaluation import default_harness_for
from lamarck.agents.executor import Executor
from lamarck.agents.harness_archive import lineage_rows
from lamarck.agents.harness_critic import HarnessCriticOutput, dev_evaluator
from lamarck.agents.harness_round import current_harness, run_round
from lamarck.agents.harness_seeding import seed_rollouts
from lamarck.curriculum.heldout import report_set
from lamarck.curriculum.registry import get_environment
from lamarck.platform.container import Container
from lamarck.platform.settings import DEFAULT_MODEL_VERSION, HarnessCriticSettings, Settings

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def report(container: Container, env_name: str, harness: Any, per_level: int) -> dict[str, Any]:
    env = get_environment(env_name, sandbox=container.sandbox)
    tasks = report_set(env_name, per_level=per_level, env=env)
    result = dev_evaluator(container.gateway, env, DEFAULT_MODEL_VERSION)(harness, tasks)
    n = len(tasks)
    return {"score": sum(result.passed) / n, "n": n, "tokens_per_task": sum(result.tokens) / n}


def seeding(container: Container, env_name: str, minutes: float, per_level: int) -> dict[str, Any]:
    """Rollouts of the default harness on training tasks, recorded as a run records them; what they left for the
    demonstrations source."""
    env = get_environment(env_name, sandbox=container.sandbox)
    executor = Executor(container.gateway, {env_name: env})
    report = seed_rollouts(
        container.db,
        executor,
        env,
        default_harness_for(env),
        model_version=DEFAULT_MODEL_VERSION,
        seconds=minutes * 60,
        per_level=per_level,
    )
    return {
        **report.model_dump(exclude={"task_ids", "seeds", "environment"}),
        "demonstrations_available": len(verified_examples(container.db, env_name)),
    }


def proposed_sources(out: HarnessCriticOutput) -> dict[str, dict[str, int]]:
    """Per source, how many proposals were raced as challengers and how many were refused before racing."""
    raced = Counter(challenger.source for challenger in out.challengers)
    refused = Counter(rejected.source for rejected in out.invalid)
    return {
        source: {"challengers": raced[source], "invalid": refused[source]}
        for source in ("demonstrations", "knobs", "rewrite")
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0, help="rounds per environment until this is spent")
    parser.add_argument(
        "--seed-minutes", type=float, default=3.0, help="training-task rollouts per environment first (0: none)"
    )
    parser.add_argument("--seed-per-level", type=int, default=1, help="training tasks per level in a seeding batch")
    parser.add_argument("--env", nargs="+", default=["arithmetic", "string_ops"])
    parser.add_argument("--per-level", type=int, default=5, help="report-slice tasks per level")
    parser.add_argument("--dev-per-level", type=int, default=4, help="development-slice tasks per level")
    parser.add_argument(
        "--edge-tasks", type=int, default=12, help="more dev tasks at each level of the champion's edge (0: none)"
    )
    parser.add_argument("--early-tasks", type=int, default=8, help="the small batch every challenger meets first")
    parser.add_argument("--budget-tasks", type=int, default=400, help="task evaluations per round, champion included")
    parser.add_argument("--work", default=str(ROOT / ".bench-harness"))
    parser.add_argument("--out", default=str(RESULTS / "bench_harness.json"))
    args = parser.parse_args()
    if args.seed_minutes < 0 or args.seed_per_level < 1:
        parser.error("--seed-minutes must be 0 or more (0 skips seeding) and --seed-per-level at least 1")

    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    round_settings = HarnessCriticSettings(
        dev_per_level=args.dev_per_level,
        edge_tasks=args.edge_tasks,
        early_tasks=args.early_tasks,
        budget_tasks=args.budget_tasks,
    )
    settings = Settings(data_dir=work, harness_critic=round_settings)
    container = Container(settings)
    container.model_store.import_default(progress=True)
    summary: dict[str, Any] = {}
    details: dict[str, Any] = {}
    for env_name in args.env:
        env = get_environment(env_name, sandbox=container.sandbox)
        default = default_harness_for(env)
        before = report(container, env_name, default, args.per_level)
        seeded = seeding(container, env_name, args.seed_minutes, args.seed_per_level)
        print(
            f"{env_name} seeding: {seeded['attempts']} attempts, {seeded['passed']} passed, "
            f"{seeded['demonstrations_available']} demonstrations available",
            flush=True,
        )
        started = time.monotonic()
        rounds: list[dict[str, Any]] = []
        while time.monotonic() - started < args.minutes * 60:
            out = run_round(
                container.db,
                container.gateway,
                env,
                model_version=DEFAULT_MODEL_VERSION,
                settings=settings.harness_critic,
                default=default,
                round_=len(rounds),
            )
            rounds.append(
                {
                    "round": len(rounds),
                    "champion": out.champion_id,
                    "promoted": out.promoted,
                    "challengers": len(out.challengers),
                    "invalid": len(out.invalid),
                    "sources": proposed_sources(out),
                    "tasks_evaluated": out.tasks_evaluated,
                    "seconds": round(time.monotonic() - started, 1),
                }
            )
            print(
                f"{env_name} round {len(rounds)}: {len(out.challengers)} challengers, "
                f"promoted {out.promoted or 'none'}",
                flush=True,
            )
        final_id, final = current_harness(container.db, env, default)
        after = report(container, env_name, final, args.per_level) if final_id != default.version_id else before
        with container.db.session() as session:
            lineage = lineage_rows(session, env_name)
        summary[env_name] = {"default": before["score"], "final": after["score"]}
        details[env_name] = {
            "default": before,
            "seeding": seeded,
            "final": {**after, "harness": final_id},
            "rounds": rounds,
            "lineage": lineage,
        }
    out_path = Path(args.out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(
        json.dumps(
            {
                "summary": summary,
                "benchmark": "bench_harness",
                "settings": {k: v for k, v in vars(args).items() if k not in ("work", "out")},
                "environments": details,
            },
            indent=2,
            default=str,
        )
        + "\n"
    )
    print(f"\n{'environment':<14}{'default':>10}{'final':>10}")
    for env_name, row in summary.items():
        print(f"{env_name:<14}{row['default']:>10.1%}{row['final']:>10.1%}")
    print(f"wrote {out_path}")
    container.close()


if __name__ == "__main__":
    main()
