"""A lead agent that calls two sub-agents in parallel: a deployer whose ``deploy`` waits for a
person, and a writer that writes three notes and then deploys too. Built the same in a test and
in the process that restores its run; every side effect is logged to a file, so a call that ran
twice, or after the run had returned, shows.

The models answer from the conversation (not from a position in a script), so a tree rebuilt
in another process says the same. The writer's first note waits until the deployer's deploy
has been checked by the guard (it then waits for a person): the run suspends while the writer
is in flight.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import py_trees
from py_trees.common import Status

from jianmu.llm import ScriptedLLM
from jianmu.nodes import ReActLoop, agent_tool, create_react_node
from jianmu.runtime.async_node import RuntimeNode
from jianmu.runtime.context import ApprovalRequest
from jianmu.runtime.events import Event
from jianmu.tools import Tool, tool

NOTES = 3


class Gate:
    """Opens once, from any thread; whoever waits on it in any event loop goes on (no
    asyncio.Event: each `run_sync` has its own loop)."""

    def __init__(self) -> None:
        self.flag = threading.Event()
        """Set once open: a tool in a worker thread waits on it."""
        self._lock = threading.Lock()
        self._waiters: list[asyncio.Future[None]] = []

    def open(self) -> None:
        """Let every waiter go on, now and later."""
        with self._lock:
            self.flag.set()
            waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            waiter.get_loop().call_soon_threadsafe(_release, waiter)

    async def wait(self) -> None:
        """Return once the gate is open."""
        with self._lock:
            if self.flag.is_set():
                return
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
        await waiter

    def on_event(self, event: Event) -> None:
        """Open when the guard has checked a ``deploy`` (the first time, it asks a person)."""
        if event.fields.get("tool") == "deploy":
            self.open()


def _release(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class Log:
    """The side effects, one line each, in a file (shared with another process)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.returned = False
        """Set by the test when ``run()`` has returned: a line written after it is marked."""

    def write(self, line: str) -> None:
        with self.path.open("a", encoding="utf-8") as out:
            out.write(("LATE " if self.returned else "") + line + "\n")

    def lines(self) -> list[str]:
        return self.path.read_text().splitlines() if self.path.exists() else []


def tools(
    log: Log, gate: Gate, *, threaded: bool = False, writing: Gate | None = None
) -> list[Tool]:
    """``write_note`` (no approval; waits for the gate), ``deploy`` (a person approves) and
    ``standby`` (waits until a note is being written).

    ``threaded``: ``write_note`` is synchronous, so it runs in a worker thread (which a cancel
    cannot stop), and opens ``writing`` when it starts.
    """

    @tool
    async def standby() -> str:
        """Wait until the notes are being written."""
        assert writing is not None
        await writing.wait()
        return "ready"


    @tool(read_only=False)
    async def write_note(text: str) -> str:
        """Write a note.

        Args:
            text: the note.
        """
        await gate.wait()
        log.write(f"note {text}")
        return "written"

    @tool(read_only=False, name="write_note")
    def write_note_in_thread(text: str) -> str:
        """Write a note.

        Args:
            text: the note.
        """
        if writing is not None:
            writing.open()  # the deployer may ask now
        assert gate.flag.wait(60), "the deployer never asked"
        log.write(f"note {text}")
        return "written"

    @tool(read_only=False, confirm=True)
    def deploy(target: str) -> str:
        """Deploy (a person approves first).

        Args:
            target: what to deploy.
        """
        log.write(f"deploy {target}")
        return f"deployed {target}"

    if threaded:
        return [write_note_in_thread, deploy, standby]
    return [write_note, deploy, standby]


def _tool_results(messages: list[Any]) -> list[str]:
    return [m.content for m in messages if m.role == "tool"]


def deployer_reply(messages: list[Any]) -> Any:
    if not _tool_results(messages):
        return [{"id": "dep", "name": "deploy", "arguments": {"target": "a"}}]
    return f"deployer: {_tool_results(messages)[-1]}"


def patient_deployer_reply(messages: list[Any]) -> Any:
    """The deployer's, after a ``standby`` until the writer is at work."""
    done = _tool_results(messages)
    if not done:
        return [{"id": "wait", "name": "standby", "arguments": {}}]
    if len(done) == 1:
        return [{"id": "dep", "name": "deploy", "arguments": {"target": "a"}}]
    return f"deployer: {done[-1]}"


def writer_reply(messages: list[Any]) -> Any:
    done = _tool_results(messages)
    if len(done) < NOTES:
        n = len(done) + 1
        return [{"id": f"note{n}", "name": "write_note", "arguments": {"text": f"n{n}"}}]
    if len(done) == NOTES:
        return [{"id": "dep", "name": "deploy", "arguments": {"target": "b"}}]
    return f"writer: {len(done) - 1} notes, {done[-1]}"


def lead_reply(messages: list[Any]) -> Any:
    done = _tool_results(messages)
    if not done:
        return [
            {"id": "c_deploy", "name": "deployer", "arguments": {"input": "Deploy a."}},
            {"id": "c_write", "name": "writer", "arguments": {"input": "Write, deploy b."}},
        ]
    return " | ".join(done)


def build(log: Log, gate: Gate, *, threaded: bool = False) -> ReActLoop:
    """The lead agent with its two sub-agents as tools (a tree per call: they run in parallel).

    ``threaded``: the writer's notes are written in a worker thread, and the deployer asks only
    once the writer's first note is under way (so it is in flight when the run suspends).
    """
    writing = Gate() if threaded else None

    def deployer() -> Any:
        reply = patient_deployer_reply if threaded else deployer_reply
        return create_react_node(ScriptedLLM([reply] * 4), tools(log, gate, writing=writing),
                                 name="deployer")

    def writer() -> Any:
        return create_react_node(ScriptedLLM([writer_reply] * 8),
                                 tools(log, gate, threaded=threaded, writing=writing),
                                 name="writer")

    return create_react_node(
        ScriptedLLM([lead_reply] * 4),
        [agent_tool(deployer, name="deployer", description="Deploys."),
         agent_tool(writer, name="writer", description="Writes notes, then deploys.")],
        name="lead",
    )


ANSWER = "deployer: deployed a | writer: 3 notes, deployed b"
"""The lead's final answer once both sub-agents finished."""
EFFECTS = ["note n1", "note n2", "note n3", "deploy a", "deploy b"]
"""Every side effect, each once (the deploys in either order)."""


class Asker(RuntimeNode, py_trees.behaviour.Behaviour):
    """A plain node for a tree of one's own: asks a person on its first tick (synchronously,
    so its siblings' tasks are in flight when the run suspends) and succeeds once approved."""

    def __init__(self, name: str, opens: asyncio.Event | None = None) -> None:
        super().__init__(name)
        self.opens = opens

    def update(self) -> Status:
        interaction = self.ctx.interaction
        assert interaction is not None
        decision = interaction.decision(self.name)
        if decision is not None:
            return Status.SUCCESS if decision.approved else Status.FAILURE
        if not interaction.asked(self.name):
            interaction.suspend(ApprovalRequest(id=self.name, summary=self.name))
            if self.opens is not None:
                self.opens.set()  # its siblings go on from here: they are in flight
        return Status.RUNNING
