"""Rollouts fanned out over Celery workers: episodes per minute with 1, 2 and 4 `lamarck worker --queues rollout`
processes, and how close that is to linear.

Every point is a fresh distributed deployment on loopback: a PostgreSQL database of its own, Redis as the broker (its
own key prefix), one shared `chroma run` server (its own collections), and the workers, each `lamarck worker` in a
process group and data directory of its own. The orchestrator runs here, with ``workers.rollouts = "queue"``: each
generation sends one `lamarck.rollout.run` job per task and waits for the episodes.

With 2 cores, workers running the model themselves would measure this machine's compute, not the orchestration. So
the main points serve the executor from a **scripted model server with a fixed cost**: `lamarck serve-model`'s own
app (`platform/llm/server.py`) over an engine that sleeps ``--call-seconds`` per call plus ``--word-seconds`` per
generated word and answers a fixed policy (add the task's first two numbers with the calculator, then answer its
result). It burns no CPU, so the workers' scaling shows what the queue, the database and the graph allow. One more
pair of points, labelled ``real model``, serves SmolLM2-135M from a real `lamarck serve-model` process (continuous
batching across workers) on the same 2 cores: the honest number, which compute bounds.

Efficiency at N workers = (episodes/min at N) / (N x episodes/min at 1). The headline (``efficiency_4_workers``) is
over the warm generations, those after the first, with every node of the graph counted; the whole run's figure is
kept beside it. A worker process warms up before it takes a job (loads its embedding model and opens its clients:
10 s alone, 18 s with four workers loading at once on 2 cores), and a point starts its run once every worker has
logged that it is warm, as a deployment's workers are up before the runs they serve.

Run: ``python benchmarks/bench_scaleout.py [--workers 1 2 4] [--generations 3] [--batch 16] [--no-real]``.
Needs PostgreSQL (``LAMARCK_TEST_POSTGRES_URL``, default ``postgresql+psycopg://postgres@127.0.0.1:5432/test``) and
Redis (``LAMARCK_TEST_REDIS_URL``, default ``redis://127.0.0.1:6379/0``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table
from sqlalchemy import func, select, text

from lamarck.agents.orchestrator import Orchestrator
from lamarck.agents.runs import RunConfig
from lamarck.platform.container import Container
from lamarck.platform.llm.sampling import Completion, SamplingParams
from lamarck.platform.settings import DEFAULT_MODEL_VERSION, MemorySettings, Settings, WorkerSettings
from lamarck.platform.storage import migrate
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database
from lamarck.platform.storage.records import Episode, Event, LLMCall

REPO = Path(__file__).resolve().parents[1]
POSTGRES_URL = os.environ.get("LAMARCK_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("LAMARCK_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
BIN = Path(sys.executable).parent
WARM_LINE = re.compile(rb"rollout worker process \d+ warm in")  # rollout_tasks logs it once a process is warm
console = Console()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class FixedCostEngine:
    """A model with a set cost and a fixed policy, behind the real server app: what `ServingEngine` needs of `chat`."""

    def __init__(self, call_seconds: float, word_seconds: float) -> None:
        self.call_seconds, self.word_seconds = call_seconds, word_seconds
        self.calls = 0

    def versions(self) -> list[str]:
        return [DEFAULT_MODEL_VERSION]

    def chat(self, model: str, messages: Any, params: SamplingParams | None = None) -> list[Completion]:
        self.calls += 1
        last = next((str(m.get("content") or "") for m in reversed(messages) if m["role"] == "user"), "")
        if last.startswith("RESULT: "):
            reply = f"ANSWER: {last.removeprefix('RESULT: ').strip()}"
        else:
            reply = f"CALL calculator: {' + '.join(NUMBER.findall(last)[:2]) or '0'}"
        n = params.n if params is not None else 1
        words = len(reply.split())
        time.sleep(self.call_seconds + self.word_seconds * words * n)
        prompt = sum(len(str(m.get("content") or "").split()) for m in messages)
        return [
            Completion(text=reply, finish_reason="stop", prompt_tokens=prompt, completion_tokens=words, latency_s=0.0)
            for _ in range(n)
        ]


@contextmanager
def fixed_cost_server(call_seconds: float, word_seconds: float) -> Iterator[str]:
    """The scripted server in a thread of this process, with enough threads that calls from every worker overlap."""
    import uvicorn

    from lamarck.platform.llm.server import create_app

    port = free_port()
    config = uvicorn.Config(
        create_app(FixedCostEngine(call_seconds, word_seconds)),  # type: ignore[arg-type]
        host="127.0.0.1",
        port=port,
        log_level="warning",
    )
    server = uvicorn.Server(config)

    async def serve() -> None:
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=64))
        await server.serve()

    thread = threading.Thread(target=lambda: asyncio.run(serve()), daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}/v1"
    wait_for(lambda: server.started, 30, "the scripted model server")
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=10)


class Process:
    """A child in a process group of its own, logging to a file; stopped with its children."""

    def __init__(self, command: list[str], env: dict[str, str], log: Path) -> None:
        self.log = log
        with log.open("wb") as out:
            self.popen = subprocess.Popen(
                command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def alive(self) -> bool:
        return self.popen.poll() is None

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-2000:]

    def stop(self) -> None:
        if not self.alive():
            return
        os.killpg(self.popen.pid, signal.SIGTERM)
        try:
            self.popen.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(timeout=20)


def wait_for(ready: Any, timeout: float, what: str, process: Process | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if process is not None and not process.alive():
            raise SystemExit(f"{what} exited: {process.tail()}")
        if time.monotonic() > deadline:
            raise SystemExit(f"{what} was not ready within {timeout:.0f}s" + (f": {process.tail()}" if process else ""))
        time.sleep(0.2)


def answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1.0).status_code == 200
    except httpx.TransportError:
        return False


@contextmanager
def chroma_server(root: Path) -> Iterator[str]:
    port = free_port()
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
    command = [str(BIN / "chroma"), "run", "--path", str(root / "chroma"), "--host", "127.0.0.1", "--port", str(port)]
    process = Process(command, env, root / "chroma.log")
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: answers(f"{url}/api/v2/heartbeat"), 60, "the Chroma server", process)
        yield url
    finally:
        process.stop()


@contextmanager
def real_model_server(root: Path, store: Path) -> Iterator[str]:
    port = free_port()
    env = {
        **clean_env(),
        "LAMARCK_DATA_DIR": str(root / "model-server"),
        "LAMARCK_MODEL_STORE_DIR": str(store),
        "LAMARCK_ENGINE__SLOTS": "16",
    }
    process = Process([str(BIN / "lamarck"), "serve-model", "--port", str(port)], env, root / "model-server.log")
    url = f"http://127.0.0.1:{port}/v1"
    try:
        wait_for(lambda: answers(f"{url}/models"), 180, "lamarck serve-model", process)
        yield url
    finally:
        process.stop()


@contextmanager
def fresh_database() -> Iterator[Database]:
    name = f"lamarck_scaleout_{uuid.uuid4().hex[:10]}"
    admin = Database(POSTGRES_URL)
    with admin.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    db = Database(POSTGRES_URL.rsplit("/", 1)[0] + f"/{name}")
    try:
        migrate.upgrade(db)
        with db.session() as session:
            repo.register_model_version(
                session, version_id=DEFAULT_MODEL_VERSION, base=DEFAULT_MODEL_VERSION, status="promoted"
            )
        yield db
    finally:
        db.dispose()
        with admin.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def cpu_times() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine, from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle and iowait
    return sum(fields) - idle, sum(fields)


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("LAMARCK_")}


def run_point(workers: int, model_url: str, chroma_url: str, root: Path, args: argparse.Namespace) -> dict[str, Any]:
    """One deployment with ``workers`` rollout workers; a run of ``args.generations`` generations; its rates."""
    worker_settings = WorkerSettings(
        rollouts="queue", rollout_poll_seconds=0.2, broker_key_prefix=f"lamarck-scaleout-{uuid.uuid4().hex[:8]}:"
    )
    memory = MemorySettings(collection_prefix=f"s{uuid.uuid4().hex[:10]}_")
    route = {"model": f"lamarck/{DEFAULT_MODEL_VERSION}", "api_base": model_url}
    point_root = root / f"{workers}-workers-{uuid.uuid4().hex[:6]}"
    with fresh_database() as db:
        env = {
            **clean_env(),
            "LAMARCK_DATABASE_URL": db.url,
            "LAMARCK_BROKER_URL": REDIS_URL,
            "LAMARCK_CHROMA_URL": chroma_url,
            "LAMARCK_WORKERS": worker_settings.model_dump_json(),
            "LAMARCK_MEMORY": memory.model_dump_json(),
            "LAMARCK_MODELS__EXECUTOR__MODEL": route["model"],
            "LAMARCK_MODELS__EXECUTOR__API_BASE": model_url,
        }
        pool = []
        try:
            for index in range(workers):
                log = point_root / f"worker-{index}.log"
                log.parent.mkdir(parents=True, exist_ok=True)
                command = [str(BIN / "lamarck"), "worker", "--queues", "rollout", "--concurrency", "1"]
                pool.append(Process(command, {**env, "LAMARCK_DATA_DIR": str(point_root / f"w{index}")}, log))
            for index, worker in enumerate(pool):
                wait_for(lambda w=worker: WARM_LINE.search(w.log.read_bytes()), 180, f"worker {index}", worker)
            settings = Settings(
                data_dir=point_root / "orchestrator",
                database_url=db.url,
                broker_url=REDIS_URL,
                chroma_url=chroma_url,
                workers=worker_settings,
                memory=memory,
                models={role: route for role in ("curriculum", "executor", "critic", "harness_critic")},
            )
            container = Container(settings)
            try:
                orchestrator = Orchestrator(container, seed_builtins=False)
                config = RunConfig(
                    environments=["arithmetic"],
                    generations=args.generations,
                    batch_size=args.batch,
                    samples_per_task=args.samples,
                    llm_share=0.0,
                    judge=False,
                    repair=False,
                    induce_skills=False,
                    hints=["none"],
                    frontier="thompson",
                    seed=args.seed,
                )
                run_id = orchestrator.start(config, name=f"scaleout-{workers}")
                started, cpu_before = time.monotonic(), cpu_times()
                outcome = orchestrator.run(run_id)
                wall, cpu_after = time.monotonic() - started, cpu_times()
                if outcome.status != "finished":
                    raise SystemExit(f"the {workers}-worker run ended {outcome.status}: {outcome.error}")
                with db.session() as session:
                    episodes = session.scalar(select(func.count()).select_from(Episode)) or 0
                    generations = repo.get_run(session, run_id=run_id).summary.get("generations", {})
                    nodes = {int(g): s.get("node_seconds") or {} for g, s in generations.items()}
                    execute = sum(float(seconds.get("execute", 0.0)) for seconds in nodes.values())
                    # warm: generations after the first (counted from 0), once every worker has loaded its clients
                    warm_seconds = sum(sum(map(float, seconds.values())) for g, seconds in nodes.items() if g >= 1)
                    warm_episodes = session.scalar(
                        select(func.count()).select_from(Episode).where(Episode.generation >= 1)
                    )
                    latencies = sorted(session.scalars(select(LLMCall.latency_s).where(LLMCall.role == "executor")))
                    job_seconds = job_durations(session)
            finally:
                container.close()
        finally:
            for worker in pool:
                worker.stop()
    return {
        "workers": workers,
        "episodes": int(episodes),
        "wall_s": round(wall, 2),
        "execute_s": round(execute, 2),
        "episodes_per_min": episodes / wall * 60,
        "rollout_episodes_per_min": episodes / execute * 60 if execute else None,
        "warm_episodes": int(warm_episodes or 0),
        "warm_s": round(warm_seconds, 2),
        "warm_episodes_per_min": (warm_episodes or 0) / warm_seconds * 60 if warm_seconds else None,
        "job_median_s": job_seconds[len(job_seconds) // 2] if job_seconds else None,  # a worker's start to success
        "job_max_s": job_seconds[-1] if job_seconds else None,
        "executor_calls": len(latencies),
        "executor_call_median_s": latencies[len(latencies) // 2] if latencies else None,  # as the workers saw it
        # the machine's busy share during the run: near 1, the workers wait for cores, not for the model
        "cpu_busy": (cpu_after[0] - cpu_before[0]) / max(1, cpu_after[1] - cpu_before[1]),
    }


def job_durations(session: Any) -> list[float]:
    """Seconds from each rollout job's start to its success, from the job events the workers publish."""
    started: dict[str, Any] = {}
    seconds = []
    for event in session.scalars(select(Event).where(Event.type.in_(["job.started", "job.succeeded"]))):
        key = event.payload.get("job")
        if event.type == "job.started":
            started[key] = event.created_at
        elif key in started:
            seconds.append((event.created_at - started[key]).total_seconds())
    return sorted(seconds)


