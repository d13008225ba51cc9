"""The tracer provider Jianmu builds from ``telemetry`` (`jianmu.config.TelemetryConfig`):
``service.name`` from ``service_name``, spans sent by a batch processor to ``exporter``.

`tracer_provider` builds one for a Python application to pass to
``ReactiveRunner(tracer_provider=...)`` (or to set as the global provider). `tracing` is a scope
for a process that runs trees, as the CLI's commands do: runs built inside it with no provider
of their own, and no global one set by the application, use its provider; on the way out,
however the scope ends (an error, Ctrl-C), the spans are flushed and the provider shut down.

Jianmu never sets the global provider: an application (or ``opentelemetry-instrument``) that
set one keeps it, and its runs go there.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TextIO

from jianmu.config import AppConfig, TelemetryConfig, default_config
from jianmu.errors import MissingExtraError
from jianmu.runtime.events import use_provider

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

__all__ = ("OTLP_PACKAGE", "global_provider_set", "span_exporter", "tracer_provider", "tracing")

OTLP_PACKAGE = "opentelemetry-exporter-otlp-proto-http"
"""What ``exporter: otlp`` needs (the ``otlp`` extra)."""


def _section(config: AppConfig | TelemetryConfig | None) -> TelemetryConfig:
    if config is None:
        config = default_config()
    return config.telemetry if isinstance(config, AppConfig) else config


def span_exporter(exporter: str, *, out: TextIO | None = None) -> SpanExporter | None:
    """The exporter named ``exporter``: None for ``none``; ``console`` writes each span as
    JSON to ``out`` (default standard error: standard output is the command's, and the MCP
    channel of ``jianmu mcp serve``); ``otlp`` reads its endpoint, headers, timeout and
    compression from the ``OTEL_EXPORTER_OTLP_*`` variables.

    Raises:
        MissingExtraError: ``otlp`` without the ``otlp`` extra installed.
        ValueError: an exporter Jianmu does not know.
    """
    if exporter == "none":
        return None
    if exporter == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter(out=out if out is not None else sys.stderr)
    if exporter == "otlp":
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                OTLPSpanExporter,
            )
        except ImportError as exc:
            raise MissingExtraError(OTLP_PACKAGE, "otlp") from exc
        return OTLPSpanExporter()
    raise ValueError(f"telemetry.exporter {exporter!r}: use none, console or otlp")


def tracer_provider(
    config: AppConfig | TelemetryConfig | None = None, *, out: TextIO | None = None,
    shutdown_on_exit: bool = True,
) -> TracerProvider:
    """An SDK provider whose resource's ``service.name`` is ``telemetry.service_name`` when the
    config sets it, else ``OTEL_SERVICE_NAME`` (or ``OTEL_RESOURCE_ATTRIBUTES``'s) when set,
    else ``jianmu`` (the other attributes of ``OTEL_RESOURCE_ATTRIBUTES`` kept), sending spans
    through a
    batch processor to ``telemetry.exporter`` (`span_exporter`; ``none``: no processor,
    add your own). Call its ``shutdown()`` when done, or leave it to the interpreter's exit
    (``shutdown_on_exit``).

    Raises:
        MissingExtraError: ``exporter: otlp`` without the ``otlp`` extra installed.
    """
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider

    from jianmu._bounded_export import BoundedBatchSpanProcessor

    telemetry = _section(config)
    exporter = span_exporter(telemetry.exporter, out=out)  # a missing extra: before any thread
    resource = Resource.create()  # with OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
    named = not str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service")
    if "service_name" in telemetry.model_fields_set or not named:  # the config's, else the
        # environment's, else the default ("jianmu")
        resource = resource.merge(Resource({SERVICE_NAME: telemetry.service_name}))
    provider = TracerProvider(resource=resource, shutdown_on_exit=shutdown_on_exit)
    if exporter is not None:
        # its flush at shutdown bounded by the export timeout in all, not per batch
        provider.add_span_processor(BoundedBatchSpanProcessor(exporter))
    return provider


def global_provider_set() -> bool:
    """Whether the application configured the global tracer provider."""
    from opentelemetry import trace

    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


@contextmanager
def tracing(
    config: AppConfig | TelemetryConfig | None = None, *, out: TextIO | None = None,
) -> Iterator[TracerProvider | None]:
    """While inside, runs built with no provider and no global one use the provider of
    ``config``'s ``telemetry`` (`tracer_provider`); on the way out its spans are flushed and it
    is shut down. Yields None, and builds nothing, when ``telemetry.enabled`` is false, the
    exporter is ``none``, or the application set a global provider (which its runs use).

    Raises:
        MissingExtraError: ``exporter: otlp`` without the ``otlp`` extra installed.
    """
    telemetry = _section(config)
    if not telemetry.enabled or telemetry.exporter == "none" or global_provider_set():
        yield None
        return
    # shut down here, not at the interpreter's exit: a process may open many scopes
    provider = tracer_provider(telemetry, out=out, shutdown_on_exit=False)
    previous = use_provider(provider)
    try:
        yield provider
    finally:
        use_provider(previous)
        provider.shutdown()  # exports what the batch still holds
