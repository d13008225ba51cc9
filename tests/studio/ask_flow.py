"""A tree for the studio tests that asks a person a question (`AskUser`), then reports."""

from __future__ import annotations

from typing import Any

import py_trees
from py_trees.common import Status

from jianmu import AsyncNode
from jianmu.nodes import AskUser


class Report(AsyncNode):
    """The answer becomes the final answer."""

    async def update_async(self) -> Status:
        self.state.update({"final_answer": f"going to {self.state.get('city')}"})
        return Status.SUCCESS


def build_tree(inputs: dict[str, Any] | None = None) -> py_trees.behaviour.Behaviour:
    """ask (waits for an answer) → report; the question is the input ``question`` if given."""
    question = str((inputs or {}).get("question", "Which <b>city</b>?"))
    return py_trees.composites.Sequence("ask flow", memory=True, children=[
        AskUser("ask", question=question, output_key="city"), Report("report"),
    ])
