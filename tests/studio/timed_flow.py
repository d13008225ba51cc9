"""The studio flow beside a branch that holds its first run until that run times out: the run
is saved as timed out while its ``deploy_1`` waits for a person."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import py_trees
from py_trees.common import ParallelPolicy, Status

from jianmu import AgentState, AsyncNode
from tests.studio import studio_flow


class Hold(AsyncNode):
    """Waits for ever in the first run (it leaves ``held`` in the folder); done at once after."""

    async def update_async(self) -> Status:
        held = Path("held")
        if not held.exists():
            held.write_text("")
            await asyncio.Event().wait()  # until the run's timeout stops it
        return Status.SUCCESS


def build_tree(inputs: dict[str, Any] | None = None) -> py_trees.behaviour.Behaviour:
    """The studio flow and `Hold`, side by side."""
    return py_trees.composites.Parallel("timed", policy=ParallelPolicy.SuccessOnAll(), children=[
        studio_flow.build_tree({"target": "prod"}), Hold("hold"),
    ])


STATE_SCHEMA = AgentState
