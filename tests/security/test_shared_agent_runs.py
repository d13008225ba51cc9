"""Runs of one agent shared by many users (a web server's module-level `Agent`): a sub-agent
tool (`Agent.as_tool`) called under the same call id in two runs must run in each run's own
state, never in the other's.

Fixed here: the sub-agent tool found a call's sub-run by its namespace alone
(``research/<call id>``), which every run of the agent has. Bob's run, calling the sub-agent
with the call id Alice's suspended run had used, went on with Alice's sub-run: it ran the call
Alice had approved, with Alice's arguments, and left Alice's run waiting for nothing; two
runs at once got "this runner is already running" for one of them. A sub-run is now found by
the calling run's id and its namespace; a tree that serves one call at a time (`agent_tool` of
a tree) and waits for a person in one run fails another run's call at once, rather than letting
it borrow the sub-run or wait for a decision only the first run can take.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from jianmu import Agent, ReactiveRunner, RunStatus, ScriptedLLM, StateManager, tool
from jianmu.nodes import AgentState, agent_tool, create_react_node
from jianmu.runtime.checkpoint import SQLiteCheckpointer

pytestmark = pytest.mark.anyio


def sub_reply(tool_name: str) -> Any:
    """The sub-agent's model: call ``tool_name`` with the question, then answer with its result."""

    def reply(messages: list[Any]) -> Any:
        if messages[-1].role == "user":
            return [{"name": tool_name, "arguments": {"q": messages[-1].content}}]
        return f"found {messages[-1].content}"

    return reply


def lead_reply(messages: list[Any]) -> Any:
    """The lead's model: every run asks the sub-agent under the same call id, as models do."""
    if messages[-1].role == "user":
        return [{"name": "research", "arguments": {"input": messages[-1].content}, "id": "r1"}]
    return f"lead: {messages[-1].content}"


def lead_over(sub_tool: Any) -> Agent:
    researcher = Agent(ScriptedLLM([sub_reply(sub_tool.name)] * 20), tools=[sub_tool],
                       name="researcher")
    return Agent(ScriptedLLM([lead_reply] * 20), tools=[researcher.as_tool("research")])


async def test_another_users_run_does_not_go_on_with_a_suspended_sub_run() -> None:
    ran: list[str] = []

    @tool(confirm=True)
    def reveal(q: str) -> str:
        """Reveal a user's records (a person approves first).

        Args:
            q: whose.
        """
        ran.append(q)
        return f"records of {q}"

    agent = lead_over(reveal)
    alice = await agent.run("alice")
    assert alice.status is RunStatus.SUSPENDED
    alice.approve()
    bob = await agent.run("bob")
    # Bob's own sub-run asks for Bob's call; Alice's approved call is not run for him
    assert bob.status is RunStatus.SUSPENDED and ran == []
    assert [r.payload["arguments"] for r in bob.pending] == [{"q": "bob"}]
    done = await agent.run(resume=alice)
    assert done.output == "lead: found records of alice" and ran == ["alice"]


async def test_runs_at_once_each_run_their_own_sub_agent_under_one_call_id() -> None:
    both = asyncio.Event()
    asked: list[str] = []

    @tool
    async def look(q: str) -> str:
        """Look something up (waits until both runs are inside it).

        Args:
            q: what.
        """
        asked.append(q)
        if len(asked) == 2:
            both.set()
        await both.wait()
        return q

    agent = lead_over(look)
    a, b = await asyncio.gather(agent.run("A"), agent.run("B"))
    assert (a.output, b.output) == ("lead: found A", "lead: found B")


def one_tree_tool() -> tuple[Any, list[str]]:
    """A sub-agent tool over one tree (not a function that builds one), and what it ran."""
    ran: list[str] = []

    @tool(confirm=True)
    def deploy(target: str) -> str:
        """Deploy (a person approves first).

        Args:
            target: where.
        """
        ran.append(target)
        return f"deployed to {target}"

    sub = create_react_node(ScriptedLLM([
        [{"name": "deploy", "arguments": {"target": "prod"}}], "shipped"] * 3), [deploy],
        name="sub")
    return agent_tool(sub, name="helper", description="Ships."), ran


def lead_run(helper: Any, state: StateManager | None = None, **kwargs: Any) -> ReactiveRunner:
    lead = create_react_node(ScriptedLLM([
        [{"name": "helper", "arguments": {"input": "ship"}, "id": "h1"}], "lead done"] * 3,
    ), [helper], name="lead")
    if state is None:
        state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    return ReactiveRunner(lead, state, **kwargs)


async def test_a_tree_busy_with_another_runs_call_is_refused_not_borrowed() -> None:
    helper, ran = one_tree_tool()
    alice = lead_run(helper)
    waiting = await alice.run()
    assert waiting.status is RunStatus.SUSPENDED
    alice.approve(waiting.pending[0].id)
    # Bob's run gets a clear error for its model at once: neither Alice's approved call nor
    # a wait for a decision that only Alice's run can take
    bob = await lead_run(helper).run()
    assert bob.ok and ran == []
    assert "busy with a call of another run" in str(bob.messages[2].content)
    assert (await alice.run()).ok and ran == ["prod"]


async def test_a_run_restored_in_the_same_process_goes_on_with_its_sub_agent(
    tmp_path: Path,
) -> None:
    helper, ran = one_tree_tool()
    store = SQLiteCheckpointer(tmp_path / "runs.db")
    first = lead_run(helper, checkpointer=store)
    waiting = await first.run()
    restored = ReactiveRunner.restore(
        lead_run(helper).root, store, waiting.run_id, state_manager=StateManager(AgentState)
    )
    restored.approve(waiting.pending[0].id)
    done = await restored.run()
    assert done.ok and ran == ["prod"]
    assert [m.content for m in done.messages if m.role == "tool"] == ["shipped"]
