"""Executor throughput: 32 easy arithmetic tasks x 4 samples through the whole loop, beside the raw engine.

The raw engine on the same tasks is measured two ways, each on a fresh engine so nothing of the executor's run is
found cached, and the faster one is the reference (``efficiency_vs_raw_engine = executor tok/s / faster raw tok/s``,
target: at least 70%):

- all calls at once: every model call the executor made (each call's prompt, samples and number of generated
  tokens, eos ignored) given to the engine together. Nothing waits on anything, but no episode's next prompt finds
  its earlier one in a slot, so every prompt is prefilled whole.
- calls in dependency order: the same calls with the executor's own parameters (seeds, stops, caps), each sent the
  moment the call it follows has returned (a task's first n-sample call, then each of its episodes' later calls),
  every task and episode at once. Each episode's next prompt extends its earlier one in the engine's slot, as in the
  executor, and nothing runs between two calls: the executor's work under the executor's dependencies, without the
  executor (parsing, tools, sandbox, bookkeeping).

What remains between the executor and the faster of the two is what the executor's own code and scheduling lose.

The earlier raw figure is kept as ``efficiency_vs_first_step_decode``: the executor's first-step prompts only,
each decoding the harness's whole token cap in one batched call. It is the engine's best decode speed, not the
same work: the executor's calls are shorter and their prompts must be prefilled.

Generated tokens are not the engine's only work: a ReAct episode also prefills each step's new prompt tokens (the
task, then each observation), which the raw call, finding its prompts cached and decoding 64 tokens a row, hardly
does. Where prefill costs about as much per token as decoding (a CPU without int8 dot-product instructions), that
work alone caps the first figure near generated / (generated + prefilled). So the bench also reports the engine's
whole work per second (prefilled + generated tokens) for both, and their ratio: what the executor's scheduling
keeps of the engine, whatever its prompts cost.

Run: ``python benchmarks/bench_executor.py [--tasks 32] [--samples 4] [--store DIR]``.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from lamarck.agents.executor import Executor, ExecutorInput, render_for_model
from lamarck.agents.harness import default_harness
from lamarck.curriculum.environments.arithmetic import ArithmeticEnv
from lamarck.platform.cpu import cpu_summary
from lamarck.platform.llm.engine import LocalEngine
from lamarck.platform.llm.gateway import ChatResult, LLMGateway
from lamarck.platform.llm.model_store import ModelStore
from lamarck.platform.llm.provider import register_local_provider
from lamarck.platform.llm.sampling import SamplingParams
from lamarck.platform.settings import EngineSettings, GatewaySettings, ModelRoutes
from lamarck.platform.tracing import current_call

REPO = Path(__file__).resolve().parents[1]
MODEL = "smollm2-135m"
SAMPLING_KEYS = ("temperature", "top_p", "max_tokens", "stop", "stop_after", "seed", "n")


@dataclass(frozen=True)
class RecordedCall:
    messages: list[dict[str, Any]]
    completion_tokens: int  # all samples together, as the engine reports them
    params: dict[str, Any]  # the sampling parameters the executor asked for (seed, stops, cap, n)
    episode_id: str | None  # the episode the call served (a first step's n-sample call: its task's lead episode)

    @property
    def samples(self) -> int:
        return int(self.params.get("n") or 1)


class RecordingGateway(LLMGateway):
    """The gateway, keeping each executor call's prompt and what it generated, so the raw engine can replay them."""

    def __init__(self, routes: ModelRoutes, settings: GatewaySettings) -> None:
        super().__init__(routes, settings)
        self.calls: list[RecordedCall] = []
        self._lock = threading.Lock()

    def complete(self, role: str, messages: list[dict[str, Any]], **params: Any) -> ChatResult:
        result = super().complete(role, messages, **params)
        sampling = {key: params[key] for key in SAMPLING_KEYS if key in params}
        call = RecordedCall(copy.deepcopy(messages), result.completion_tokens, sampling, current_call().episode_id)
        with self._lock:
            self.calls.append(call)
        return result


