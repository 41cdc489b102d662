"""Per-key rate limits: a token bucket per API key, ``rate`` tokens a second into a bucket of ``burst``; a request
takes one. Two implementations of one ``RateLimiter`` protocol: ``MemoryRateLimiter`` keeps the buckets in this
process (embedded mode serves from one process), ``RedisRateLimiter`` keeps them in Redis, checked and taken in one
Lua script on Redis's own clock, so any number of API processes share each key's budget. ``open_rate_limiter``
picks one from the settings."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Protocol

from lamarck.platform.settings import Settings, SettingsError

if TYPE_CHECKING:
    import redis

log = logging.getLogger(__name__)

REDIS_URL_SETTING = "LAMARCK_API__RATE_LIMIT_REDIS_URL"


class Decision(NamedTuple):
    """Whether the request may go ahead (a token was taken), and if not, the seconds until one will be there."""

    allowed: bool
    retry_after: float = 0.0


ALLOWED = Decision(True, 0.0)


class RateLimiterUnavailable(RuntimeError):
    """The limiter's store could not be asked (Redis down mid-request); the message is one line and says what to fix."""


class RateLimiter(Protocol):
    rate: float
    burst: float
    blocking: bool  # whether ``take`` waits on I/O, so the API calls it from its thread pool

    @property
    def enabled(self) -> bool: ...

    def take(self, key: str) -> Decision:
        """Check and take one token of ``key``'s bucket at once."""
        ...

    def close(self) -> None: ...


def _burst(rate: float, burst: int) -> float:
    return float(burst or max(1, math.ceil(rate)))


@dataclass
class _Bucket:
    tokens: float
    updated: float


class MemoryRateLimiter:
    """Buckets in this process's memory; ``rate`` 0 turns it off. Several processes would each keep their own."""

    blocking = False

    def __init__(self, rate: float, burst: int = 0, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.burst = _burst(rate, burst)
        self.clock = clock
        self._buckets: dict[str, _Bucket] = {}
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.rate > 0

    def take(self, key: str) -> Decision:
        if not self.enabled:
            return ALLOWED
        with self._lock:
            now = self.clock()
            bucket = self._buckets.setdefault(key, _Bucket(self.burst, now))
            bucket.tokens = min(self.burst, bucket.tokens + max(0.0, now - bucket.updated) * self.rate)
            bucket.updated = now
            if bucket.tokens >= 1.0:
                bucket.tokens -= 1.0
                return ALLOWED
            return Decision(False, (1.0 - bucket.tokens) / self.rate)

    def close(self) -> None:
        self._buckets.clear()


# KEYS[1]: the bucket (a hash of tokens and the time they were counted); ARGV: rate, burst, idle TTL in ms.
# Redis's TIME, not the callers' clocks, so API processes on machines whose clocks differ still agree. The key expires
# once the bucket would have refilled anyway, so idle keys leave nothing behind and nothing changes for them.
_TAKE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(state[1])
local ts = tonumber(state[2])
if tokens == nil or ts == nil then
  tokens = burst
  ts = now
end
local elapsed = now - ts
if elapsed < 0 then elapsed = 0 end
tokens = math.min(burst, tokens + elapsed * rate)
local allowed = 0
local wait = 0
if tokens >= 1 then
  tokens = tokens - 1
  allowed = 1
else
  wait = (1 - tokens) / rate
end
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens), 'ts', string.format('%.17g', now))
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {allowed, string.format('%.17g', wait)}
"""


_MAX_IDLE_MS = 30 * 24 * 3600 * 1000


class RedisRateLimiter:
    """Buckets in Redis under ``prefix``; each check-and-take is one atomic script, so processes share a budget."""

    blocking = True

    def __init__(
        self,
        client: redis.Redis,
        rate: float,
        burst: int = 0,
        *,
        prefix: str = "lamarck:rate:",
        setting: str = REDIS_URL_SETTING,
    ) -> None:
        self.client = client
        self.rate = rate
        self.burst = _burst(rate, burst)
        self.prefix = prefix
        self.setting = setting
        refill_ms = math.ceil(self.burst / rate * 1000) if rate > 0 else 0
        self.idle_ms = min(refill_ms, _MAX_IDLE_MS) + 1000  # capped so absurdly slow rates stay a valid PEXPIRE
        self._take = client.register_script(_TAKE)

    @classmethod
    def connect(
        cls, url: str, rate: float, burst: int = 0, *, prefix: str = "lamarck:rate:", setting: str = REDIS_URL_SETTING
    ) -> RedisRateLimiter:
        """A limiter on the Redis at ``url``, pinged first: an unreachable one is a SettingsError naming ``setting``."""
        import redis

        client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
        try:
            client.ping()
        except redis.RedisError as exc:
            client.close()
            raise SettingsError(
                f"per-key rate limits need Redis, but {_safe(url)} does not answer ({_first_line(exc)}): "
                f"start it, or point {setting} at one that runs"
            ) from None
        return cls(client, rate, burst, prefix=prefix, setting=setting)

    @property
    def enabled(self) -> bool:
        return self.rate > 0

    def take(self, key: str) -> Decision:
        if not self.enabled:
            return ALLOWED
        import redis

        try:
            allowed, wait = self._take(keys=[self.prefix + key], args=[repr(self.rate), repr(self.burst), self.idle_ms])
        except redis.RedisError as exc:
            log.error(
                "rate limiter: Redis does not answer (%s); check it runs, or fix %s", _first_line(exc), self.setting
            )
            raise RateLimiterUnavailable(
                "the server cannot check this key's rate limit right now (its Redis does not answer): retry shortly"
            ) from None
        return ALLOWED if int(allowed) == 1 else Decision(False, float(wait))

    def close(self) -> None:
        self.client.close()


def open_rate_limiter(settings: Settings) -> RateLimiter:
    """Redis when ``api.rate_limit_redis_url`` names one, or when the platform runs distributed (its Redis broker);
    memory otherwise. Off (``rate_limit_per_second`` 0) needs neither. A Redis that does not answer fails here, at
    startup, with one line naming the setting: API processes never fall back to budgets of their own."""
    api = settings.api
    rate, burst = api.rate_limit_per_second, api.rate_limit_burst
    if rate <= 0:
        return MemoryRateLimiter(0.0)
    url = api.rate_limit_redis_url
    if url is None and settings.mode == "distributed":
        broker = settings.broker_url or ""
        if not broker.startswith(("redis://", "rediss://", "unix://")):
            raise SettingsError(
                "per-key rate limits in distributed mode need a Redis that every API process shares, and the broker "
                f"is not one: set {REDIS_URL_SETTING} (or [api] rate_limit_redis_url)"
            )
        url = broker
    if url is None:
        return MemoryRateLimiter(rate, burst)
    prefix = f"{settings.workers.broker_key_prefix}lamarck:rate:"
    return RedisRateLimiter.connect(url, rate, burst, prefix=prefix)


def retry_after(wait: float) -> str:
    """Retry-After in whole seconds, rounded up so a client that waits that long is let through."""
    return str(max(1, math.ceil(wait)))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _safe(url: str) -> str:
    """``url`` without its password, if it has one."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username or ''}:***@{parts.hostname or ''}" + (f":{parts.port}" if parts.port else "")
    return parts._replace(netloc=netloc).geturl()
