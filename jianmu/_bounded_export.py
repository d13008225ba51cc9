"""A batch span processor whose flush at shutdown takes at most the export timeout in all.

The SDK's `BatchSpanProcessor` sends each queued batch in turn at shutdown, and the OTLP
exporter retries each for its whole timeout: 2,000 spans for a collector that cannot be
reached held a process's end 30 s. Here, past the timeout, a batch still queued is dropped and
the one being sent is stopped (its exporter shut down, which ends the OTLP exporter's retries).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

__all__ = ("BoundedBatchSpanProcessor", "export_timeout")


def export_timeout() -> float:
    """The seconds ``OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`` (else ``OTEL_EXPORTER_OTLP_TIMEOUT``)
    gives an export, as the OTLP exporter reads them: 10 when unset or not a number."""
    raw = (os.environ.get("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT")
           or os.environ.get("OTEL_EXPORTER_OTLP_TIMEOUT") or "10")
    try:
        seconds = float(raw)
    except ValueError:
        return 10.0
    return seconds if seconds >= 0 else 10.0


class _Bounded(SpanExporter):
    """``exporter``, which sends nothing more once the flush at shutdown is out of time."""

    def __init__(self, exporter: SpanExporter, seconds: float) -> None:
        self.exporter = exporter
        self.seconds = seconds
        self._deadline: float | None = None
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()
        self._shut = False

    def close_within(self) -> None:
        """Start the clock of the flush at shutdown: at its end, the exporter shuts down."""
        with self._lock:
            if self._deadline is not None or self._shut:
                return
            self._deadline = time.monotonic() + self.seconds
            self._timer = threading.Timer(self.seconds, self.shutdown)
            self._timer.daemon = True  # never what keeps the process alive
            self._timer.start()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Send ``spans``, unless the flush at shutdown is out of time."""
        deadline = self._deadline
        if self._shut or (deadline is not None and time.monotonic() >= deadline):
            return SpanExportResult.FAILURE
        return self.exporter.export(spans)

    def shutdown(self) -> None:
        """Shut the exporter down, once (called by the timer and by the processor)."""
        with self._lock:
            if self._shut:
                return
            self._shut = True
            if self._timer is not None:
                self._timer.cancel()
        self.exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """The exporter's."""
        return self.exporter.force_flush(timeout_millis)


class BoundedBatchSpanProcessor(BatchSpanProcessor):
    """A `BatchSpanProcessor` to ``exporter`` whose shutdown flushes what is queued within
    ``seconds`` (`export_timeout`) at most, then drops the rest."""

    def __init__(self, exporter: SpanExporter, seconds: float | None = None) -> None:
        self._bounded = _Bounded(exporter, export_timeout() if seconds is None else seconds)
        super().__init__(self._bounded)

    def shutdown(self) -> None:
        """Flush within the bound, then stop."""
        self._bounded.close_within()
        super().shutdown()
