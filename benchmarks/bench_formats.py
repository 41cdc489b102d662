"""Does serving in int8 change what the model can do? Held-out success of the base model served in F32 and in Q8_0.

Rollouts and evaluations run on the Q8_0 file (int8 weights and activations); training runs on the fp32 weights.
This runs the project's own held-out evaluation (executor, default harness, greedy) for the same model in both
formats and compares task by task: the success rates, how many verdicts agree, and the exact paired sign test
over the tasks where they differ (a difference with p >= 0.05 is within noise).

Run: ``python benchmarks/bench_formats.py [--per-level 10] [--envs arithmetic string_ops python_functions]``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from lamarck.agents.evaluation import default_harness_for, evaluate  # noqa: E402
from lamarck.curriculum.heldout import heldout_set  # noqa: E402
from lamarck.curriculum.registry import get_environment  # noqa: E402
from lamarck.platform.llm.engine import LocalEngine  # noqa: E402
from lamarck.platform.llm.gateway import LLMGateway  # noqa: E402
from lamarck.platform.llm.model_store import ModelStore  # noqa: E402
from lamarck.platform.llm.provider import register_local_provider  # noqa: E402
from lamarck.platform.sandbox import Sandbox  # noqa: E402
from lamarck.platform.settings import EngineSettings, GatewaySettings, ModelRoutes, SandboxSettings  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
MODEL = "smollm2-135m"


def two_sided_sign_test(wins: int, losses: int) -> float:
    """Exact two-sided sign test over the discordant tasks (neither format is assumed the better one)."""
    n = wins + losses
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(wins, losses) + 1)) / 2**n
    return min(1.0, 2 * tail)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-level", type=int, default=10)
    parser.add_argument("--envs", nargs="+", default=["arithmetic", "string_ops", "python_functions"])
    parser.add_argument(
        "--store", type=Path, default=Path(os.environ.get("LAMARCK_TEST_MODEL_STORE", REPO / ".cache" / "test-models"))
    )
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "bench_formats.json")
    args = parser.parse_args()

    store = ModelStore(args.store)
    store.import_default()
    sandbox = Sandbox(SandboxSettings())
    gateway = LLMGateway(ModelRoutes(), GatewaySettings(retries=0))
    scores: dict[str, dict[str, dict[str, float]]] = {}
    seconds: dict[str, float] = {}
    for fmt in ("f32", "q8_0"):
        engine = LocalEngine(store, EngineSettings(format=fmt))
        register_local_provider(engine)
        started = time.perf_counter()
        for name in args.envs:
            env = get_environment(name, sandbox=sandbox)
            tasks = heldout_set(name, per_level=args.per_level, env=env)
            result = evaluate(gateway, env, tasks, MODEL, default_harness_for(env), max_concurrency=64)
            scores.setdefault(name, {})[fmt] = result.per_task
        seconds[fmt] = time.perf_counter() - started
        engine.close()

    environments = {}
    for name, by_format in scores.items():
        f32, q8 = by_format["f32"], by_format["q8_0"]
        wins = sum(1 for k in f32 if q8[k] > f32[k])
        losses = sum(1 for k in f32 if q8[k] < f32[k])
        environments[name] = {
            "tasks": len(f32),
            "f32": sum(f32.values()) / len(f32),
            "q8_0": sum(q8.values()) / len(q8),
            "verdicts_agree": sum(1 for k in f32 if q8[k] == f32[k]) / len(f32),
            "q8_only_passed": wins,
            "f32_only_passed": losses,
            "sign_test_p": two_sided_sign_test(wins, losses),
        }
    pooled_wins = sum(e["q8_only_passed"] for e in environments.values())
    pooled_losses = sum(e["f32_only_passed"] for e in environments.values())
    summary = {
        "per_environment": {k: {"f32": v["f32"], "q8_0": v["q8_0"]} for k, v in environments.items()},
        "verdicts_agree": sum(e["verdicts_agree"] * e["tasks"] for e in environments.values())
        / sum(e["tasks"] for e in environments.values()),
        "pooled_sign_test_p": two_sided_sign_test(pooled_wins, pooled_losses),
        "within_noise": two_sided_sign_test(pooled_wins, pooled_losses) >= 0.05,
    }
    table = Table(title=f"held-out success of {MODEL}: F32 vs Q8_0 ({args.per_level} tasks per level, greedy)")
    for column in ("environment", "tasks", "F32", "Q8_0", "verdicts agree", "Q8 only / F32 only", "sign test p"):
        table.add_column(column, justify="right")
    for name, e in environments.items():
        table.add_row(
            name,
            str(e["tasks"]),
            f"{e['f32']:.1%}",
            f"{e['q8_0']:.1%}",
            f"{e['verdicts_agree']:.0%}",
            f"{e['q8_only_passed']} / {e['f32_only_passed']}",
            f"{e['sign_test_p']:.2f}",
        )
    Console().print(table)
    verdict = "within" if summary["within_noise"] else "beyond"
    Console().print(
        f"pooled: p = {summary['pooled_sign_test_p']:.2f} ({verdict}"
        f" noise); seconds F32 {seconds['f32']:.0f}, Q8_0 {seconds['q8_0']:.0f}"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "summary": summary,
                "environments": environments,
                "seconds": seconds,
                "per_level": args.per_level,
                "load_average": os.getloadavg(),
            },
            indent=2,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
