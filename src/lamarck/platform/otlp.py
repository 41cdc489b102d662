"""Spans to an OTLP/HTTP collector without ever stopping or flooding a run when the collector is down.

The OpenTelemetry exporter retries on its own and logs every retry and failure; a run with a dead collector would
print a warning per batch and drop each batch. ``HoldingExporter`` wraps it instead: the exporter's own log lines are
kept back, a collector that stops answering is reported once in one line, the spans it did not take are held (up to
a bound, oldest dropped first, the drop reported once) and sent with the next batch once it answers again, which is
reported in one line too. While it is down, a new batch tries at most once per ``retry_seconds`` and otherwise only
joins the held spans, so the batch processor's queue keeps draining.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import deque
from collections.abc import Sequence
from urllib.parse import urlsplit

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

log = logging.getLogger(__name__)

_EXPORTER_LOGGERS = (
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.common.http",
)
_ERRNO = re.compile(r"\[Errno -?\d+\] [^'\")\]]+")
_BATCH = 512  # spans per request, well under the exporter's request size limit
_FIX = "start the collector or fix LAMARCK_TRACING__OTLP_ENDPOINT"


def traces_url(endpoint: str) -> str:
    """The URL spans are posted to: a bare ``http://host:4318`` gets OTLP's ``/v1/traces``, a URL with a path is
    used as given."""
    if urlsplit(endpoint).path in ("", "/"):
        return endpoint.rstrip("/") + "/v1/traces"
    return endpoint


class _Reasons(logging.Filter):
    """Keeps the OpenTelemetry exporter's log records back, remembering the last reason per exporting thread."""

    def __init__(self) -> None:
        super().__init__()
        self._local = threading.local()

    def filter(self, record: logging.LogRecord) -> bool:
        error = next((arg for arg in (record.args or ()) if isinstance(arg, BaseException)), None)
        seen: str = getattr(self._local, "reason", "")
        if error is None and seen:
            return False  # a cause was already seen; "failed after retries" adds nothing to it
        text = str(error) if error is not None else record.getMessage()
        found = _ERRNO.search(text)
        self._local.reason = found.group(0).strip() if found else (text.splitlines() or [""])[0][:200]
        return False

    def take(self) -> str:
        reason: str = getattr(self._local, "reason", "") or "no answer"
        self._local.reason = ""
        return reason


_REASONS = _Reasons()


def _quiet_exporter_loggers() -> None:
    for name in _EXPORTER_LOGGERS:
        logger = logging.getLogger(name)
        if _REASONS not in logger.filters:
            logger.addFilter(_REASONS)


class HoldingExporter(SpanExporter):
    """An OTLP exporter that holds what a down collector did not take and says so once (see the module docstring)."""

    def __init__(
        self,
        endpoint: str,
        *,
        timeout_seconds: float = 5.0,
        held_spans: int = 10_000,
        retry_seconds: float = 30.0,
        inner: SpanExporter | None = None,
    ) -> None:
        _quiet_exporter_loggers()
        self.url = traces_url(endpoint)
        self._inner = inner or OTLPSpanExporter(endpoint=self.url, timeout=timeout_seconds)
        self._held: deque[ReadableSpan] = deque(maxlen=held_spans) if held_spans > 0 else deque(maxlen=0)
        self._retry_seconds = retry_seconds
        self._lock = threading.Lock()
        self._down = False
        self._next_try = 0.0
        self._dropped = 0
        self._drop_reported = False

    @property
    def held(self) -> int:
        return len(self._held)

    @property
    def down(self) -> bool:
        return self._down

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self._lock:
            self._hold(spans)
            if self._down and time.monotonic() < self._next_try:
                return SpanExportResult.SUCCESS
            self._send()
        return SpanExportResult.SUCCESS  # taken into our care: the batch processor has nothing to retry or report

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        with self._lock:
            if self._held:
                self._send()
            return not self._held

    def shutdown(self) -> None:
        with self._lock:
            if self._held:
                self._send()
            if self._held:
                log.warning(
                    "%d spans never sent: the OTLP collector at %s did not answer before shutdown", self.held, self.url
                )
                self._held.clear()
        self._inner.shutdown()

    def _hold(self, spans: Sequence[ReadableSpan]) -> None:
        room = (self._held.maxlen or 0) - len(self._held)
        overflow = max(0, len(spans) - room)
        self._held.extend(spans)
        if overflow:
            self._dropped += overflow
            if not self._drop_reported:
                self._drop_reported = True
                log.warning(
                    "OTLP collector at %s still down: holding the newest %d spans, older ones are dropped",
                    self.url,
                    self._held.maxlen,
                )

    def _send(self) -> None:
        sent = 0
        while self._held:
            batch = [self._held[index] for index in range(min(_BATCH, len(self._held)))]
            _REASONS.take()  # forget a cause left by an earlier export that recovered
            if self._inner.export(batch) is not SpanExportResult.SUCCESS:
                self._went_down(_REASONS.take())
                return
            for _ in batch:
                self._held.popleft()
            sent += len(batch)
        if self._down:
            self._down = False
            log.info("OTLP collector at %s answers again: sent %d held spans", self.url, sent)

    def _went_down(self, reason: str) -> None:
        self._next_try = time.monotonic() + self._retry_seconds
        if not self._down:
            self._down = True
            log.warning(
                "OTLP collector at %s is unreachable (%s): the run goes on, spans are held and sent when it answers"
                " (%s)",
                self.url,
                reason,
                _FIX,
            )
