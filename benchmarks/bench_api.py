"""REST API on loopback: list-endpoint latency and throughput, and server-sent event delivery lag.

``lamarck serve`` runs in a subprocess over a fresh SQLite data directory seeded with runs and model versions; the
clients are asyncio tasks in this process, each on a keep-alive connection of its own (``KeepAlive``; the event
streams use httpx). For 50 and 200 concurrent clients, two phases over the list
endpoints (``/v1/runs``, ``/v1/models``, ``/v1/events``):

- paced: the clients together send ``--rate`` requests a second (the issue's target: p99 under 50 ms at 200/s);
- saturated: each client sends its next request as soon as the last one answered (the most reads a second).

Then ``--subscribers`` event streams are open while another process publishes ``--events-per-second`` events to the
bus, as a run would; an event's lag is the time from its stored ``created_at`` to its arrival at a subscriber
(target: p95 under 1 s). Each phase is bounded by ``--requests`` and ``--seconds``.

Prints a table and writes JSON whose ``summary`` holds ``read_p99_ms`` (paced, 200 clients), ``reads_per_s``
(saturated, 200 clients) and ``sse_lag_p95_s``.

    python benchmarks/bench_api.py [--requests 4000] [--seconds 30] [--sse-seconds 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import socket
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table

from lamarck.api.keys import Scope, create_key
from lamarck.platform.cpu import cpu_summary
from lamarck.platform.event_types import JobProgress
from lamarck.platform.events import EventBus
from lamarck.platform.storage import migrate
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database

REPO = Path(__file__).resolve().parents[1]
LIST_PATHS = ("/v1/runs?limit=50", "/v1/models?limit=50", "/v1/events?limit=50")
TARGETS = {"read_p99_ms_below": 50.0, "at_requests_per_s": 200.0, "sse_lag_p95_s_below": 1.0}


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered)) - 1))] if ordered else float("nan")


def seed(db: Database, *, runs: int, models: int, events: int) -> str:
    """Rows for the lists to page through; the read key."""
    migrate.upgrade(db)
    with db.session() as session:
        for index in range(runs):
            repo.create_run(session, config={"environments": ["arithmetic"], "generations": 3}, name=f"bench-{index}")
        repo.register_model_version(session, version_id="smollm2-135m", base="smollm2-135m", status="promoted")
        for index in range(models):
            repo.register_model_version(
                session, version_id=f"bench-{index}", base="smollm2-135m", parent_id="smollm2-135m"
            )
    bus = EventBus(db)
    for index in range(events):
        bus.publish(JobProgress(job="seed", step=index, pid=os.getpid()))
    return create_key(db, [Scope.READ], name="bench")[1]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_server(data_dir: Path, port: int, poll_seconds: float) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "LAMARCK_DATA_DIR": str(data_dir),
        "LAMARCK_API__SSE_POLL_SECONDS": str(poll_seconds),
        "LAMARCK_API__RATE_LIMIT_PER_SECOND": "0",
    }
    command = [sys.executable, "-c", "from lamarck.cli import app; app()", "serve", "--port", str(port)]
    server = subprocess.Popen(command, env=env, cwd=data_dir, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(
                f"lamarck serve exited: {server.stderr.read().decode()[-2000:] if server.stderr else ''}"
            )
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v1/health", timeout=1).status_code == 200:
                return server
        except httpx.TransportError:
            time.sleep(0.2)
    server.kill()
    raise RuntimeError("lamarck serve did not answer /v1/health within 60 s")


class KeepAlive:
    """One HTTP/1.1 keep-alive connection that sends GETs and reads Content-Length bodies: the load generator.

    httpx's connection pool costs more CPU per request than the server does once many connections are open (measured
    here against ``/v1/health`` with 200 clients: 319 requests a second through one ``httpx.AsyncClient``, 1,110
    through these connections), and the clients share the server's 2 cores, so with httpx the benchmark would
    measure its own client."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, headers: str) -> None:
        self.reader, self.writer, self.headers = reader, writer, headers

    @classmethod
    async def open(cls, host: str, port: int, key: str) -> KeepAlive:
        reader, writer = await asyncio.open_connection(host, port)
        return cls(reader, writer, f"Host: {host}:{port}\r\nAuthorization: Bearer {key}\r\n")

    async def get(self, path: str) -> int:
        """The response's status code (the body is read and dropped)."""
        self.writer.write(f"GET {path} HTTP/1.1\r\n{self.headers}\r\n".encode())
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        length = next((int(line.split(b":", 1)[1]) for line in lines if line.lower().startswith(b"content-length:")), 0)
        await self.reader.readexactly(length)
        return int(lines[0].split()[1])

    def close(self) -> None:
        self.writer.close()