def replay(engine: LocalEngine, calls: list[RecordedCall], harness_sampling: Any) -> tuple[int, int, float]:
    """Every recorded call at once, each generating as many tokens as it did: (generated, prefilled, seconds)."""

    def one(call: RecordedCall) -> int:
        params = SamplingParams(
            max_tokens=max(1, math.ceil(call.completion_tokens / call.samples)),
            temperature=harness_sampling.temperature,
            top_p=harness_sampling.top_p,
            n=call.samples,
            seed=1,
            ignore_eos=True,
        )
        return sum(c.completion_tokens for c in engine.chat(MODEL, call.messages, params))

    prefilled_before = engine.prefix_stats["prefilled_tokens"]
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=min(256, len(calls))) as pool:
        generated = sum(pool.map(one, calls))
    seconds = time.perf_counter() - started
    return generated, engine.prefix_stats["prefilled_tokens"] - prefilled_before, seconds


def replay_in_order(engine: LocalEngine, calls: list[RecordedCall], task_of: dict[str, int]) -> tuple[int, int, float]:
    """The same calls with the executor's own parameters (seeds, stops, caps), each issued the moment the call it
    follows has returned: per task its first n-sample call, then each of its episodes' later calls in order, every
    task and episode at once. Nothing runs between two calls (no parsing, tools, sandbox or bookkeeping), and each
    episode's next prompt finds its earlier one in the engine's slot, as in the executor: the raw engine doing the
    executor's work under the same dependencies, so ``executor / this`` is what the executor's own code costs.
    Returns (generated, prefilled, seconds)."""
    chains: dict[str, list[RecordedCall]] = {}
    firsts: dict[int, RecordedCall] = {}
    for call in calls:
        if call.episode_id is None or call.episode_id not in task_of:
            raise SystemExit(f"a recorded call has no known episode ({call.episode_id!r}): the replay needs every one")
        task = task_of[call.episode_id]
        if call.samples > 1 and task not in firsts:
            firsts[task] = call
        else:
            chains.setdefault(call.episode_id, []).append(call)
    tasks = sorted(set(task_of.values()))

    def ask(call: RecordedCall) -> int:
        params = SamplingParams(**call.params)
        return sum(c.completion_tokens for c in engine.chat(MODEL, call.messages, params))

    def chain(episode: str) -> int:
        return sum(ask(call) for call in chains.get(episode, []))

    def task_work(task: int, pool: ThreadPoolExecutor) -> int:
        generated = ask(firsts[task]) if task in firsts else 0
        episodes = [episode for episode, t in task_of.items() if t == task]
        return generated + sum(pool.map(chain, episodes))

    prefilled_before = engine.prefix_stats["prefilled_tokens"]
    started = time.perf_counter()
    with (
        ThreadPoolExecutor(max_workers=max(1, len(task_of))) as chain_pool,
        ThreadPoolExecutor(max_workers=max(1, len(tasks))) as task_pool,
    ):
        generated = sum(task_pool.map(lambda task: task_work(task, chain_pool), tasks))
    seconds = time.perf_counter() - started
    return generated, engine.prefix_stats["prefilled_tokens"] - prefilled_before, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=32)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument(
        "--store", type=Path, default=Path(os.environ.get("LAMARCK_TEST_MODEL_STORE", REPO / ".cache/test-models"))
    )
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks/results/bench_executor.json")
    args = parser.parse_args()

    store = ModelStore(args.store)
    store.import_default(progress=True)
    engine = LocalEngine(store, EngineSettings(slots=min(256, args.tasks * args.samples)))
    register_local_provider(engine)
    gateway = RecordingGateway(ModelRoutes(), GatewaySettings(retries=0))
    env = ArithmeticEnv()
    rng = random.Random(0)
    tasks = [env.generate(rng.choice([1, 2]), rng) for _ in range(args.tasks)]
    harness = default_harness("arithmetic", env.answer_format)
    executor = Executor(gateway, {"arithmetic": env}, max_concurrency=args.tasks * args.samples)
    request = ExecutorInput(
        tasks=tasks, model_version=MODEL, harnesses={"arithmetic": harness}, samples_per_task=args.samples
    )

    executor.run(request.model_copy(update={"tasks": tasks[:2], "samples_per_task": 1}))  # warm-up

    gateway.calls.clear()
    started = time.perf_counter()
    first_step = len(engine.steps)
    prefilled_before = engine.prefix_stats["prefilled_tokens"]
    out = executor.run(request)
    loop_seconds = time.perf_counter() - started
    steps = engine.steps[first_step:]
    decode_seconds = sum(s.seconds for s in steps)
    rows_per_step = sum(s.rows * s.seconds for s in steps) / max(decode_seconds, 1e-9)
    generated = sum(a.completion_tokens for a in out.attempts)
    loop_tps = generated / loop_seconds
    loop_prefilled = engine.prefix_stats["prefilled_tokens"] - prefilled_before
    loop_work_tps = (generated + loop_prefilled) / loop_seconds

    openings = [render_for_model(out.attempts[i * args.samples].trajectory)[:2] for i in range(args.tasks)]
    params = SamplingParams(
        max_tokens=harness.sampling.max_tokens_per_step,
        temperature=harness.sampling.temperature,
        top_p=harness.sampling.top_p,
        n=args.samples,
        seed=1,
        ignore_eos=True,
    )
    started = time.perf_counter()
    prefilled_before = engine.prefix_stats["prefilled_tokens"]
    raw = engine.chat_batch(MODEL, openings, params)
    raw_seconds = time.perf_counter() - started
    raw_tokens = sum(c.completion_tokens for row in raw for c in row)
    raw_tps = raw_tokens / raw_seconds
    raw_prefilled = engine.prefix_stats["prefilled_tokens"] - prefilled_before
    raw_work_tps = (raw_tokens + raw_prefilled) / raw_seconds

    executor_prefix_stats = dict(engine.prefix_stats)

    def fresh_engine() -> LocalEngine:
        """Each replay runs on a new engine, so nothing of an earlier run is found cached; warmed up, as the
        executor's was."""
        engine.close()
        new = LocalEngine(store, EngineSettings(slots=min(256, args.tasks * args.samples)))
        new.chat(MODEL, openings[0], SamplingParams(max_tokens=4))
        return new

    engine = fresh_engine()
    same_generated, same_prefilled, same_seconds = replay(engine, gateway.calls, harness.sampling)
    same_tps = same_generated / same_seconds
    same_work_tps = (same_generated + same_prefilled) / same_seconds
    engine = fresh_engine()
    task_of = {a.episode_id: a.task_index for a in out.attempts}
    order_generated, order_prefilled, order_seconds = replay_in_order(engine, gateway.calls, task_of)
    order_tps = order_generated / order_seconds
    order_work_tps = (order_generated + order_prefilled) / order_seconds
    raw_best_tps = max(same_tps, order_tps)

    load = os.getloadavg()[0]
    result = {
        "summary": {
            "efficiency_vs_raw_engine": loop_tps / raw_best_tps,
            "efficiency_vs_all_calls_at_once": loop_tps / same_tps,
            "efficiency_vs_calls_in_order": loop_tps / order_tps,
            "work_efficiency_vs_calls_in_order": loop_work_tps / order_work_tps,
            "efficiency_vs_first_step_decode": loop_tps / raw_tps,
            "episodes_per_minute": len(out.attempts) / loop_seconds * 60,
            "executor_tokens_per_s": loop_tps,
            "raw_engine_tokens_per_s": raw_best_tps,
            "first_step_decode_tokens_per_s": raw_tps,
            "target_efficiency": 0.7,
            "work_efficiency_vs_all_calls_at_once": loop_work_tps / same_work_tps,
            "prefilled_per_generated_token": loop_prefilled / max(generated, 1),
        },
        "same_calls": {
            "calls": len(gateway.calls),
            "generated_tokens": same_generated,
            "prefilled_tokens": same_prefilled,
            "seconds": same_seconds,
            "tokens_per_s": same_tps,
            "work_tokens_per_s": same_work_tps,
        },
        "calls_in_order": {
            "calls": len(gateway.calls),
            "generated_tokens": order_generated,
            "prefilled_tokens": order_prefilled,
            "seconds": order_seconds,
            "tokens_per_s": order_tps,
            "work_tokens_per_s": order_work_tps,
        },
        "cpu": cpu_summary(),
        "executor_prefilled_tokens": loop_prefilled,
        "executor_work_tokens_per_s": loop_work_tps,
        "first_step_prefilled_tokens": raw_prefilled,
        "first_step_generated_tokens": raw_tokens,
        "first_step_work_tokens_per_s": raw_work_tps,
        "engine": "llama.cpp Q8_0 (embedded default), continuous batching",
        "prefix_stats": executor_prefix_stats,
        "engine_steps": len(steps),
        "engine_decode_share": decode_seconds / loop_seconds,
        "rows_per_step_time_weighted": rows_per_step,
        "tasks": args.tasks,
        "samples": args.samples,
        "episodes": len(out.attempts),
        "episodes_per_minute": len(out.attempts) / loop_seconds * 60,
        "executor_generated_tokens": generated,
        "executor_seconds": loop_seconds,
        "executor_tokens_per_s": loop_tps,
        "model_calls": out.model_calls,
        "steps_mean": sum(a.steps for a in out.attempts) / len(out.attempts),
        "answered": sum(a.answer is not None for a in out.attempts),
        "passed": sum(a.answer is not None and env.verify(tasks[a.task_index], a.answer).passed for a in out.attempts),
        "first_step_decode_tokens_per_s": raw_tps,
        "kept_share": loop_tps / raw_best_tps,
        "load_average": load,
    }
    table = Table(
        title=f"executor throughput ({args.tasks} arithmetic tasks x {args.samples} samples, load {load:.1f})"
    )
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_row("episodes / minute", f"{result['episodes_per_minute']:.1f}")
    table.add_row("executor generated tokens / s", f"{loop_tps:.1f}")
    table.add_row(f"raw engine tokens / s (the same {len(gateway.calls)} calls at once)", f"{same_tps:.1f}")
    table.add_row("raw engine tokens / s (the same calls in dependency order, slots kept)", f"{order_tps:.1f}")
    table.add_row("share of the faster raw kept (target >= 70%)", f"{result['kept_share']:.0%}")
    table.add_row(
        "engine work / s: executor / raw, calls in order",
        f"{loop_work_tps:.1f} / {order_work_tps:.1f} ({loop_work_tps / order_work_tps:.0%})",
    )
    table.add_row(
        "first-step prompts decoding the whole cap: tokens / s (share)", f"{raw_tps:.1f} ({loop_tps / raw_tps:.0%})"
    )
    table.add_row("prompt tokens prefilled per generated token", f"{loop_prefilled / max(generated, 1):.2f}")
    table.add_row(
        "engine work / s (prefilled + generated): executor / raw, calls at once",
        f"{loop_work_tps:.1f} / {same_work_tps:.1f} ({loop_work_tps / same_work_tps:.0%})",
    )
    table.add_row(
        "engine busy share / rows per step (time-weighted)",
        f"{result['engine_decode_share']:.0%} / {rows_per_step:.1f}",
    )
    table.add_row("model calls / mean steps", f"{out.model_calls} / {result['steps_mean']:.2f}")
    table.add_row("answered / passed", f"{result['answered']} / {result['passed']} of {len(out.attempts)}")
    Console().print(table)
    engine.close()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
