"""The Celery app, its queues (``rollout``, ``train``), job leases, and the embedded worker process.

Distributed mode (``broker_url`` set): Redis broker, ``lamarck worker --queues train`` (training jobs) and
``--queues rollout`` (a generation's rollouts, when ``workers.rollouts`` is "queue") on any host.
Embedded mode (no ``broker_url``): the same Celery app over kombu's SQLAlchemy transport on a SQLite file in the
data directory, and a worker subprocess the platform starts and stops (``EmbeddedWorker``); no Redis needed.

Reliability: tasks ack late and are rejected (requeued) when their worker child dies; one job runs at a time per
worker process (prefetch 1); Redis redelivers a job only after ``visibility_timeout`` (set above the longest job).
A redelivered or duplicate job cannot run twice at once because every job body holds a lease on its idempotency
key: a Redis ``SET NX PX`` key renewed by a heartbeat thread (distributed), or an ``flock`` on a file in the data
directory (embedded; the kernel drops it when the holder dies). The job bodies are idempotent on top of that.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

import kombu.pools
from celery import Celery
from celery.signals import worker_init
from kombu.entity import Exchange, Queue

from lamarck.platform.settings import Settings, SettingsError, load_settings

log = logging.getLogger(__name__)

ROLLOUT_QUEUE = "rollout"
TRAIN_QUEUE = "train"
QUEUES = (ROLLOUT_QUEUE, TRAIN_QUEUE)
PROCESS_INIT_SECONDS = 120.0  # a rollout worker process warms up (loads the embedder) before it reports up
TASK_MODULES = ["lamarck.training.tasks", "lamarck.agents.rollout_tasks", "lamarck.api.task_queue"]


class LeaseBusy(RuntimeError):
    """Another delivery of the same job holds its lease; retry after it expires or finishes."""


class LeaseLost(RuntimeError):
    """The lease could not be renewed (expired or taken over); the job must stop without committing."""


# the app


def broker_url(settings: Settings) -> str:
    if settings.broker_url:
        return settings.broker_url
    return f"sqla+sqlite:///{(settings.data_dir / 'broker.sqlite').resolve().as_posix()}"


def configure(app: Celery, settings: Settings) -> Celery:
    workers = settings.workers
    url = broker_url(settings)
    app.conf.update(
        broker_url=url,
        result_backend=settings.broker_url if settings.broker_url else None,
        task_ignore_result=not settings.broker_url,
        broker_transport_options=_transport_options(settings),
        broker_connection_retry_on_startup=True,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        task_acks_on_failure_or_timeout=True,
        worker_prefetch_multiplier=1,
        worker_concurrency=workers.concurrency,
        task_queues=[Queue(name, Exchange(name, type="direct"), routing_key=name) for name in QUEUES],
        task_default_queue=ROLLOUT_QUEUE,
        task_default_exchange=ROLLOUT_QUEUE,
        task_default_routing_key=ROLLOUT_QUEUE,
        task_routes={"lamarck.train.*": {"queue": TRAIN_QUEUE}, "lamarck.rollout.*": {"queue": ROLLOUT_QUEUE}},
        task_serializer="json",
        accept_content=["json"],
        imports=TASK_MODULES,
        worker_hijack_root_logger=False,
        worker_proc_alive_timeout=PROCESS_INIT_SECONDS,
    )
    app.conf["lamarck_settings"] = settings
    _drop_connections(app)
    return app


def _drop_connections(app: Celery) -> None:
    """Reconfiguring (another broker or key prefix) must not keep publishing through the old pooled connections."""
    pool = getattr(app, "_pool", None)
    if pool is not None:
        with contextlib.suppress(Exception):
            pool.force_close_all()
        app._pool = None
    amqp = app.__dict__.get("amqp")
    if amqp is not None:
        amqp._producer_pool = None
    kombu.pools.reset()  # kombu caches producer pools per connection URL; the closed ones must not be handed out again


def _transport_options(settings: Settings) -> dict[str, object]:
    if not settings.broker_url:  # kombu's SQLAlchemy transport hands its options to create_engine
        return {}
    timeout = settings.workers.visibility_timeout_seconds
    options: dict[str, object] = {"visibility_timeout": timeout}
    if timeout < 600:  # short timeouts (tests, drills): scan for expired unacked messages promptly
        options.update(unacked_restore_interval=max(1, timeout // 2), unacked_restore_throttle=1)
    if settings.workers.broker_key_prefix:
        options["global_keyprefix"] = settings.workers.broker_key_prefix
    return options


def settings_of(app: Celery) -> Settings:
    settings = app.conf.get("lamarck_settings")
    if isinstance(settings, Settings):
        return settings
    settings = load_settings()
    configure(app, settings)
    return settings


def _default_app() -> Celery:
    celery = Celery("lamarck")
    try:
        configure(celery, load_settings())
    except SettingsError as exc:  # a bad lamarck.toml must not break imports; commands report it
        log.warning("celery app left unconfigured: %s", exc)
    return celery


app = _default_app()


# leases


class _RedisLease:
    _RENEW = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0"
    _RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"

    def __init__(self, url: str, key: str, ttl_ms: int) -> None:
        import redis

        self.client = redis.Redis.from_url(url, socket_timeout=10)
        self.key, self.ttl_ms, self.token = f"lamarck:lease:{key}", ttl_ms, uuid.uuid4().hex

    def acquire(self) -> bool:
        return bool(self.client.set(self.key, self.token, nx=True, px=self.ttl_ms))

    def renew(self) -> bool:
        return bool(self.client.eval(self._RENEW, 1, self.key, self.token, self.ttl_ms))

    def release(self) -> None:
        with contextlib.suppress(Exception):
            self.client.eval(self._RELEASE, 1, self.key, self.token)
        self.client.close()


class _FileLease:
    def __init__(self, directory: Path, key: str) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in key)[:200]
        self.path = directory / f"{safe}.lock"
        self._fh: TextIO | None = None

    def acquire(self) -> bool:
        fh = self.path.open("a")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.close()
            return False
        self._fh = fh
        return True

    def renew(self) -> bool:
        return self._fh is not None

    def release(self) -> None:
        if self._fh is not None:
            fcntl.flock(self._fh, fcntl.LOCK_UN)
            self._fh.close()
            self._fh = None


def lease_held(settings: Settings, key: str) -> bool:
    """Whether some delivery of the job ``key`` holds its lease now (is running, or died less than a TTL ago)."""
    if settings.broker_url and settings.broker_url.startswith(("redis://", "rediss://")):
        probe = _RedisLease(settings.broker_url, key, 1)
        try:
            return bool(probe.client.exists(probe.key))
        finally:
            probe.client.close()
    held = _FileLease(settings.data_dir / "leases", key)
    if not held.acquire():
        return True
    held.release()
    return False


@contextlib.contextmanager
def lease(settings: Settings, key: str) -> Iterator[threading.Event]:
    """Hold the job lease for ``key`` or raise LeaseBusy; yields an Event that is set if the lease is lost."""
    workers = settings.workers
    if settings.broker_url and settings.broker_url.startswith(("redis://", "rediss://")):
        held: _RedisLease | _FileLease = _RedisLease(settings.broker_url, key, int(workers.lease_ttl_seconds * 1000))
    else:
        held = _FileLease(settings.data_dir / "leases", key)
    if not held.acquire():
        raise LeaseBusy(f"job {key} is running elsewhere")
    lost, stop = threading.Event(), threading.Event()

    def heartbeat() -> None:
        while not stop.wait(workers.heartbeat_seconds):
            try:
                ok = held.renew()
            except Exception as exc:  # a broker blip: keep trying until the TTL would run out
                log.warning("lease %s: renewal failed: %s", key, exc)
                continue
            if not ok:
                log.error("lease %s: lost (expired or taken over)", key)
                lost.set()
                return

    thread = threading.Thread(target=heartbeat, name=f"lease-{key}", daemon=True)
    thread.start()
    try:
        yield lost
    finally:
        stop.set()
        thread.join(timeout=5)
        held.release()


def worker_torch_threads(settings: Settings) -> int | None:
    """Threads per worker process for torch: an embedded worker shares the machine with the serving engine, so it
    takes half the cores (oversubscribed OpenMP threads stall each other); a dedicated worker host takes all."""
    if settings.workers.torch_threads is not None:
        return settings.workers.torch_threads
    if settings.mode == "embedded":
        return max(1, (os.cpu_count() or 2) // 2)
    return None


# the embedded worker


def worker_command(queues: list[str], concurrency: int, name: str, loglevel: str = "INFO") -> list[str]:
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "lamarck.platform.workers:app",
        "worker",
        "--queues",
        ",".join(queues),
        "--concurrency",
        str(concurrency),
        "--pool",
        "prefork",
        "--hostname",
        name,
        "--loglevel",
        loglevel,
        "--without-gossip",
        "--without-mingle",
    ]


def settings_env(settings: Settings) -> dict[str, str]:
    """Environment that makes a child process load the same settings."""
    env = dict(os.environ)
    env["LAMARCK_DATA_DIR"] = str(settings.data_dir.resolve())
    env["LAMARCK_DATABASE_URL"] = str(settings.database_url)
    env["LAMARCK_MODEL_STORE_DIR"] = str(settings.models_dir.resolve())
    if settings.broker_url:
        env["LAMARCK_BROKER_URL"] = settings.broker_url
    env["LAMARCK_WORKERS"] = settings.workers.model_dump_json()
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # sharing cores with the serving engine: sleep at barriers, never spin
    env["LAMARCK_TRAINING"] = settings.training.model_dump_json()
    return env


PARENT_ENV = "EMBEDDED_WORKER_PARENT_PID"  # not LAMARCK_-prefixed: Settings forbids unknown LAMARCK_ variables
PARENT_POLL_SECONDS = 1.0


def _leave_with_the_parent(**_: object) -> None:
    """An embedded worker shuts down (warm: the running job finishes) when the process that started it dies, even by
    SIGKILL, when no ``stop`` can run; otherwise it would keep a core and the broker's queue after its owner is gone.
    A polled parent id, not prctl's parent-death signal, which follows the starting thread rather than the process."""
    parent = os.environ.get(PARENT_ENV)
    if not parent or not parent.isdigit():
        return

    def watch() -> None:
        while os.getppid() == int(parent):
            time.sleep(PARENT_POLL_SECONDS)
        log.warning("the process that started this embedded worker (%s) is gone: shutting down", parent)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="embedded-worker-parent-watch", daemon=True).start()


