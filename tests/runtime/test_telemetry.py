"""`jianmu.telemetry`: the provider built from ``telemetry`` (service name, exporter), and the
scope that lends it to runs given no provider."""

from __future__ import annotations

import io
import json
import threading
from pathlib import Path
from typing import Any

import py_trees
import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from jianmu import AppConfig, MissingExtraError, ReactiveRunner
from jianmu.config import TelemetryConfig, load_config
from jianmu.errors import ConfigError
from jianmu.telemetry import tracer_provider, tracing

pytestmark = pytest.mark.anyio


async def test_the_provider_names_the_service_and_exports_to_the_console() -> None:
    out = io.StringIO()
    config = AppConfig(telemetry={"exporter": "console", "service_name": "support-desk"})
    provider = tracer_provider(config, out=out, shutdown_on_exit=False)
    await ReactiveRunner(py_trees.behaviours.Success("Tree"), tracer_provider=provider).run()
    assert out.getvalue() == ""  # batched: written at the flush
    provider.shutdown()
    span = json.loads(out.getvalue())
    assert span["name"] == "invoke_workflow Tree"
    assert span["resource"]["attributes"]["service.name"] == "support-desk"


async def test_exporter_none_builds_a_named_provider_for_your_own_processor() -> None:
    provider = tracer_provider(TelemetryConfig(service_name="mine"), shutdown_on_exit=False)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    await ReactiveRunner(py_trees.behaviours.Success("Tree"), tracer_provider=provider).run()
    (span,) = exporter.get_finished_spans()
    assert span.resource.attributes["service.name"] == "mine"
    provider.shutdown()


async def test_the_scope_lends_its_provider_to_runs_built_inside_it_only() -> None:
    out = io.StringIO()
    with tracing(TelemetryConfig(exporter="console"), out=out) as provider:
        assert provider is not None
        inside = ReactiveRunner(py_trees.behaviours.Success("Inside"))
        await inside.run()
    outside = ReactiveRunner(py_trees.behaviours.Success("Outside"))
    await outside.run()
    assert outside.ctx.tracer is None  # no global provider here: no spans at all
    assert json.loads(out.getvalue())["name"] == "invoke_workflow Inside"  # flushed on exit


def test_the_scope_builds_nothing_when_off_or_when_nothing_is_exported() -> None:
    with tracing(TelemetryConfig(exporter="none")) as provider:
        assert provider is None
    with tracing(TelemetryConfig(exporter="console", enabled=False)) as provider:
        assert provider is None


def test_the_scope_flushes_when_its_block_fails() -> None:
    out = io.StringIO()
    with pytest.raises(RuntimeError), tracing(TelemetryConfig(exporter="console"),
                                             out=out) as provider:
        assert provider is not None
        with provider.get_tracer("t").start_as_current_span("before the failure"):
            pass
        raise RuntimeError("boom")
    assert json.loads(out.getvalue())["name"] == "before the failure"


def test_an_unknown_exporter_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "jianmu.yaml"
    path.write_text("telemetry:\n  exporter: jaeger\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"telemetry\.exporter"):
        load_config(str(path))


def test_otlp_without_the_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http", None)
    with pytest.raises(MissingExtraError, match=r"jianmu\[otlp\]"):
        tracer_provider(TelemetryConfig(exporter="otlp"))


@pytest.mark.parametrize(("configured", "environment", "named"), [
    ({}, {}, "jianmu"),
    ({}, {"OTEL_SERVICE_NAME": "from-env"}, "from-env"),
    ({}, {"OTEL_RESOURCE_ATTRIBUTES": "service.name=attrs,team=a"}, "attrs"),
    ({"service_name": "from-config"}, {"OTEL_SERVICE_NAME": "from-env"}, "from-config"),
])
def test_the_service_name_is_the_configs_else_the_environments_else_jianmu(
    monkeypatch: pytest.MonkeyPatch, configured: dict[str, str], environment: dict[str, str],
    named: str,
) -> None:
    for variable in ("OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES"):
        monkeypatch.delenv(variable, raising=False)
    for variable, value in environment.items():
        monkeypatch.setenv(variable, value)
    provider = tracer_provider(TelemetryConfig(**configured), shutdown_on_exit=False)
    assert provider.resource.attributes["service.name"] == named
    if "OTEL_RESOURCE_ATTRIBUTES" in environment:
        assert provider.resource.attributes["team"] == "a"  # the other attributes kept
    provider.shutdown()


class _Unreachable(SpanExporter):
    """A collector that never answers: each export waits until the exporter is shut down (as
    the OTLP exporter's retries do, until its timeout)."""

    def __init__(self) -> None:
        self.stopped = threading.Event()
        self.batches = 0

    def export(self, spans: Any) -> SpanExportResult:
        self.batches += 1
        self.stopped.wait(60)
        return SpanExportResult.FAILURE

    def shutdown(self) -> None:
        self.stopped.set()


def test_an_unreachable_collector_holds_the_scopes_end_no_longer_than_the_export_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The batch processor sent each queued batch in turn at shutdown, shutting the exporter
    down (which ends its retries) only after waiting 30 s for them: 2,000 spans for a
    collector that could not be reached held ``jianmu run``'s end 30 s, not the 10 s of
    ``OTEL_EXPORTER_OTLP_TIMEOUT``."""
    import jianmu.telemetry

    unreachable = _Unreachable()
    monkeypatch.setattr(jianmu.telemetry, "span_exporter", lambda *_, **__: unreachable)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "0.1")

    def run() -> None:
        with tracing(TelemetryConfig(exporter="otlp")) as provider:
            assert provider is not None
            for _ in range(2000):  # four batches
                with provider.get_tracer("t").start_as_current_span("s"):
                    pass

    done = threading.Thread(target=run, daemon=True)
    done.start()
    done.join(20)  # a bound far above the 0.1 s: the old end took 30 s
    try:
        assert not done.is_alive()
        assert unreachable.batches == 1  # the batch being sent stopped, the rest dropped
    finally:
        unreachable.stopped.set()


def test_the_export_timeout_is_read_as_the_otlp_exporter_reads_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from jianmu._bounded_export import export_timeout

    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TIMEOUT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", raising=False)
    assert export_timeout() == 10
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "3")
    assert export_timeout() == 3
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "2.5")
    assert export_timeout() == 2.5
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "soon")
    assert export_timeout() == 10