async def reads(
    host: str, port: int, key: str, *, clients: int, requests: int, seconds: float, rate: float | None
) -> dict[str, float]:
    """``requests`` GETs over the list paths from ``clients`` keep-alive connections, paced to ``rate`` a second in
    all (None: as fast as answers come), stopped after ``seconds``."""
    latencies: list[float] = []
    errors = 0
    sent = 0
    connections = [await KeepAlive.open(host, port, key) for _ in range(clients)]
    started = time.perf_counter()
    deadline = started + seconds

    async def client(index: int, connection: KeepAlive) -> None:
        nonlocal errors, sent
        interval = None if rate is None else clients / rate
        next_at = started + (0.0 if interval is None else interval * index / clients)
        while sent < requests and time.perf_counter() < deadline:
            if interval is not None:
                await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
                next_at += interval
                if sent >= requests or time.perf_counter() >= deadline:
                    return
            sent += 1
            begun = time.perf_counter()
            try:
                ok = await connection.get(LIST_PATHS[sent % len(LIST_PATHS)]) == 200
            except (OSError, asyncio.IncompleteReadError, ValueError):
                ok = False
            latencies.append((time.perf_counter() - begun) * 1000)
            errors += not ok
            if not ok:
                return

    try:
        await asyncio.gather(*(client(index, c) for index, c in enumerate(connections)))
    finally:
        for connection in connections:
            connection.close()
    elapsed = time.perf_counter() - started
    return {
        "clients": clients,
        "offered_per_s": rate or 0.0,
        "requests": len(latencies),
        "errors": errors,
        "p50_ms": percentile(latencies, 0.50),
        "p99_ms": percentile(latencies, 0.99),
        "reads_per_s": len(latencies) / elapsed,
    }


def publish(url: str, per_second: float, seconds: float, start_at: float) -> None:
    """The writer a run would be: events on the bus at a steady rate, from a process of its own."""
    bus = EventBus(Database(url))
    time.sleep(max(0.0, start_at - time.time()))
    for step in range(int(per_second * seconds)):
        time.sleep(max(0.0, start_at + step / per_second - time.time()))
        bus.publish(JobProgress(job="bench", step=step, pid=os.getpid()))


async def stream_lags(
    base: str, key: str, db_url: str, *, subscribers: int, per_second: float, seconds: float
) -> dict[str, float]:
    lags: list[float] = []
    received = [0] * subscribers
    headers = {"Authorization": f"Bearer {key}"}
    after = repo_last_id(db_url)
    open_for = seconds + 6.0  # the streams open 2.5 s before the first event and stay 3.5 s after the last
    end = time.monotonic() + open_for
    url = f"/v1/events/stream?types=job.progress&after={after}&timeout={open_for}"

    async def subscriber(index: int, http: httpx.AsyncClient) -> None:
        async with http.stream("GET", url, headers=headers) as response:
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    now = time.time()
                    event = json.loads(line[5:])
                    lags.append(now - datetime.fromisoformat(event["created_at"]).timestamp())
                    received[index] += 1
                if time.monotonic() > end:
                    return

    limits = httpx.Limits(max_connections=subscribers + 4)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=httpx.Timeout(30, read=None)) as http:
        tasks = [asyncio.create_task(subscriber(index, http)) for index in range(subscribers)]
        await asyncio.sleep(2.0)  # every stream open before the first event
        writer = multiprocessing.get_context("spawn").Process(
            target=publish, args=(db_url, per_second, seconds, time.time() + 0.5)
        )
        writer.start()
        await asyncio.gather(*tasks, return_exceptions=True)
        writer.join(timeout=30)
    published = int(per_second * seconds)
    return {
        "subscribers": subscribers,
        "events_per_s": per_second,
        "published": published,
        "delivered": sum(received),
        "expected": published * subscribers,
        "lag_p50_s": percentile(lags, 0.50),
        "lag_p95_s": percentile(lags, 0.95),
        "lag_max_s": max(lags) if lags else float("nan"),
    }