def with_efficiency(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each rate against the one-worker point's, per worker: 1.0 is linear."""
    one = next((p for p in points if p["workers"] == 1), None)
    for point in points:
        for rate, share in [
            ("episodes_per_min", "efficiency"),
            ("rollout_episodes_per_min", "rollout_efficiency"),
            ("warm_episodes_per_min", "warm_efficiency"),
        ]:
            if one is not None and one[rate] and point[rate]:
                point[share] = point[rate] / (point["workers"] * one[rate])
    return points


def show(title: str, points: list[dict[str, Any]]) -> None:
    table = Table(title=title)
    columns = (
        "workers",
        "episodes",
        "wall s",
        "episodes/min",
        "efficiency",
        "warm eps/min",
        "warm eff.",
        "CPU busy",
    )
    for column in columns:
        table.add_column(column, justify="right")
    for p in points:
        table.add_row(
            str(p["workers"]),
            str(p["episodes"]),
            f"{p['wall_s']:.1f}",
            f"{p['episodes_per_min']:.1f}",
            f"{p.get('efficiency', float('nan')):.2f}",
            f"{p['warm_episodes_per_min']:.1f}" if p["warm_episodes_per_min"] else "-",
            f"{p.get('warm_efficiency', float('nan')):.2f}",
            f"{p['cpu_busy']:.0%}",
        )
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--generations", type=int, default=3)
    parser.add_argument("--batch", type=int, default=16, help="tasks per generation (one rollout job each)")
    parser.add_argument("--samples", type=int, default=2)
    parser.add_argument("--call-seconds", type=float, default=2.0, help="the scripted server's cost per call")
    parser.add_argument("--word-seconds", type=float, default=0.02, help="and per generated word")
    parser.add_argument("--real-workers", type=int, nargs="*", default=[1, 2], help="worker counts on SmolLM2")
    parser.add_argument("--real-generations", type=int, default=2)
    parser.add_argument("--real-batch", type=int, default=8)
    parser.add_argument("--no-real", action="store_true", help="skip the real-model points")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--store", type=Path, default=Path(os.environ.get("LAMARCK_TEST_MODEL_STORE", REPO / ".cache" / "test-models"))
    )
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "bench_scaleout.json")
    args = parser.parse_args()
    if 1 not in args.workers:
        parser.error("--workers must include 1: efficiency is measured against one worker")

    clock = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp, chroma_server(Path(tmp)) as chroma_url:
        root = Path(tmp)
        with fixed_cost_server(args.call_seconds, args.word_seconds) as model_url:
            scripted = [run_point(n, model_url, chroma_url, root, args) for n in args.workers]
            for n, point in zip(args.workers, with_efficiency(scripted), strict=True):
                console.print(f"scripted server, {n} workers: {point['episodes_per_min']:.1f} episodes/min")
        real: list[dict[str, Any]] = []
        if not args.no_real and args.real_workers:
            real_args = argparse.Namespace(
                **{**vars(args), "generations": args.real_generations, "batch": args.real_batch}
            )
            from lamarck.platform.llm.model_store import ModelStore

            ModelStore(args.store).import_default(progress=False)
            with real_model_server(root, args.store) as model_url:
                real = with_efficiency(
                    [run_point(n, model_url, chroma_url, root, real_args) for n in args.real_workers]
                )

    show(
        f"scripted model server ({args.call_seconds} s per call + {args.word_seconds} s per word; no compute)", scripted
    )
    if real:
        show("real model: SmolLM2-135M behind one `lamarck serve-model` on the same 2 cores", real)
    four = next((p for p in scripted if p["workers"] == 4), None)
    report = {
        "summary": {
            # generations after the first: a worker's first job also loads its embedding model and clients
            "efficiency_4_workers": four.get("warm_efficiency") if four else None,
            "whole_run_efficiency_4_workers": four.get("efficiency") if four else None,
            "target_efficiency_4_workers": 0.8,
            "model": f"scripted server, {args.call_seconds} s per call + {args.word_seconds} s per generated word",
            "real_model_efficiency": {str(p["workers"]): p.get("warm_efficiency", p.get("efficiency")) for p in real},
        },
        "settings": {k: v for k, v in vars(args).items() if not isinstance(v, Path)},  # no machine paths
        "scripted": scripted,
        "real_model": real,
        "cpu_count": os.cpu_count(),
        "load_average_end": os.getloadavg()[0],
        "total_minutes": round((time.monotonic() - clock) / 60, 2),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
