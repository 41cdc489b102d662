"""Tools that teach: held-out arithmetic success of the base model with the strict calculator and with the teaching one.

The strict calculator (before) refuses ``14 + 13 = 27`` with "not an arithmetic expression: invalid syntax". The
teaching calculator (now) evaluates the expression before ``=`` and returns its value alone (until December 2026 it
also said it had ignored the guess; the model copied that note, see bench_executor's reference), and every error says
how to write the call. Same model, same harness, same held-out tasks, greedy: the difference is the tool's alone, and is
reported apart from anything the evolution loop gains.

Run: ``python benchmarks/bench_tools.py [--per-level 10]``.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from lamarck.agents.evaluation import default_harness_for, evaluate  # noqa: E402
from lamarck.curriculum.calculator import CalculatorError, calculate, format_number  # noqa: E402
from lamarck.curriculum.environment import ToolSpec  # noqa: E402
from lamarck.curriculum.environments.arithmetic import ArithmeticEnv  # noqa: E402
from lamarck.curriculum.heldout import heldout_set  # noqa: E402
from lamarck.platform.llm.engine import LocalEngine  # noqa: E402
from lamarck.platform.llm.gateway import LLMGateway  # noqa: E402
from lamarck.platform.llm.model_store import ModelStore  # noqa: E402
from lamarck.platform.llm.provider import register_local_provider  # noqa: E402
from lamarck.platform.settings import EngineSettings, GatewaySettings, ModelRoutes  # noqa: E402
from lamarck.training.gate import sign_test_p  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
MODEL = "smollm2-135m"


def strict_calculator(expression: str) -> str:
    """The calculator as it was: the whole input must be one expression, and errors only say what is wrong."""
    try:
        return format_number(calculate(expression))
    except CalculatorError as exc:
        return f"error: {exc}"


class StrictArithmetic(ArithmeticEnv):
    def tools(self) -> list[ToolSpec]:
        return [tool.model_copy(update={"fn": strict_calculator}) for tool in super().tools()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-level", type=int, default=10)
    parser.add_argument(
        "--store", type=Path, default=Path(os.environ.get("LAMARCK_TEST_MODEL_STORE", REPO / ".cache" / "test-models"))
    )
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "bench_tools.json")
    args = parser.parse_args()

    store = ModelStore(args.store)
    store.import_default()
    engine = LocalEngine(store, EngineSettings())
    register_local_provider(engine)
    gateway = LLMGateway(ModelRoutes(), GatewaySettings(retries=0))
    results = {}
    for label, env in (("strict", StrictArithmetic()), ("teaching", ArithmeticEnv())):
        tasks = heldout_set("arithmetic", per_level=args.per_level, env=env)
        results[label] = evaluate(gateway, env, tasks, MODEL, default_harness_for(env), max_concurrency=64)
    engine.close()
    before, after = results["strict"].per_task, results["teaching"].per_task
    wins = sum(1 for k in before if after[k] > before[k])
    losses = sum(1 for k in before if after[k] < before[k])
    summary = {
        "arithmetic": {"strict": results["strict"].score, "teaching": results["teaching"].score},
        "tasks": len(before),
        "teaching_only_passed": wins,
        "strict_only_passed": losses,
        "sign_test_p": sign_test_p(wins, losses),
    }
    table = Table(title=f"held-out arithmetic, base {MODEL} (Q8_0), {len(before)} tasks, greedy")
    table.add_column("level")
    table.add_column("strict calculator", justify="right")
    table.add_column("teaching calculator", justify="right")
    for level in results["strict"].per_level:
        table.add_row(
            level, f"{results['strict'].per_level[level]:.0%}", f"{results['teaching'].per_level.get(level, 0.0):.0%}"
        )
    table.add_section()
    table.add_row("all", f"{results['strict'].score:.1%}", f"{results['teaching'].score:.1%}")
    Console().print(table)
    Console().print(
        f"tasks only the teaching calculator passed: {wins}; only the strict one: {losses}; "
        f"sign test p = {summary['sign_test_p']:.3f}"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "summary": summary,
                "per_level": {k: v.per_level for k, v in results.items()},
                "load_average": os.getloadavg(),
            },
            indent=2,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