def repo_last_id(db_url: str) -> int:
    with Database(db_url).session() as session:
        return repo.last_safe_event_id(session)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[50, 200])
    parser.add_argument("--rate", type=float, default=200.0, help="Requests a second in the paced phase.")
    parser.add_argument("--requests", type=int, default=4000, help="At most this many requests per phase.")
    parser.add_argument("--seconds", type=float, default=30.0, help="At most this long per read phase.")
    parser.add_argument("--subscribers", type=int, default=200)
    parser.add_argument("--events-per-second", type=float, default=50.0)
    parser.add_argument("--sse-seconds", type=float, default=20.0)
    parser.add_argument("--sse-poll", type=float, default=0.5, help="api.sse_poll_seconds of the server.")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "bench_api.json")
    args = parser.parse_args()

    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-api-") as tmp:
        data_dir = Path(tmp)
        db_url = f"sqlite:///{data_dir / 'lamarck.db'}"
        key = seed(Database(db_url), runs=200, models=200, events=200)
        port = free_port()
        server = start_server(data_dir, port, args.sse_poll)
        base = f"http://127.0.0.1:{port}"
        try:
            for path in LIST_PATHS * 10:  # the server's first requests open connections and fill caches
                httpx.get(base + path, headers={"Authorization": f"Bearer {key}"}, timeout=30).raise_for_status()
            read_rows = []
            for clients in args.clients:
                for rate in (args.rate, None):
                    row = asyncio.run(
                        reads(
                            "127.0.0.1",
                            port,
                            key,
                            clients=clients,
                            requests=args.requests,
                            seconds=args.seconds,
                            rate=rate,
                        )
                    )
                    read_rows.append(row)
            sse = asyncio.run(
                stream_lags(
                    base,
                    key,
                    db_url,
                    subscribers=args.subscribers,
                    per_second=args.events_per_second,
                    seconds=args.sse_seconds,
                )
            )
        finally:
            server.terminate()
            server.wait(timeout=30)
    load_after = os.getloadavg()[0]

    console = Console(width=120)
    table = Table(title=f"REST API on loopback, SQLite (load average {load_before:.1f} -> {load_after:.1f})")
    for column in ("clients", "phase", "requests", "errors", "p50 ms", "p99 ms", "reads/s"):
        table.add_column(column, justify="left" if column == "phase" else "right")
    for row in read_rows:
        phase = f"paced {row['offered_per_s']:g}/s" if row["offered_per_s"] else "saturated"
        table.add_row(
            str(row["clients"]),
            phase,
            str(row["requests"]),
            str(row["errors"]),
            f"{row['p50_ms']:.1f}",
            f"{row['p99_ms']:.1f}",
            f"{row['reads_per_s']:.0f}",
        )
    console.print(table)
    console.print(
        f"SSE: {sse['subscribers']} subscribers, {sse['events_per_s']:g} events/s: delivered {sse['delivered']} of "
        f"{sse['expected']}, lag p50 {sse['lag_p50_s']:.3f} s, p95 {sse['lag_p95_s']:.3f} s, "
        f"max {sse['lag_max_s']:.3f} s"
    )

    biggest = max(args.clients)
    paced = next(r for r in read_rows if r["clients"] == biggest and r["offered_per_s"])
    saturated = next(r for r in read_rows if r["clients"] == biggest and not r["offered_per_s"])
    result: dict[str, Any] = {
        "benchmark": "api",
        "summary": {
            "read_p99_ms": paced["p99_ms"],
            "reads_per_s": saturated["reads_per_s"],
            "sse_lag_p95_s": sse["lag_p95_s"],
        },
        "targets": TARGETS,
        "reads": read_rows,
        "sse": sse,
        "settings": vars(args) | {"out": str(args.out)},
        "cpu": cpu_summary(),
        "cpus": os.cpu_count(),
        "load_average": [load_before, load_after],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
