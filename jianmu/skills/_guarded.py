"""`GuardedToolNode`: a `ToolNode` whose call passes the guard first (BT skills use it)."""

from __future__ import annotations

import hashlib
import json
import time

from py_trees.common import Status

from jianmu.constraints import Constraints
from jianmu.errors import StateValidationError
from jianmu.guard import GuardEnforcer, GuardLedger
from jianmu.nodes.tool_node import ToolNode
from jianmu.tools.calls import ToolCall

__all__ = ("GuardedToolNode",)


class GuardedToolNode(ToolNode):
    """A `ToolNode` that asks the guard before it runs its tool.

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

    approval_scope: str | None = None
    """Prefix of the approval ids; set by the skill loader (default: the namespace)."""
    tree_position: str | None = None
    """The node's place in the skill's tree (e.g. ``0/2``); default: its path in the run."""

    def _approval_id(self, args: object) -> str:
        scope = self.approval_scope or self.namespace or ""
        where = self.tree_position if self.tree_position is not None else self.path
        material = json.dumps([scope, where, self.tool.name, args], sort_keys=True, default=str)
        return "bt-" + hashlib.sha256(material.encode()).hexdigest()[:24]

    async def update_async(self) -> Status:
        """Check the call with the guard; suspend, fail, or run the tool like `ToolNode`."""
        if not self.execute:
            return Status.SUCCESS
        args = self._arguments()
        constraints = Constraints.merge(self.ctx.constraints, self.constraints)
        enforcer = GuardEnforcer.from_guard_constraints(constraints.guard)
        ledger = GuardLedger.from_dict(self.state.get("guard_ledger") or {})
        call = ToolCall(id=self._approval_id(args), name=self.tool.name, arguments=args)
        (decision,) = enforcer.preflight(
            [call], {self.tool.name.lower(): self.tool}, run=self.ctx,
            calls_made=ledger.calls_made, call_times=ledger.call_times, events=self.events,
        )
        if decision.awaiting_approval:
            assert self.ctx.interaction is not None  # ConfirmChecker denies without one
            self.ctx.interaction.suspend(enforcer.approval_request(call, decision, node=self.path))
            self.feedback_message = f"waiting for approval of {self.tool.name} ({call.id})"
            return Status.RUNNING
        if decision.denied:
            self.feedback_message = f"the guard denied {self.tool.name}: {decision.reason}"
            if self.bt_skill:
                self.events.emit("bt.skill.node.io", skill=self.bt_skill, stage="guard",
                                 tool_name=self.tool.name, ok=False,
                                 output_preview=decision.reason)
            return Status.FAILURE
        status = await super().update_async()
        ledger.record([self.tool.name], time.time())
        try:
            self.state.update({"guard_ledger": ledger.to_dict()})
        except StateValidationError:  # a state schema without the ledger: limits per node only
            pass
        return status
