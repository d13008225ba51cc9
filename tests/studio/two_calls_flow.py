"""A tree for the studio tests that asks about two calls at once (one batch of two deploys)."""

from __future__ import annotations

from typing import Any

import py_trees
from py_trees.common import Status

from jianmu import AgentState, AsyncNode, ToolExecutor
from tests.studio.studio_flow import Report, deploy


class PlanTwo(AsyncNode):
    """Asks for two ``deploy`` calls in one turn, as a model would."""

    async def update_async(self) -> Status:
        self.state.update({"actions": [
            {"id": "deploy_1", "name": "deploy", "arguments": {"target": "staging"}},
            {"id": "deploy_2", "name": "deploy", "arguments": {"target": "prod"}}]})
        return Status.SUCCESS


def build_tree(inputs: dict[str, Any] | None = None) -> py_trees.behaviour.Behaviour:
    """plan two → execute (asks about both) → report."""
    return py_trees.composites.Sequence("two calls", memory=True, children=[
        PlanTwo("plan"), ToolExecutor("execute", [deploy]), Report("report"),
    ])


STATE_SCHEMA = AgentState
