"""`GuardedToolNode`: a `ToolNode` built for a BT skill, always guarded (BT skills use it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jianmu.nodes.tool_node import ToolNode

if TYPE_CHECKING:
    from jianmu.constraints import Constraints
    from jianmu.tools.base import Tool

__all__ = ("GuardedToolNode",)


class GuardedToolNode(ToolNode):
    """A `ToolNode` that always asks the guard, with approval ids scoped to a BT skill run.

    The policy comes from the run's constraints merged with this node's layer (in a BT skill,
    the SKILL.md layer). ``deny`` makes the node FAILURE with the reason; ``confirm`` suspends
    the run with an approval request and the node stays RUNNING until a person decides, then
    runs the tool (approved) or fails (rejected).

    The request id is derived from the skill run's ``approval_scope`` (the skill and its
    inputs; by default the namespace), the node's place in the skill's tree, the tool and the
    arguments. So a run restored from a checkpoint, or the same skill called again with the
    same inputs after an approval, finds the decision instead of asking again.
    ``SkillTreeLoader`` gives every ``ToolNode`` of a BT skill the same guard and scope.

    Args:
        name: The node's name.
        tool: The tool to run.
        input_key: The state key holding the arguments (``None``: no arguments).
        output_key: The state key the output is written to (``None``: not written).
        execute: ``False`` skips the tool and succeeds.
        constraints: This node's layer of constraints (tighten only).
        approval_scope: Prefix of the approval ids (``""``: the namespace).
    """

    def __init__(
        self, name: str, tool: Tool, *, input_key: str | None = "input",
        output_key: str | None = "output", execute: bool = True,
        constraints: Constraints | None = None, approval_scope: str = "",
    ) -> None:
        super().__init__(
            name, tool, input_key, output_key, execute,
            constraints=constraints, guarded=True, approval_scope=approval_scope,
        )
