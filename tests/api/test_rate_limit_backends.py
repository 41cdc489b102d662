"""The rate limiter's two implementations against one conformance suite (in memory, and the real Redis), Redis's
budget shared by several API processes, the composition root's choice between them, and Redis failing: at startup
one line naming the setting, mid-request a 503 in the API's one error shape."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from lamarck.api.app import create_app
from lamarck.api.keys import Scope, create_key
from lamarck.api.rate_limit import (
    MemoryRateLimiter,
    RateLimiter,
    RateLimiterUnavailable,
    RedisRateLimiter,
    open_rate_limiter,
)
from lamarck.platform.container import Container
from lamarck.platform.settings import ApiSettings, Settings, SettingsError, WorkerSettings
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database

from .conftest import Model, error_of

MakeLimiter = Callable[[float, int], RateLimiter]
UNREACHABLE = "redis://:hunter2@127.0.0.1:1/0"  # nothing listens on port 1


def _prefix() -> str:
    return f"lamarck-test:{uuid.uuid4().hex}:"


def _drop(url: str, prefix: str) -> None:
    client = redis.Redis.from_url(url)
    try:
        keys = list(client.scan_iter(match=prefix + "*"))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


@pytest.fixture
def redis_prefix(redis_url: str) -> Iterator[str]:
    prefix = _prefix()
    yield prefix
    _drop(redis_url, prefix)


@pytest.fixture(params=["memory", "redis"])
def make_limiter(request: pytest.FixtureRequest) -> Iterator[MakeLimiter]:
    made: list[RateLimiter] = []

    if request.param == "memory":

        def make(rate: float, burst: int) -> RateLimiter:
            made.append(MemoryRateLimiter(rate, burst))
            return made[-1]

    else:
        url: str = request.getfixturevalue("redis_url")
        prefix: str = request.getfixturevalue("redis_prefix")

        def make(rate: float, burst: int) -> RateLimiter:
            made.append(RedisRateLimiter.connect(url, rate, burst, prefix=prefix))
            return made[-1]

    yield make
    for limiter in made:
        limiter.close()


# the conformance suite, for each implementation


def test_a_burst_is_allowed_up_to_capacity_then_refused_with_a_positive_retry_after(make_limiter: MakeLimiter) -> None:
    limiter = make_limiter(0.5, 3)
    assert [limiter.take("k").allowed for _ in range(3)] == [True, True, True]
    refused = limiter.take("k")
    assert not refused.allowed and 1.5 < refused.retry_after <= 2.0  # one token at 0.5 a second
    again = limiter.take("k")  # a refused request takes nothing, and the wait only shrinks
    assert not again.allowed and 0 < again.retry_after <= refused.retry_after


def test_tokens_refill_over_time_up_to_the_burst_only(make_limiter: MakeLimiter) -> None:
    limiter = make_limiter(20.0, 2)
    assert [limiter.take("k").allowed for _ in range(3)] == [True, True, False]
    waited = limiter.take("k").retry_after
    assert 0 < waited <= 0.05
    time.sleep(waited + 0.02)
    assert limiter.take("k").allowed
    time.sleep(0.3)  # six tokens' worth of time, but the bucket holds two
    assert [limiter.take("k").allowed for _ in range(3)] == [True, True, False]


def test_keys_have_budgets_of_their_own(make_limiter: MakeLimiter) -> None:
    limiter = make_limiter(0.5, 1)
    assert limiter.take("a").allowed and not limiter.take("a").allowed
    assert limiter.take("b").allowed and not limiter.take("b").allowed
    assert not limiter.take("a").allowed


def test_rate_zero_is_off_and_the_burst_defaults_to_a_second(make_limiter: MakeLimiter) -> None:
    off = make_limiter(0.0, 0)
    assert not off.enabled and all(off.take("k").allowed for _ in range(50))
    assert make_limiter(3.0, 0).burst == 3.0 and make_limiter(0.2, 0).burst == 1.0


# Redis: one budget for every process, kept atomically, keys that expire


def test_two_limiters_on_redis_share_one_budget(redis_url: str, redis_prefix: str) -> None:
    """Two API processes each hold a limiter (their own connections); a key's burst is spent once between them,
    exactly, even with requests racing on both."""
    first = RedisRateLimiter.connect(redis_url, 0.001, 40, prefix=redis_prefix)
    second = RedisRateLimiter.connect(redis_url, 0.001, 40, prefix=redis_prefix)
    try:
        assert first.take("k").allowed and second.take("k").allowed
        allowed = [0]
        lock = threading.Lock()

        def hammer(limiter: RedisRateLimiter) -> None:
            for _ in range(25):
                if limiter.take("k").allowed:
                    with lock:
                        allowed[0] += 1

        threads = [threading.Thread(target=hammer, args=(limiter,)) for limiter in (first, second) * 4]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert allowed[0] == 38  # 200 tries for the 38 tokens left
        assert not first.take("k").allowed and not second.take("k").allowed
        assert first.take("other").allowed
    finally:
        first.close()
        second.close()


def test_an_idle_key_expires_in_redis(redis_url: str, redis_prefix: str) -> None:
    limiter = RedisRateLimiter.connect(redis_url, 2.0, 4, prefix=redis_prefix)
    try:
        limiter.take("k")
        ttl_ms = limiter.client.pttl(redis_prefix + "k")
        assert 0 < ttl_ms <= 3000  # the bucket is full again after 4 / 2 s; the key goes a second later
    finally:
        limiter.close()
    glacial = RedisRateLimiter.connect(redis_url, 1e-12, 1, prefix=redis_prefix)
    try:  # a refill time past any TTL Redis accepts: the key still expires, in a month
        assert glacial.take("g").allowed and not glacial.take("g").allowed
        assert 0 < glacial.client.pttl(redis_prefix + "g") <= 31 * 24 * 3600 * 1000
    finally:
        glacial.close()


# the composition root's choice


def test_embedded_mode_limits_in_memory(tmp_path: Path) -> None:
    limiter = open_rate_limiter(Settings(data_dir=tmp_path, api=ApiSettings(rate_limit_per_second=1)))
    assert isinstance(limiter, MemoryRateLimiter) and limiter.enabled


def test_distributed_mode_limits_in_the_brokers_redis(tmp_path: Path, redis_url: str, redis_prefix: str) -> None:
    settings = Settings(
        data_dir=tmp_path,
        broker_url=redis_url,
        workers=WorkerSettings(broker_key_prefix=redis_prefix),
        api=ApiSettings(rate_limit_per_second=1, rate_limit_burst=2),
    )
    limiter = open_rate_limiter(settings)
    try:
        assert isinstance(limiter, RedisRateLimiter) and limiter.prefix.startswith(redis_prefix)
        assert limiter.take("k").allowed and limiter.burst == 2.0
    finally:
        limiter.close()


def test_a_redis_url_setting_picks_redis_in_embedded_mode(tmp_path: Path, redis_url: str) -> None:
    settings = Settings(data_dir=tmp_path, api=ApiSettings(rate_limit_per_second=1, rate_limit_redis_url=redis_url))
    assert settings.mode == "embedded"
    limiter = open_rate_limiter(settings)
    try:
        assert isinstance(limiter, RedisRateLimiter)
    finally:
        limiter.close()


def test_no_limit_needs_no_redis(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, broker_url=UNREACHABLE, api=ApiSettings(rate_limit_redis_url=UNREACHABLE))
    assert not open_rate_limiter(settings).enabled


def test_distributed_without_a_redis_names_the_setting(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, broker_url="amqp://127.0.0.1//", api=ApiSettings(rate_limit_per_second=1))
    with pytest.raises(SettingsError, match="LAMARCK_API__RATE_LIMIT_REDIS_URL"):
        open_rate_limiter(settings)


def test_a_redis_url_must_be_one() -> None:
    with pytest.raises(ValueError, match="Redis URL"):
        ApiSettings(rate_limit_redis_url="http://127.0.0.1:6379")


# over HTTP


def _with_api(container: Container, **updates: Any) -> Container:
    workers = updates.pop("workers", None)
    api = container.settings.api.model_copy(update=updates)
    changes: dict[str, Any] = {"api": api}
    if workers is not None:
        changes["workers"] = workers
    container.settings = container.settings.model_copy(update=changes)
    return container


@pytest.fixture
def redis_container(container: Container, redis_url: str, redis_prefix: str) -> Container:
    return _with_api(
        container,
        rate_limit_per_second=0.5,
        rate_limit_burst=2,
        rate_limit_redis_url=redis_url,
        workers=WorkerSettings(broker_key_prefix=redis_prefix),
    )


def _app(container: Container) -> TestClient:
    return TestClient(create_app(container, launcher=lambda run_id, action: 0))


def test_the_api_answers_429_with_retry_after_from_redis_shared_by_two_servers(redis_container: Container) -> None:
    read = {"Authorization": f"Bearer {create_key(redis_container.db, [Scope.READ])[1]}"}
    other = {"Authorization": f"Bearer {create_key(redis_container.db, [Scope.READ])[1]}"}
    with _app(redis_container) as one, _app(redis_container) as two:
        assert isinstance(one.app.state.rate_limiter, RedisRateLimiter)  # type: ignore[attr-defined]
        assert one.get("/v1/info", headers=read).status_code == 200
        assert two.get("/v1/info", headers=read).status_code == 200  # the other server spends the same budget
        for client in (one, two):
            refused = client.get("/v1/info", headers=read)
            assert "requests a second" in error_of(refused, 429)
            assert refused.json()["error"]["code"] == "rate_limited"
            assert 1 <= int(refused.headers["Retry-After"]) <= 2  # one token at 0.5 a second
        assert two.get("/v1/info", headers=other).status_code == 200
        assert one.get("/v1/health").status_code == 200


def test_redis_down_at_startup_is_one_line_naming_the_setting(container: Container) -> None:
    _with_api(container, rate_limit_per_second=1, rate_limit_redis_url=UNREACHABLE)
    with pytest.raises(SettingsError) as raised:
        create_app(container, launcher=lambda run_id, action: 0)
    message = str(raised.value)
    assert "\n" not in message and "LAMARCK_API__RATE_LIMIT_REDIS_URL" in message and "127.0.0.1:1" in message
    assert "hunter2" not in message


def test_lamarck_serve_refuses_to_start_without_its_redis(
    db: Database, model: Model, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import uvicorn

    from lamarck.cli import app

    started: list[object] = []
    monkeypatch.setattr(uvicorn, "run", lambda *args, **kwargs: started.append(args))
    monkeypatch.setenv("LAMARCK_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("LAMARCK_DATABASE_URL", db.url)
    monkeypatch.setenv("LAMARCK_API__RATE_LIMIT_PER_SECOND", "5")
    monkeypatch.setenv("LAMARCK_API__RATE_LIMIT_REDIS_URL", UNREACHABLE)
    result = CliRunner().invoke(app, ["serve"])
    assert result.exit_code == 2 and not started, result.output
    last = result.output.strip().splitlines()[-1]
    assert last.startswith("error:") and "LAMARCK_API__RATE_LIMIT_REDIS_URL" in last and "hunter2" not in result.output


def test_redis_lost_mid_request_is_503_in_the_error_shape_and_nothing_runs(redis_container: Container) -> None:
    runs = {"Authorization": f"Bearer {create_key(redis_container.db, [Scope.RUNS, Scope.READ])[1]}"}
    with _app(redis_container) as client:
        limiter: RedisRateLimiter = client.app.state.rate_limiter  # type: ignore[attr-defined]
        assert client.get("/v1/runs", headers=runs).status_code == 200
        limiter.client.connection_pool.disconnect()  # Redis goes away: from now on every connection is refused
        limiter.client.connection_pool = redis.ConnectionPool.from_url(UNREACHABLE, socket_connect_timeout=1)
        with pytest.raises(RateLimiterUnavailable):
            limiter.take("k")
        body = {"name": "x", "config": {"environments": ["arithmetic"]}}
        response = client.post("/v1/runs", json=body, headers=runs)
        assert "retry shortly" in error_of(response, 503)
        assert response.json()["error"]["code"] == "service_unavailable" and response.headers["Retry-After"] == "1"
        assert "6379" not in response.text and "127.0.0.1" not in response.text
    with redis_container.db.session() as session:
        assert repo.list_runs(session) == []
