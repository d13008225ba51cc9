"""A durable app for many workers: `jianmu worker examples/scale_app.py:engine`.

The database comes from ``JIANMU_DATABASE_URL`` (``postgresql://user:password@host:port/db``);
without it, an SQLite file in the user's state folder (one machine). The model is scripted, so
the example runs offline; swap in ``OpenAIProvider`` for a real one.

    python examples/scale_app.py enqueue 20    # a client: enqueue 20 triage runs
    python examples/scale_app.py wait          # a client: wait until every run has finished
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from typing import Any

from pydantic import BaseModel

from jianmu.durable import DurableEngine
from jianmu.llm.messages import Message
from jianmu.llm.scripted import ScriptedLLM
from jianmu.nodes import AgentState, create_react_node
from jianmu.state import StateManager
from jianmu.tools import tool

engine = DurableEngine(os.environ.get("JIANMU_DATABASE_URL"), name="helpdesk")


class Ticket(BaseModel):
    """A support ticket to triage."""

    ticket: str


@engine.tree("triage", inputs=Ticket)
def triage(inputs: dict[str, Any]) -> tuple[Any, StateManager]:
    """One model turn that labels, routes and answers a ticket (three tool calls)."""

    @tool
    def label(tag: str) -> str:
        """Label the ticket."""
        time.sleep(0.2)  # a slow backend: runs are still in flight when a worker dies
        return f"labelled {tag}"

    @tool
    def route(team: str) -> str:
        """Route the ticket to a team."""
        time.sleep(0.2)
        return f"routed to {team}"

    @tool
    def reply(text: str) -> str:
        """Send the customer a first reply."""
        return "sent"

    def model(messages: list[Message]) -> Any:
        if not any(m.role == "assistant" for m in messages):
            return [
                {"id": "c1", "name": "label", "arguments": {"tag": "billing"}},
                {"id": "c2", "name": "route", "arguments": {"team": "finance"}},
                {"id": "c3", "name": "reply", "arguments": {"text": "We are on it."}},
            ]
        return f"triaged: {inputs['ticket']}"

    agent = create_react_node(ScriptedLLM([model] * 3), [label, route, reply])
    return agent, StateManager(AgentState)


class Release(BaseModel):
    """Where to deploy."""

    target: str


@engine.tree("deploy", inputs=Release)
def deploy_tree(inputs: dict[str, Any]) -> tuple[Any, StateManager]:
    """A run that asks a person before it deploys."""

    @tool(permission="user_confirm")
    def deploy(target: str) -> str:
        """Deploy the current build (asks first)."""
        return f"deployed to {target}"

    def model(messages: list[Message]) -> Any:
        if not any(m.role == "assistant" for m in messages):
            return [{"id": "d1", "name": "deploy", "arguments": {"target": inputs["target"]}}]
        return f"done: {messages[-1].content}"

    return create_react_node(ScriptedLLM([model] * 3), [deploy]), StateManager(AgentState)


async def _enqueue(count: int) -> None:
    for i in range(count):
        await engine.start("triage", {"ticket": f"ticket #{i}: I was charged twice"})
    print(f"enqueued {count} runs")


async def _wait(timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    said = False
    while True:  # every run here gets its answers, so every run ends
        busy = [r for r in engine.runs() if r.status not in ("success", "failure", "cancelled")]
        if not busy:
            break
        if not said:  # a client runs nothing itself: with no worker up, it would wait mutely
            print(f"waiting for {len(busy)} run(s) to finish; workers run them: "
                  "jianmu worker examples/scale_app.py:engine", flush=True)
            said = True
        if time.monotonic() > deadline:
            raise SystemExit(f"{len(busy)} runs have not finished: {busy[0]}")
        await asyncio.sleep(0.5)
    done = engine.runs()
    by_worker: dict[str, int] = {}
    for run in done:
        by_worker[run.worker or "?"] = by_worker.get(run.worker or "?", 0) + 1
    print(f"{len(done)} runs: " + ", ".join(f"{w} ran {n}" for w, n in sorted(by_worker.items())))


if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) > 1 else "wait"
    try:
        if command == "enqueue":
            asyncio.run(_enqueue(int(sys.argv[2]) if len(sys.argv) > 2 else 10))
        else:
            asyncio.run(_wait())
    finally:
        engine.shutdown()
