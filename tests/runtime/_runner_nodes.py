"""Nodes and checkpoints the runner's contract tests share."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import py_trees
from py_trees.common import Status

from jianmu.runtime import ApprovalRequest, AsyncNode, Event, ReactiveRunner
from jianmu.state import StateManager


class Store:
    """A checkpointer that keeps every save (no leases)."""

    def __init__(self) -> None:
        self.saves: list[dict[str, Any]] = []
        self.rows: dict[str, dict[str, Any]] = {}

    def save(self, run_id: str, checkpoint: dict[str, Any]) -> None:
        self.saves.append(checkpoint)
        self.rows[run_id] = checkpoint

    def load(self, run_id: str) -> dict[str, Any] | None:
        return self.rows.get(run_id)


class Log(AsyncNode):
    """Appends its name to the state's ``log`` and succeeds."""

    async def update_async(self) -> Status:
        self.state.update({"log": [*(self.state.get("log") or []), self.name]})
        return Status.SUCCESS


class Gate(AsyncNode):
    """Waits on ``gate``, recording when it started and ended, and whether it was cancelled."""

    def __init__(self, name: str, gate: asyncio.Event | None = None) -> None:
        super().__init__(name)
        self.gate = gate or asyncio.Event()
        self.started = asyncio.Event()
        self.cancelled = False
        self.times: list[float] = []

    async def update_async(self) -> Status:
        self.times.append(time.monotonic())
        self.started.set()
        try:
            await self.gate.wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        self.times.append(time.monotonic())
        return Status.SUCCESS


class Ask(AsyncNode):
    """Asks for approval of ``deploy``; succeeds once approved, fails once rejected."""

    async def update_async(self) -> Status:
        decision = self.ctx.interaction.decision("deploy")
        if decision is None:
            self.ctx.interaction.suspend(ApprovalRequest(id="deploy", summary="deploy?"))
            return Status.RUNNING
        return Status.SUCCESS if decision.approved else Status.FAILURE


class Closes(AsyncNode):
    """Registers closers on the run's context, then succeeds."""

    def __init__(self, name: str, closers: list[Any]) -> None:
        super().__init__(name)
        self.closers = closers

    async def update_async(self) -> Status:
        for closer in self.closers:
            self.ctx.on_close(closer)
        return Status.SUCCESS


class Fails(py_trees.behaviour.Behaviour):
    """A plain behaviour that fails, saying why in its feedback (when given)."""

    def __init__(self, name: str, feedback: str = "") -> None:
        super().__init__(name)
        self.feedback = feedback

    def update(self) -> Status:
        self.feedback_message = self.feedback
        return Status.FAILURE


class Raises(py_trees.behaviour.Behaviour):
    def update(self) -> Status:
        raise KeyError("no such key")


class Boom(AsyncNode):
    async def update_async(self) -> Status:
        raise ValueError("kaboom")


def events_of(runner: ReactiveRunner) -> list[Event]:
    seen: list[Event] = []
    runner.ctx.events.subscribe("*", seen.append)
    return seen


def checkpoint(statuses: list[str], root: str = "RUNNING", names: list[str] | None = None,
               version: Any = 1) -> dict[str, Any]:
    names = names or [f"c{i}" for i in range(len(statuses))]
    nodes = {"0": {"name": "Root", "status": root}}
    nodes.update({f"0/{i}": {"name": n, "status": s}
                  for i, (n, s) in enumerate(zip(names, statuses, strict=True))})
    return {"version": version, "run_id": "r1", "status": "running", "tree": "Root",
            "ticks": 7, "state": StateManager().snapshot(), "nodes": nodes, "interaction": {},
            "user_roles": ["admin"]}


def composite(kind: type, count: int) -> py_trees.behaviour.Behaviour:
    return kind("Root", memory=True, children=[Log(f"c{i}") for i in range(count)])


class AskFor(AsyncNode):
    """Asks for approval of its own name; succeeds once approved."""

    async def update_async(self) -> Status:
        decision = self.ctx.interaction.decision(self.name)
        if decision is None:
            self.ctx.interaction.suspend(ApprovalRequest(id=self.name, summary="ok?"))
            return Status.RUNNING
        return Status.SUCCESS