worker_init.connect(_leave_with_the_parent)


class EmbeddedWorker:
    """A Celery worker subprocess owned by this process: ``start`` waits until it is ready, ``stop`` ends it."""

    def __init__(self, settings: Settings, queues: list[str] | None = None, *, ready_timeout: float = 120.0) -> None:
        self.settings = settings
        self.queues = queues or list(settings.workers.queues)
        self.ready_timeout = ready_timeout
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = settings.data_dir / "logs" / f"worker-{os.getpid()}.log"

    def start(self) -> EmbeddedWorker:
        if self.process is not None and self.process.poll() is None:
            return self
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        name = f"lamarck-embedded-{os.getpid()}-{uuid.uuid4().hex[:6]}@%h"
        command = worker_command(self.queues, self.settings.workers.concurrency, name)
        started = time.monotonic()
        with self.log_path.open("ab") as out:
            self.process = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**settings_env(self.settings), PARENT_ENV: str(os.getpid())},
                start_new_session=True,
            )
        self._wait_ready(started)
        log.info(
            "embedded worker %s ready in %.1fs (queues %s)",
            self.process.pid,
            time.monotonic() - started,
            ",".join(self.queues),
        )
        return self

    def _wait_ready(self, started: float) -> None:
        assert self.process is not None
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        while time.monotonic() - started < self.ready_timeout:
            if self.process.poll() is not None:
                raise RuntimeError(f"embedded worker exited with status {self.process.returncode}: see {self.log_path}")
            with self.log_path.open("rb") as fh:
                fh.seek(max(0, offset - 4096))
                if b" ready." in fh.read():
                    return
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"embedded worker not ready after {self.ready_timeout:.0f}s: see {self.log_path}")

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def children(self) -> list[int]:
        """Pool process ids (for tests that kill a child mid-job)."""
        if self.process is None:
            return []
        path = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        with contextlib.suppress(OSError):
            return [int(p) for p in path.read_text().split()]
        return []

    def stop(self, timeout: float = 30.0) -> None:
        """Warm shutdown (SIGTERM: finish the running job), then SIGKILL the whole process group."""
        if self.process is None or self.process.poll() is not None:
            self.process = None
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
        self.process = None

    def __enter__(self) -> EmbeddedWorker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_embedded_worker(settings: Settings) -> EmbeddedWorker | None:
    """What ``lamarck run`` calls at start-up: in embedded mode (and unless disabled) a worker on both queues.

    The caller stops it (``worker.stop()``) on shutdown; in distributed mode workers run elsewhere and this is None.
    """
    if settings.mode != "embedded" or not settings.workers.embedded_autostart:
        return None
    configure(app, settings)
    return EmbeddedWorker(settings).start()
