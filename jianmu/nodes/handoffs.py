"""Hand-offs (a triage agent to a specialist): ``handoff(billing)`` in a ReAct node's tools is
offered to the model as ``transfer_to_billing``. Calling it ends the current agent's turn and
the next round is the target's, on the same conversation, with its own system prompt, tools and
output type; the hand-off is one tool message in the history and ``active_agent`` in the state
names who answers now. The agents reachable by hand-offs from the one placed in the tree form
its team: `AgentSwitch` holds each one's round and runs the active agent's, inside the first
agent's loop, so one iteration cap bounds every round of every agent (a hand-off cycle
included). The next user turn continues with the agent that answered last.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import py_trees
from py_trees.common import Status

from jianmu.constraints import Constraints, MemberConstraints
from jianmu.errors import HandoffError
from jianmu.nodes.executor_config import ToolExecutorConfig
from jianmu.nodes.output import NodeTool
from jianmu.nodes.team_spans import answering_span, end_team_spans
from jianmu.runtime.async_node import RuntimeNode
from jianmu.runtime.context import RunContext
from jianmu.tools.calls import name_key
from jianmu.tools.registry import ToolSet

__all__ = (
    "AgentSwitch",
    "Handoff",
    "HandoffTool",
    "build_team",
    "handoff",
    "refuse_shared_tools",
    "split_handoffs",
)


_UNSAFE = re.compile(r"[^a-z0-9_]+")


def _slug(name: str) -> str:
    return _UNSAFE.sub("_", name.lower()).strip("_") or "agent"


class HandoffTool(NodeTool):
    """The tool a model calls to hand the conversation over (``transfer_to_<agent>``)."""

    purpose = "hands the conversation to another agent"

    def __init__(self, name: str, description: str) -> None:
        super().__init__(name, description, {
            "type": "object", "properties": {}, "additionalProperties": False,
        })


@dataclass(eq=False)
class Handoff:
    """A hand-off to ``target`` (an agent from `create_react_node`, or such an agent's name),
    offered to the model as ``tool``. Made by `handoff`."""

    target: Any
    """The agent (a `ReActLoop`), or its name for an agent built later (a cycle)."""
    name: str
    """How the tool names the target: ``transfer_to_<name>``."""
    description: str
    """What the model reads about the target."""
    tool: HandoffTool = field(init=False)
    """The tool offered to the model."""

    def __post_init__(self) -> None:
        tool_name = f"transfer_to_{_slug(self.name)}"[:64]
        said = f"Hand the conversation over to {self.name}" + (
            f": {self.description}" if self.description else "."
        )
        self.tool = HandoffTool(tool_name, said)

    @property
    def agent_name(self) -> str:
        """The name of the agent that takes over (the `ReActLoop`'s name)."""
        return self.target if isinstance(self.target, str) else str(self.target.name)


def handoff(agent: Any, *, name: str | None = None, description: str | None = None) -> Handoff:
    """A hand-off to ``agent``, for a ReAct node's tools: the model sees ``transfer_to_<name>``.

    Args:
        agent: an agent built by `create_react_node` (a `ReActLoop`) or a `jianmu.Agent`
            (its ``as_node()``), or the name of one in the same team (to close a cycle: a
            specialist handing back to the triage agent built after it).
        name: how the tool names the agent; default the agent's name.
        description: when to hand over, for the model.

    Raises:
        TypeError: ``agent`` is neither an agent from `create_react_node` nor a name.
    """
    if not isinstance(agent, str) and not hasattr(agent, "own_round") \
            and callable(getattr(agent, "as_node", None)):
        agent = agent.as_node()  # a `jianmu.Agent`: its tree
    if isinstance(agent, str):
        if not agent.strip():
            raise TypeError("handoff() needs an agent or the name of one, got an empty name")
    elif not hasattr(agent, "own_round"):
        raise TypeError(
            f"handoff() takes an agent built by create_react_node, an Agent or its name, got "
            f"{type(agent).__name__}; to call any other subtree, use agent_tool()"
        )
    label = name or (agent if isinstance(agent, str) else agent.name)
    return Handoff(agent, str(label), description or "")


def split_handoffs(tools: Any) -> tuple[Any, list[Handoff]]:
    """``tools`` without the hand-offs given among them, and the hand-offs."""
    if tools is None or isinstance(tools, ToolSet):
        return tools, []
    items = list(tools)
    found = [t for t in items if isinstance(t, Handoff)]
    if not found:
        return tools, []
    return [t for t in items if not isinstance(t, Handoff)], found


def refuse_shared_tools(handoffs: Sequence[Handoff]) -> None:
    """Refuse two hand-offs offered under one tool name (``Billing`` and ``billing``, or two
    names made of letters a tool name cannot hold): the model's call would reach one of the
    two agents, whichever came last, though it read the other's description.

    Raises:
        HandoffError: naming both agents and the tool.
    """
    seen: dict[str | None, Handoff] = {}
    for given in handoffs:
        key = name_key(given.tool.name)
        first = seen.setdefault(key, given)
        if first is not given:
            raise HandoffError(
                f"the hand-offs to {first.name!r} and {given.name!r} are both offered as "
                f"{given.tool.name!r}; give one a tool name of its own: "
                "handoff(agent, name=...)"
            )


class AgentSwitch(RuntimeNode, py_trees.composites.Composite):
    """Runs the round of the agent that answers now: the state's ``active_agent``, else the
    first agent. A hand-off changes it between two rounds of the loop above.

    Args:
        name: the node's name.
        members: each agent's name and round, the first agent first.
        handoffs: the hand-offs each agent may make, by agent name.
        loops: the loops the hand-off targets were built with, by agent name: their own
            ``max_iterations`` and budget hold while they answer (`answering_limits`).
    """

    def __init__(
        self,
        name: str,
        members: Sequence[tuple[str, py_trees.behaviour.Behaviour]],
        handoffs: dict[str, list[Handoff]],
        loops: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(name, children=[child for _agent, child in members])
        self.members = dict(members)
        self.entry = members[0][0]
        self.handoffs = handoffs
        self.loops = dict(loops or {})

    def bind(self, state_manager: Any, ctx: Any, path: str) -> None:
        """Attach the run, after checking that every hand-off names an agent of the team.

        Raises:
            HandoffError: a hand-off names an agent the team does not have.
        """
        for agent, given in self.handoffs.items():
            for h in given:
                if h.agent_name not in self.members:
                    team = ", ".join(sorted(self.members))
                    raise HandoffError(
                        f"agent {agent!r} hands off to {h.agent_name!r}, which is not in its team "
                        f"({team}); pass that agent itself to handoff(), or build it with "
                        f"create_react_node(..., name={h.agent_name!r}) and reach it by "
                        "hand-offs from the first agent"
                    )
        super().bind(state_manager, ctx, path)

    def active(self) -> str:
        """The agent that answers now."""
        name = self.state.get("active_agent")
        return name if name in self.members else self.entry

    def answering_limits(self) -> tuple[str, int, int | None] | None:
        """The agent answering now, its own ``max_iterations`` and token budget (its layer,
        the first agent's and the run's, merged); None while the first agent answers, whose
        limits are the loop's own."""
        name = self.active()
        loop = self.loops.get(name)
        if loop is None:
            return None
        node = loop.llm_node
        merged = (node.effective_constraints if node is not None
                  else Constraints.merge(self.ctx.constraints, loop.constraints))
        iterations = min(v for v in (loop.max_iterations, merged.max_iterations) if v)
        return name, iterations, merged.guard.budget.total_tokens

    def tick(self) -> Iterator[py_trees.behaviour.Behaviour]:
        """Tick the round of the agent that answers now and mirror its status.

        The agent is chosen when a round starts: a hand-off written during a round (by its
        model's turn) takes effect with the next one, so every round ends for the loop above
        to count.
        """
        current = self.current_child
        if self.status is Status.RUNNING and current is not None:
            child = current
        else:
            if self.state.get("active_agent") is None:
                self.state.replace({"active_agent": self.entry})  # who answers, from the start
            child = self.members[self.active()]
        self.current_child = child
        ctx = getattr(self, "ctx", None)
        if ctx is None or ctx.tracer is None:
            yield from child.tick()
        else:  # the answering agent's span is the parent of what its round starts
            yield from self._traced_tick(ctx, child)
        status = child.status
        if status is not Status.RUNNING:
            self.stop(status)
        self.status = status
        yield self

    def _traced_tick(self, ctx: RunContext,
                     child: py_trees.behaviour.Behaviour) -> Iterator[py_trees.behaviour.Behaviour]:
        """Tick ``child``, the round of the agent answering now, inside that agent's span."""
        name = next(n for n, member in self.members.items() if member is child)
        with answering_span(self, self.members, self.entry, name, ctx):
            yield from child.tick()

    def end_spans(self, status: Status) -> None:
        """End the answering agent's span as the loop above stops (`end_team_spans`)."""
        ctx = getattr(self, "ctx", None)
        if ctx is not None:
            end_team_spans(self, self.members, ctx, status)


def build_team(
    entry: str, entry_round: py_trees.behaviour.Behaviour, entry_handoffs: list[Handoff],
    constraints: Constraints | None = None,
    guardrails: dict[str, tuple[Any, ...]] | None = None,
    interactive: bool = True,
) -> AgentSwitch:
    """The switch over ``entry`` and every agent its hand-offs reach (transitively).

    Each target's round moves into the team: a hand-off target runs inside the loop of the
    agent placed in the tree, not on its own, and under that agent's ``constraints`` and
    ``guardrails`` (by kind) too (a hand-off must not be a way around the first agent's guard
    or its guardrails); where nobody is asked for the first agent's calls (``interactive``
    false), nobody is asked for any agent's of the team.

    Raises:
        HandoffError: two different agents of the team share a name.
    """
    members: dict[str, py_trees.behaviour.Behaviour] = {entry: entry_round}
    handoffs: dict[str, list[Handoff]] = {entry: entry_handoffs}
    loops: dict[str, Any] = {}
    queue = list(entry_handoffs)
    while queue:
        target = queue.pop(0).target
        if isinstance(target, str):
            continue  # checked when the team is bound to a run
        found = members.get(target.name)
        if found is not None:
            if found is not target.own_round:
                raise HandoffError(
                    f"two agents of one team are named {target.name!r}; give each a name of "
                    "its own (create_react_node(..., name=...))"
                )
            continue
        round_ = target.own_round
        round_.parent = None  # it joins this team's switch
        _tighten(round_, constraints)
        if guardrails:
            _hold_guardrails(round_, guardrails)
        if not interactive:
            _unattended(round_)
        if getattr(target, "llm_node", None) is not None:
            target.llm_node.agent_name = target.name
        members[target.name] = round_
        handoffs[target.name] = list(target.handoffs)
        loops[target.name] = target  # its own limits hold while it answers
        queue.extend(target.handoffs)
    passes: list[Any] = [None]  # one conversation: a message one agent's guardrails passed
    for round_ in members.values():  # is not checked again by the next (`GuardedTurn._passes`)
        for node in round_.iterate():
            if isinstance(getattr(node, "_passes", None), list):
                node._passes = passes  # type: ignore[attr-defined]
    return AgentSwitch(f"{entry}.agents", list(members.items()), handoffs, loops)


def _tighten(node: py_trees.behaviour.Behaviour, outer: Constraints | None) -> None:
    """Hold ``node`` and the nodes below it to ``outer`` (the first agent's layer) and the
    run's constraints: their own layers are a member's, which may not loosen those."""
    if isinstance(node, RuntimeNode):
        own = node.constraints
        node.constraints = outer if own is None else MemberConstraints.of(own, outer)
    for child in node.children:
        _tighten(child, outer)


def _unattended(node: py_trees.behaviour.Behaviour) -> None:
    """Have nobody asked for the calls of ``node``'s executors (`ToolExecutorConfig`)."""
    for part in node.iterate():
        config = getattr(part, "config", None)
        if isinstance(config, ToolExecutorConfig) and config.interactive:
            part.config = config.model_copy(update={"interactive": False})  # type: ignore[attr-defined]


def _hold_guardrails(
    node: py_trees.behaviour.Behaviour, guardrails: dict[str, tuple[Any, ...]]
) -> None:
    """Run ``guardrails`` (by kind) in ``node``'s agent nodes too, after their own."""
    for kind, attribute in (("input", "input_guardrails"), ("output", "output_guardrails"),
                            ("tool_output", "tool_output_guardrails")):
        if guardrails.get(kind) and hasattr(node, attribute):
            own = getattr(node, attribute)
            setattr(node, attribute, tuple(dict.fromkeys([*own, *guardrails[kind]])))
    for child in node.children:
        _hold_guardrails(child, guardrails)
