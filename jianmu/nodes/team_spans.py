"""The spans of a team's agents (`jianmu.nodes.handoffs.AgentSwitch`): an ``invoke_agent {name}``
span around the rounds of each agent a hand-off made the one answering, inside the span of
the agent placed in the tree (the loop's own, `jianmu.nodes.react.agent_span`), which holds
the whole conversation."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from py_trees.common import Status

from jianmu.runtime.events import GEN_AI_AGENT_NAME, GEN_AI_OPERATION_NAME, failed

if TYPE_CHECKING:
    from jianmu.runtime.context import RunContext

__all__ = ("answering_span", "end_team_spans")


@contextmanager
def answering_span(team: Any, members: Mapping[str, Any], entry: str, name: str,
                   ctx: RunContext) -> Iterator[None]:
    """Make the span of ``name``, the agent whose round ticks, current while it ticks (started
    at its first round in this run; none for ``entry``, whose span is the loop's). The span of
    an agent that no longer answers ends here: a hand-off came between two rounds.

    ``team`` keys the spans in the run's ``open_spans``, so a run that stops (a suspension)
    ends them with its own span.
    """
    for other in members:
        if other != name:
            left = ctx.open_spans.pop((team, other), None)
            if left is not None:
                left.end()
    if name == entry:
        yield
        return
    from opentelemetry import context, trace

    current = ctx.open_spans.get((team, name))
    if current is None:
        assert ctx.tracer is not None
        current = ctx.open_spans[(team, name)] = ctx.tracer.start_span(
            f"invoke_agent {name}",
            attributes={GEN_AI_OPERATION_NAME: "invoke_agent", GEN_AI_AGENT_NAME: name})
    token = context.attach(trace.set_span_in_context(current))
    try:
        yield
    finally:
        context.detach(token)


def end_team_spans(team: Any, members: Mapping[str, Any], ctx: RunContext,
                   status: Status) -> None:
    """End the span of the agent answering as the loop stops: an error when it failed."""
    for name in members:
        left = ctx.open_spans.pop((team, name), None)
        if left is not None:
            if status is Status.FAILURE:
                failed(left, "failure")
            left.end()
