"""Per-key rate limits: a token bucket per API key in this process's memory (embedded mode serves from one
process; several processes would each keep their own buckets)."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class _Bucket:
    tokens: float
    updated: float


class RateLimiter:
    """``rate`` tokens a second into a bucket of ``burst`` per key; a request takes one. ``rate`` 0 turns it off."""

    def __init__(self, rate: float, burst: int = 0, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.burst = float(burst or max(1, math.ceil(rate)))
        self.clock = clock
        self._buckets: dict[str, _Bucket] = {}
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.rate > 0

    def take(self, key: str) -> float:
        """0 if ``key`` may make a request now (a token is spent), else the seconds until it may."""
        if not self.enabled:
            return 0.0
        with self._lock:
            now = self.clock()
            bucket = self._buckets.setdefault(key, _Bucket(self.burst, now))
            bucket.tokens = min(self.burst, bucket.tokens + (now - bucket.updated) * self.rate)
            bucket.updated = now
            if bucket.tokens >= 1.0:
                bucket.tokens -= 1.0
                return 0.0
            return (1.0 - bucket.tokens) / self.rate


def retry_after(wait: float) -> str:
    """Retry-After in whole seconds, rounded up so a client that waits that long is let through."""
    return str(max(1, math.ceil(wait)))
