"""Orchestration overhead of the evolution loop: how much of a generation's wall time is not the agents' work.

For each generation:
  wall          propose start -> record end
  model         wall time with at least one model call in flight (union of LLMCall intervals)
  sandbox       wall time with at least one sandbox run in flight
  agents        time inside the agents' run() calls (proposer, executor, critic, induction, profile)
  orchestration wall - agents: node adapters (loading and storing records), events, checkpoints, the graph itself
  rest          wall - (model U sandbox): orchestration plus the agents' own non-model work (memory, embeddings)
Target: orchestration under 5% of wall.

Scenarios: ``scripted`` (every role on a scripted model that sleeps ``--latency`` seconds per call) and ``local``
(every role on the real local model; small, since a CPU generation takes minutes).
Run: ``python benchmarks/bench_orchestrator.py [--scenarios scripted local] [--generations 2] [--batch 8]``.
Writes benchmarks/results/bench_orchestrator.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from datetime import UTC
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "agents"))  # the scripted orchestrator the tests use

from sqlalchemy import select  # noqa: E402

from lamarck.agents.orchestrator import Orchestrator  # noqa: E402
from lamarck.agents.runs import RunConfig  # noqa: E402
from lamarck.memory.chroma import ChromaMemory  # noqa: E402
from lamarck.platform.container import Container  # noqa: E402
from lamarck.platform.llm.gateway import LLMGateway  # noqa: E402
from lamarck.platform.sandbox import Sandbox  # noqa: E402
from lamarck.platform.settings import (  # noqa: E402
    DEFAULT_MODEL_VERSION,
    EngineSettings,
    GatewaySettings,
    ModelRoutes,
    SandboxSettings,
    Settings,
)
from lamarck.platform.storage import migrate  # noqa: E402
from lamarck.platform.storage import repositories as repo  # noqa: E402
from lamarck.platform.storage.database import Database  # noqa: E402
from lamarck.platform.storage.records import LLMCall  # noqa: E402

Interval = tuple[float, float]


class TimedSandbox:
    """The real sandbox, recording when each run started and ended."""

    def __init__(self, inner: Sandbox) -> None:
        self._inner = inner
        self.intervals: list[Interval] = []
        self._lock = threading.Lock()

    def run_python(self, *args: Any, **kwargs: Any) -> Any:
        start = time.time()
        try:
            return self._inner.run_python(*args, **kwargs)
        finally:
            with self._lock:
                self.intervals.append((start, time.time()))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class Windows:
    """Listener: each generation's wall-clock window, propose start to record end."""

    def __init__(self) -> None:
        self.windows: dict[int, list[float]] = {}

    def on_event(self, event: Any) -> None:
        pass

    def on_node(self, node: str, generation: int, finished: bool) -> None:
        if node == "propose" and not finished:
            self.windows[generation] = [time.time(), 0.0]
        elif node == "record" and finished:
            self.windows[generation][1] = time.time()


def union_within(intervals: list[Interval], window: Interval) -> float:
    clipped = sorted((max(a, window[0]), min(b, window[1])) for a, b in intervals if b > window[0] and a < window[1])
    total, current = 0.0, None
    for a, b in clipped:
        if current is None or a > current[1]:
            if current is not None:
                total += current[1] - current[0]
            current = [a, b]
        else:
            current[1] = max(current[1], b)
    if current is not None:
        total += current[1] - current[0]
    return total


def scripted_gateway(db: Database, latency: float) -> tuple[LLMGateway, Any]:
    from test_orchestrator_support import responder, scripted_routes

    from lamarck.testing import ScriptedLLM, scripted_provider

    context = scripted_provider(ScriptedLLM(responder(latency)))
    context.__enter__()
    return LLMGateway(scripted_routes(), GatewaySettings(retries=0), db=db), context


def local_gateway(db: Database, store_root: Path) -> tuple[LLMGateway, Any]:
    from lamarck.platform.llm.engine import LocalEngine
    from lamarck.platform.llm.model_store import ModelStore
    from lamarck.platform.llm.provider import register_local_provider
    from lamarck.platform.settings import EngineSettings

    store = ModelStore(store_root)
    store.import_default(progress=False)
    engine = LocalEngine(store, EngineSettings())
    register_local_provider(engine)
    with db.session() as session:
        repo.register_model_version(
            session, version_id=DEFAULT_MODEL_VERSION, base=DEFAULT_MODEL_VERSION, status="promoted"
        )
    gateway = LLMGateway(
        ModelRoutes(), GatewaySettings(retries=0), db=db, ensure_local_provider=lambda: register_local_provider(engine)
    )
    return gateway, engine


