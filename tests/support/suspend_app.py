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
from pathlib import Path
from typing import Any

from jianmu.llm import ScriptedLLM
from jianmu.nodes import ReActLoop, agent_tool, create_react_node
from jianmu.runtime.events import Event
from jianmu.tools import Tool, tool

NOTES = 3


class Gate:
    """Opens once; whoever waits on it in any event loop goes on (no asyncio.Event: each
    `run_sync` has its own loop)."""

    def __init__(self) -> None:
        self.opened = False
        self._waiters: list[asyncio.Future[None]] = []

    def open(self) -> None:
        """Let every waiter go on, now and later."""
        self.opened = True
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._waiters.clear()

    async def wait(self) -> None:
        """Return once the gate is open."""
        if self.opened:
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        await waiter

    def on_event(self, event: Event) -> None:
        """Open when the guard has checked a ``deploy`` (the first time, it asks a person)."""
        if event.fields.get("tool") == "deploy":
            self.open()


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


def tools(log: Log, gate: Gate) -> list[Tool]:
    """``write_note`` (no approval; waits for the gate) and ``deploy`` (a person approves)."""

    @tool(read_only=False)
    async def write_note(text: str) -> str:
        """Write a note.

        Args:
            text: the note.
        """
        await gate.wait()
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

    return [write_note, deploy]


def _tool_results(messages: list[Any]) -> list[str]:
    return [m.content for m in messages if m.role == "tool"]


def deployer_reply(messages: list[Any]) -> Any:
    if not _tool_results(messages):
        return [{"id": "dep", "name": "deploy", "arguments": {"target": "a"}}]
    return f"deployer: {_tool_results(messages)[-1]}"


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


def build(log: Log, gate: Gate) -> ReActLoop:
    """The lead agent with its two sub-agents as tools (a tree per call: they run in parallel)."""

    def deployer() -> Any:
        return create_react_node(ScriptedLLM([deployer_reply] * 4), tools(log, gate),
                                 name="deployer")

    def writer() -> Any:
        return create_react_node(ScriptedLLM([writer_reply] * 8), tools(log, gate),
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
