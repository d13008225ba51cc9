"""Hand-offs: an agent passes the conversation to another (a triage agent to a specialist).

``handoff(billing)`` in a ReAct node's tools is offered to the model as ``transfer_to_billing``.
Calling it ends the current agent's turn and the next round is the target's, on the same
conversation, with its own system prompt, tools and output type; the hand-off is one tool
message in the history and ``active_agent`` in the state names who answers now. The agents
reachable by hand-offs from the one placed in the tree form its team: `AgentSwitch` holds
each one's round and runs the active agent's, inside the first agent's loop, so one
iteration cap bounds every round of every agent (a hand-off cycle included). The next user
turn continues with the agent that answered last.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import py_trees
from py_trees.common import Status

from jianmu.errors import HandoffError
from jianmu.nodes._node_tool import NodeTool
from jianmu.runtime.async_node import RuntimeNode
from jianmu.tools.registry import ToolSet

__all__ = ("AgentSwitch", "Handoff", "HandoffTool", "build_team", "handoff", "split_handoffs")

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
        agent: an agent built by `create_react_node` (a `ReActLoop`), or the name of one in
            the same team (to close a cycle: a specialist handing back to the triage agent
            built after it).
        name: how the tool names the agent; default the agent's name.
        description: when to hand over, for the model.

    Raises:
        TypeError: ``agent`` is neither an agent from `create_react_node` nor a name.
    """
    if isinstance(agent, str):
        if not agent.strip():
            raise TypeError("handoff() needs an agent or the name of one, got an empty name")
    elif not hasattr(agent, "own_round"):
        raise TypeError(
            f"handoff() takes an agent built by create_react_node (or its name), got "
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


class AgentSwitch(RuntimeNode, py_trees.composites.Composite):
    """Runs the round of the agent that answers now: the state's ``active_agent``, else the
    first agent. A hand-off changes it between two rounds of the loop above.

    Args:
        name: the node's name.
        members: each agent's name and round, the first agent first.
        handoffs: the hand-offs each agent may make, by agent name.
    """

    def __init__(
        self,
        name: str,
        members: Sequence[tuple[str, py_trees.behaviour.Behaviour]],
        handoffs: dict[str, list[Handoff]],
    ) -> None:
        super().__init__(name, children=[child for _agent, child in members])
        self.members = dict(members)
        self.entry = members[0][0]
        self.handoffs = handoffs

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
        yield from child.tick()
        status = child.status
        if status is not Status.RUNNING:
            self.stop(status)
        self.status = status
        yield self


def build_team(
    entry: str, entry_round: py_trees.behaviour.Behaviour, entry_handoffs: list[Handoff]
) -> AgentSwitch:
    """The switch over ``entry`` and every agent its hand-offs reach (transitively).

    Each target's round moves into the team: a hand-off target runs inside the loop of the
    agent placed in the tree, not on its own.

    Raises:
        HandoffError: two different agents of the team share a name.
    """
    members: dict[str, py_trees.behaviour.Behaviour] = {entry: entry_round}
    handoffs: dict[str, list[Handoff]] = {entry: entry_handoffs}
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
        if getattr(target, "llm_node", None) is not None:
            target.llm_node.agent_name = target.name
        members[target.name] = round_
        handoffs[target.name] = list(target.handoffs)
        queue.extend(target.handoffs)
    return AgentSwitch(f"{entry}.agents", list(members.items()), handoffs)
