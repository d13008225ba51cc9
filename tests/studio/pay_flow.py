"""A tree for the studio tests: a payment that asks first, to an account whose number is a
whole number past 2**53 (what JavaScript's numbers cannot hold)."""

from __future__ import annotations

from typing import Any

import py_trees
from py_trees.common import Status

from jianmu import AgentState, AsyncNode, ToolExecutor, tool

ACCOUNT = 2**64 + 1


@tool(category="write", permission="user_confirm")
def pay(account: int, note: str) -> str:
    """Pay into an account (asks a person first).

    Args:
        account: The account's number.
        note: What the payment is for.
    """
    return f"paid {account}: {note}"


class Plan(AsyncNode):
    """Asks for one ``pay`` call, as a model would."""

    async def update_async(self) -> Status:
        self.state.update({"actions": [{"id": "pay_1", "name": "pay",
                                        "arguments": {"account": ACCOUNT, "note": "rent"}}]})
        return Status.SUCCESS


class Report(AsyncNode):
    """The tool's observation becomes the answer."""

    async def update_async(self) -> Status:
        observations = [m for m in self.state.get("messages") or [] if m.role == "tool"]
        self.state.update({"final_answer": observations[-1].content if observations else "-"})
        return Status.SUCCESS


def build_tree(inputs: dict[str, Any] | None = None) -> py_trees.behaviour.Behaviour:
    """plan → execute (asks first) → report."""
    return py_trees.composites.Sequence("pay flow", memory=True, children=[
        Plan("plan"), ToolExecutor("execute", [pay]), Report("report"),
    ])


STATE_SCHEMA = AgentState
