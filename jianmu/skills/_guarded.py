"""`GuardedToolNode`: a `ToolNode` whose call passes the guard first (BT skills use it)."""

from __future__ import annotations

import hashlib
import json

from jianmu.nodes.tool_node import ToolNode

__all__ = ("GuardedToolNode",)


class GuardedToolNode(ToolNode):
    """A `ToolNode` that always asks the guard, with approval ids scoped to a BT skill run.

    The policy comes from the run's constraints merged with this node's layer (in a BT skill,
    the SKILL.md layer). ``deny`` makes the node FAILURE with the reason; ``confirm`` suspends
    the run with an approval request and the node stays RUNNING until a person decides, then
    runs the tool (approved) or fails (rejected).

    The request id is derived from the skill run's ``approval_scope`` (the skill and its
    inputs), the node's place in the skill's tree, the tool and the arguments. So a run
    restored from a checkpoint, or the same skill called again with the same inputs after an
    approval, finds the decision instead of asking again. ``SkillTreeLoader`` turns every plain
    ``ToolNode`` of a BT skill into this class.
    """

    @property  # type: ignore[override]
    def guarded(self) -> bool:
        """Always True: a skill's tree cannot switch its own guard off."""
        return True

    @guarded.setter
    def guarded(self, value: bool) -> None:
        pass  # ToolNode.__init__ sets it; a data descriptor keeps it True anyway

    approval_scope: str | None = None
    """Prefix of the approval ids; set by the skill loader (default: the namespace)."""
    tree_position: str | None = None
    """The node's place in the skill's tree (e.g. ``0/2``); default: its path in the run."""

    def _approval_id(self, args: object) -> str:
        scope = self.approval_scope or self.namespace or ""
        where = self.tree_position if self.tree_position is not None else self.path
        material = json.dumps([scope, where, self.tool.name, args], sort_keys=True, default=str)
        return "bt-" + hashlib.sha256(material.encode()).hexdigest()[:24]