def run_scenario(name: str, config: RunConfig, args: argparse.Namespace) -> list[dict[str, Any]]:
    workdir = Path(tempfile.mkdtemp(prefix=f"bench-orch-{name}-"))
    db = Database(f"sqlite:///{workdir / 'lamarck.db'}")
    migrate.upgrade(db)
    if name == "scripted":
        gateway, closer = scripted_gateway(db, args.latency)
    else:
        gateway, closer = local_gateway(db, Path(args.store))
    memory = ChromaMemory.embedded(workdir / "chroma")
    sandbox = TimedSandbox(Sandbox(SandboxSettings()))
    settings = Settings(data_dir=workdir, engine=EngineSettings(max_batch_size=32))
    container = Container(settings, db=db, gateway=gateway, memory=memory, sandbox=sandbox)  # type: ignore[arg-type]
    container.library.ensure_builtins()  # once per data dir; not part of a generation
    windows = Windows()
    orchestrator = Orchestrator(container, listener=windows, seed_builtins=False)
    outcome = orchestrator.run(orchestrator.start(config))
    with db.session() as session:
        calls = [
            (c.created_at.replace(tzinfo=UTC).timestamp() - c.latency_s, c.created_at.replace(tzinfo=UTC).timestamp())
            for c in session.scalars(select(LLMCall))
        ]
    rows = []
    for summary in outcome.summaries:
        window = tuple(windows.windows[summary.generation])
        wall = window[1] - window[0]
        model = union_within(calls, window)
        sandboxed = union_within(sandbox.intervals, window)
        busy = union_within(calls + sandbox.intervals, window)
        orchestration = max(0.0, wall - summary.agent_seconds)
        rows.append(
            {
                "scenario": name,
                "generation": summary.generation,
                "attempts": summary.attempts,
                "wall_s": round(wall, 3),
                "model_s": round(model, 3),
                "sandbox_s": round(sandboxed, 3),
                "agents_s": round(summary.agent_seconds, 3),
                "orchestration_s": round(orchestration, 3),
                "orchestration_share": round(orchestration / wall, 4) if wall else 0.0,
                "rest_share": round((wall - busy) / wall, 4) if wall else 0.0,
                "node_s": summary.node_seconds,
            }
        )
    memory.close()
    if hasattr(closer, "__exit__"):
        closer.__exit__(None, None, None)
    elif hasattr(closer, "close"):
        closer.close()
    db.dispose()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", nargs="+", default=["scripted", "local"], choices=["scripted", "local"])
    parser.add_argument("--generations", type=int, default=2)
    parser.add_argument("--batch", type=int, default=8, help="scripted batch size")
    parser.add_argument("--latency", type=float, default=0.05, help="scripted seconds per model call")
    parser.add_argument("--local-batch", type=int, default=2)
    parser.add_argument("--store", default=str(REPO / ".cache" / "test-models"))
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "bench_orchestrator.json"))
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    for name in args.scenarios:
        if name == "scripted":
            config = RunConfig(
                environments=["arithmetic"],
                generations=args.generations,
                batch_size=args.batch,
                samples_per_task=2,
                llm_share=0.25,
            )
        else:
            config = RunConfig(
                environments=["arithmetic"],
                generations=1,
                batch_size=args.local_batch,
                samples_per_task=2,
                llm_share=0.0,
                repair=False,
            )
        rows += run_scenario(name, config, args)
    header = ("scenario", "gen", "tries", "wall s", "model s", "sandbox s", "agents s", "orch. s", "orch. %", "rest %")
    print(" | ".join(header))
    for r in rows:
        print(
            " | ".join(
                [
                    r["scenario"],
                    str(r["generation"]),
                    str(r["attempts"]),
                    f"{r['wall_s']:.2f}",
                    f"{r['model_s']:.2f}",
                    f"{r['sandbox_s']:.2f}",
                    f"{r['agents_s']:.2f}",
                    f"{r['orchestration_s']:.3f}",
                    f"{100 * r['orchestration_share']:.2f}",
                    f"{100 * r['rest_share']:.1f}",
                ]
            )
        )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(
        json.dumps(
            {
                "rows": rows,
                "target_orchestration_share": 0.05,
                "args": {k: v for k, v in vars(args).items() if k not in ("store", "out")},
            },
            indent=2,
        )
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
