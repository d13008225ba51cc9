"""The ``execute_tool`` span of a tool call (`ToolExecutor`, `ToolNode`): its GenAI attributes,
and its outcome recorded without the call's content unless the config opts in."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from jianmu.runtime.events import (
    GEN_AI_OPERATION_NAME,
    GEN_AI_TOOL_CALL_ARGUMENTS,
    GEN_AI_TOOL_CALL_ID,
    GEN_AI_TOOL_CALL_RESULT,
    GEN_AI_TOOL_NAME,
    GEN_AI_TOOL_TYPE,
    clipped,
    failed,
    span,
)

if TYPE_CHECKING:
    from opentelemetry.trace import Span

    from jianmu.guard.checkers import Decision
    from jianmu.runtime.context import RunContext
    from jianmu.tools.base import Tool
    from jianmu.tools.calls import ToolCall, ToolResult

__all__ = (
    "call_span_attributes", "denied_span", "finish_span", "handoff_span", "tool_span_attributes",
)


def tool_span_attributes(tool_name: str, call_id: str | None, tool: Tool) -> dict[str, Any]:
    """The GenAI attributes of an ``execute_tool`` span."""
    attributes: dict[str, Any] = {
        GEN_AI_OPERATION_NAME: "execute_tool",
        GEN_AI_TOOL_NAME: tool_name,
        GEN_AI_TOOL_TYPE: "extension" if tool.remote else "function",
    }
    if call_id:
        attributes[GEN_AI_TOOL_CALL_ID] = call_id
    return attributes


def call_span_attributes(
    call: ToolCall, tool: Tool, decision: Decision, ctx: RunContext
) -> dict[str, Any]:
    """An agent's call's span attributes: the tool's and the guard's decision. The decision's
    reason only with capture_content: it may quote the call (a path, a command) or what a
    person wrote when they decided."""
    attributes = {**tool_span_attributes(tool.name, call.id, tool), **decision.span_attributes()}
    if not ctx.config.telemetry.capture_content:
        attributes.pop("jianmu.guard.reason", None)
    elif "jianmu.guard.reason" in attributes:
        attributes["jianmu.guard.reason"] = clipped(attributes["jianmu.guard.reason"])
    return attributes


def denied_span(
    call: ToolCall, tool: Tool, decision: Decision, ctx: RunContext, error_type: str = "denied"
) -> None:
    """The span of a call that never ran: the guard denied it (an error of the kind
    ``denied``), or its arguments did not fit the tool (``ToolInputError``)."""
    if ctx.tracer is None:
        return
    attributes = call_span_attributes(call, tool, decision, ctx)
    with span(ctx.tracer, f"execute_tool {tool.name}", attributes) as current:
        failed(current, error_type)


def finish_span(
    span: Span | None, result: ToolResult, arguments: Any, ctx: RunContext | None,
    error_type: str | None = None,
) -> None:
    """Record a call's outcome on its span (content only when the config opts in).

    A failure's ``error.type`` is ``error_type`` (the class of the exception the tool raised,
    ``withheld``), else ``_OTHER``: never the words of the error, which may quote a secret.
    """
    if span is None:
        return
    if not result.ok:
        failed(span, error_type or "_OTHER")
    span.set_attribute("jianmu.tool.ok", result.ok)
    if ctx is not None and ctx.config.telemetry.capture_content:
        span.set_attribute(GEN_AI_TOOL_CALL_ARGUMENTS, clipped(json.dumps(arguments, default=str)))
        span.set_attribute(GEN_AI_TOOL_CALL_RESULT, clipped(result.text))


def handoff_span(ctx: RunContext, handoff: dict[str, Any], said: str) -> None:
    """The ``execute_tool transfer_to_<agent>`` span of a hand-off the model made (the fields of
    its ``agent.handoff`` event), in the span of the agent that handed over; the agent taking
    over is ``jianmu.handoff.target``. Its result, ``said`` (the tool message), only with
    capture_content, as any call's."""
    if ctx.tracer is None:
        return
    attributes: dict[str, Any] = {
        GEN_AI_OPERATION_NAME: "execute_tool",
        GEN_AI_TOOL_NAME: handoff["tool"],
        GEN_AI_TOOL_TYPE: "function",
        "jianmu.handoff.target": handoff["target"],
        "jianmu.tool.ok": True,
    }
    if handoff.get("call_id"):
        attributes[GEN_AI_TOOL_CALL_ID] = handoff["call_id"]
    if handoff.get("source"):
        attributes["jianmu.handoff.source"] = handoff["source"]
    if ctx.config.telemetry.capture_content:
        attributes[GEN_AI_TOOL_CALL_ARGUMENTS] = "{}"
        attributes[GEN_AI_TOOL_CALL_RESULT] = clipped(said)
    with span(ctx.tracer, f"execute_tool {handoff['tool']}", attributes):
        pass
