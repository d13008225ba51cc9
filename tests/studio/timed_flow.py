"""The studio flow beside a branch that holds the run while a file ``hold`` is in the folder:
the run times out, saved as such while its ``deploy_1`` waits for a person."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import py_trees
from py_trees.common import ParallelPolicy, Status

from jianmu import AgentState, AsyncNode
from tests.studio import studio_flow


class Hold(AsyncNode):
    """Waits while the folder has a file ``hold`` (until the run's timeout stops it)."""

    async def update_async(self) -> Status:
        if Path("hold").exists():
            await asyncio.Event().wait()
        return Status.SUCCESS


def build_tree(inputs: dict[str, Any] | None = None) -> py_trees.behaviour.Behaviour:
    """The studio flow and `Hold`, side by side."""
    return py_trees.composites.Parallel("timed", policy=ParallelPolicy.SuccessOnAll(), children=[
        studio_flow.build_tree({"target": "prod"}), Hold("hold"),
    ])


STATE_SCHEMA = AgentState
