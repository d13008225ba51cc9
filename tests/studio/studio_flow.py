"""A tree for the studio tests: a tool that asks first, with markup in every place a run's data
can carry it (the tree's name, the arguments, the tool's result)."""

from __future__ import annotations

from typing import Any

import py_trees
from py_trees.common import Status

from jianmu import AgentState, AsyncNode, ToolExecutor, tool

TREE_NAME = '<script>alert("node")</script> flow'


@tool(category="write", permission="user_confirm")
def deploy(target: str) -> str:
    """Deploy to a target (asks a person first).

    Args:
        target: Where to deploy.
    """
    return f"<b>deployed</b> {target} <script>alert('result')</script>"


class Plan(AsyncNode):
    """Asks for one ``deploy`` call, as a model would."""

    def __init__(self, target: str) -> None:
        super().__init__("plan")
        self.target = target

    async def update_async(self) -> Status:
        self.state.update({"actions": [{"id": "deploy_1", "name": "deploy",
                                        "arguments": {"target": self.target}}]})
        return Status.SUCCESS


class Report(AsyncNode):
    """The tool's observation becomes the answer."""

    async def update_async(self) -> Status:
        observations = [m for m in self.state.get("messages") or [] if m.role == "tool"]
        self.state.update({"final_answer": observations[-1].content if observations else "-"})
        return Status.SUCCESS


def build_tree(inputs: dict[str, Any] | None = None) -> py_trees.behaviour.Behaviour:
    """plan → execute (asks first) → report."""
    target = str((inputs or {}).get("target", "prod"))
    return py_trees.composites.Sequence(TREE_NAME, memory=True, children=[
        Plan(target), ToolExecutor("execute", [deploy]), Report("report"),
    ])


STATE_SCHEMA = AgentState
