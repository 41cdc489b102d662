"""What the harness-critic gains with the base model and no training: rounds on each environment within a budget,
then report-slice success of the default and of the final harness.

Per environment: harness-critic rounds (challengers from bootstrapped demonstrations, the knob search and the
harness_critic model; champion/challenger on the development slice) until the minutes are spent. The default and
the final harness are then scored as they run (their own sampling and samples per task, a task passing when half
its samples pass) on the report slice, which no round ever sees. With no rollouts in between, the demonstrations
source has nothing to draw from here; the knob search and the rewrite do the work.
Writes benchmarks/results/bench_harness.json (top-level ``summary``:
per environment ``default`` and ``final`` as fractions) and prints a table.

Run: .venv/bin/python benchmarks/bench_harness.py [--minutes 10] [--env arithmetic string_ops]
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path
from typing import Any

from lamarck.agents.evaluation import default_harness_for
from lamarck.agents.harness_archive import lineage_rows
from lamarck.agents.harness_critic import dev_evaluator
from lamarck.agents.harness_round import current_harness, run_round
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0, help="rounds per environment until this is spent")
    parser.add_argument("--env", nargs="+", default=["arithmetic", "string_ops"])
    parser.add_argument("--per-level", type=int, default=5, help="report-slice tasks per level")
    parser.add_argument("--dev-per-level", type=int, default=4, help="development-slice tasks per level")
    parser.add_argument("--early-tasks", type=int, default=8, help="the small batch every challenger meets first")
    parser.add_argument("--budget-tasks", type=int, default=400, help="task evaluations per round, champion included")
    parser.add_argument("--work", default=str(ROOT / ".bench-harness"))
    parser.add_argument("--out", default=str(RESULTS / "bench_harness.json"))
    args = parser.parse_args()

    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    round_settings = HarnessCriticSettings(
        dev_per_level=args.dev_per_level, early_tasks=args.early_tasks, budget_tasks=args.budget_tasks
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
        started, rounds = time.monotonic(), []
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
