"""OpenTelemetry in one place: the GenAI attribute names, the tracer, and span helpers.

Jianmu never sets the global tracer provider: a run uses the provider passed to it, else the
global API's (a no-op until the application configures one).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer, TracerProvider

__all__ = (
    "ERROR_TYPE",
    "GEN_AI_AGENT_NAME",
    "GEN_AI_OPERATION_NAME",
    "GEN_AI_REQUEST_MODEL",
    "GEN_AI_TOOL_CALL_ARGUMENTS",
    "GEN_AI_TOOL_CALL_ID",
    "GEN_AI_TOOL_CALL_RESULT",
    "GEN_AI_TOOL_NAME",
    "GEN_AI_TOOL_TYPE",
    "GEN_AI_USAGE_INPUT_TOKENS",
    "GEN_AI_USAGE_OUTPUT_TOKENS",
    "JIANMU_GUARD_DECISION",
    "JIANMU_RUN_ID",
    "get_tracer",
    "span",
)

GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_AGENT_NAME = "gen_ai.agent.name"
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID = "gen_ai.tool.call.id"
GEN_AI_TOOL_TYPE = "gen_ai.tool.type"
GEN_AI_TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT = "gen_ai.tool.call.result"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
ERROR_TYPE = "error.type"
JIANMU_RUN_ID = "jianmu.run.id"
JIANMU_GUARD_DECISION = "jianmu.guard.decision"


def get_tracer(
    tracer_provider: TracerProvider | None = None, *, enabled: bool = True
) -> Tracer | None:
    """The tracer for Jianmu's spans: from ``tracer_provider``, else the global API's.

    Returns None (no spans, no cost) when tracing is disabled, or when no provider is passed
    and the application has not configured a global one before the run was built.
    """
    if not enabled:
        return None
    if tracer_provider is not None:
        return tracer_provider.get_tracer("jianmu")
    from opentelemetry import trace

    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return None
    return trace.get_tracer("jianmu")


@contextmanager
def span(
    tracer: Tracer | None, name: str, attributes: Mapping[str, Any] | None = None
) -> Iterator[Span | None]:
    """Open a span (or nothing, when ``tracer`` is None); record exceptions and ``error.type``."""
    if tracer is None:
        yield None
        return
    from opentelemetry.trace import Status, StatusCode

    with tracer.start_as_current_span(
        name, attributes=dict(attributes or {}), record_exception=False,
        set_status_on_exception=False,
    ) as current:
        try:
            yield current
        except BaseException as exc:
            current.set_attribute(ERROR_TYPE, type(exc).__name__)
            current.set_status(Status(StatusCode.ERROR, str(exc)))
            raise
