"""What a tool call's path keeps between calls, turns and runs, and when it works it out again."""

from __future__ import annotations

import pytest

from jianmu import ReactiveRunner, StateManager
from jianmu.constraints import Constraints, read_only
from jianmu.guard import visible_tools
from jianmu.nodes.state import AgentState
from jianmu.nodes.tool_executor import ToolExecutor
from jianmu.tools import ToolSet, tool
from jianmu.tools.calls import ToolCall


def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: the key.
    """
    return f"value of {key}"


def remove(path: str) -> str:
    """Remove a file.

    Args:
        path: the file.
    """
    return f"removed {path}"


@pytest.mark.anyio
async def test_each_run_of_a_runner_releases_the_tool_runner_it_keeps() -> None:
    executor = ToolExecutor(tools=[tool(lookup)])
    state = StateManager(AgentState)
    runner = ReactiveRunner(executor, state)
    released: list[object] = []

    async def release() -> None:
        released.append(executor._runners.runner)

    executor._runners.release = release  # type: ignore[method-assign]
    kept = []
    for turn in range(3):  # a runner's runs share one context, whose closers each run clears
        state.update({"actions": [
            {"id": f"c{turn}_{i}", "name": "lookup", "arguments": {"key": f"k{i}"}}
            for i in range(2)
        ]})
        result = await runner.run()
        assert result.ok, result
        kept.append(executor._runners.runner)
        assert len(released) == turn + 1  # released at the end of every run, not the first only
    assert kept[0] is not None and kept == [kept[0]] * 3 == released  # one runner, kept
    tool_messages = [m for m in state.get("messages") if m.role == "tool"]
    assert [m.content for m in tool_messages] == ["value of k0", "value of k1"] * 3


def test_read_only_guards_each_hide_by_their_own_rules() -> None:
    tools = ToolSet.from_tools([tool(lookup), tool(remove)])
    closed = read_only(Constraints(guard={"tool_policy": {"remove": "deny"}}))
    opened = read_only(Constraints(guard={"tool_policy": {"remove": "allow"}}))
    for _ in range(2):  # worked out once per read-only guard, then the same answer
        assert visible_tools(tools, None, closed).names() == ["lookup"]
        assert visible_tools(tools, None, opened).names() == ["lookup", "remove"]
    # a plain (changeable) guard is read anew: a rule added later counts
    plain = Constraints()
    assert visible_tools(tools, None, plain).names() == ["lookup", "remove"]
    plain.guard.tool_policy["remove"] = "deny"
    assert visible_tools(tools, None, plain).names() == ["lookup"]


def test_from_list_copies_canonical_calls_and_converts_the_rest() -> None:
    calls = [ToolCall(name="lookup", arguments={"key": "a"}, id="c1"),
             ToolCall(name="lookup", arguments={"key": "b"}, id="c2")]
    same = ToolCall.from_list(calls)
    assert same == calls and same is not calls  # a new list: the caller may change it
    mixed = ToolCall.from_list([calls[0], {"id": "c3", "name": "lookup", "arguments": "{}"}])
    assert mixed[0] is calls[0] and mixed[1] == ToolCall(name="lookup", arguments={}, id="c3")
