"""ToolNode: ports, single-parameter input, failures, execute=False, as_node, events."""

from __future__ import annotations

from typing import Any

import py_trees
import pytest

from jianmu import Constraints, ReactiveRunner, RunStatus, StateManager
from jianmu.nodes.tool_node import ToolNode
from jianmu.tools.base import tool

pytestmark = pytest.mark.anyio


@tool
def shout(text: str) -> str:
    """Upper-case the text.

    Args:
        text: the text.
    """
    return text.upper()


@tool
def fails(text: str) -> str:
    """Return an error string.

    Args:
        text: ignored.
    """
    return "Error: no such thing"


@tool
def area(width: float, height: float) -> float:
    """Multiply the sides.

    Args:
        width: the width.
        height: the height.
    """
    return width * height


async def run(node: Any, state: StateManager) -> tuple[Any, list[Any]]:
    runner = ReactiveRunner(node, state)
    events: list[Any] = []
    runner.ctx.events.subscribe("tool.call.*", events.append)
    result = await runner.run(timeout=10)
    return result, events


async def test_single_value_input_and_output_port() -> None:
    state = StateManager(initial={"text": "hi"})
    result, events = await run(ToolNode("Shout", shout, "text", "loud"), state)
    assert result.status is RunStatus.SUCCESS and state.get("loud") == "HI"
    assert [e.name for e in events] == ["tool.call.started", "tool.call.completed"]
    assert events[0].fields["mode"] == "workflow" and events[1].fields["result_preview"] == "HI"


async def test_dict_input_is_the_arguments() -> None:
    state = StateManager(initial={"dims": {"width": 2, "height": "3"}})
    result, _ = await run(area.as_node(name="Area", input_key="dims", output_key="a"), state)
    assert result.status is RunStatus.SUCCESS and state.get("a") == 6.0


async def test_error_string_is_failure_and_nothing_is_written() -> None:
    state = StateManager(initial={"text": "x"})
    node = ToolNode("Fails", fails, "text", "out")
    result, events = await run(node, state)
    assert result.status is RunStatus.FAILURE
    assert state.get("out") is None
    assert node.feedback_message == "no such thing"
    assert events[-1].name == "tool.call.failed"


async def test_bad_arguments_fail_with_a_clear_message() -> None:
    state = StateManager(initial={"dims": {"width": "wide"}})
    node = ToolNode("Area", area, "dims", "a")
    result, _ = await run(node, state)
    assert result.status is RunStatus.FAILURE
    assert "width" in node.feedback_message and "height" in node.feedback_message


async def test_execute_false_skips() -> None:
    state = StateManager(initial={"text": "x"})
    result, events = await run(ToolNode("Off", shout, "text", "out", execute=False), state)
    assert result.status is RunStatus.SUCCESS and state.get("out") is None and events == []


async def test_tool_nodes_in_a_sequence() -> None:
    state = StateManager(initial={"text": "a"})
    tree = py_trees.composites.Sequence("Flow", memory=True, children=[
        ToolNode("One", shout, "text", "mid"),
        ToolNode("Two", shout, "mid", "end"),
    ])
    result, events = await run(tree, state)
    assert result.status is RunStatus.SUCCESS and state.get("end") == "A"
    assert [e.node for e in events if e.name == "tool.call.completed"] == ["Flow/One", "Flow/Two"]


@tool(category="execute", permission="user_confirm")
def launch(target: str) -> str:
    """Launch something (asks first).

    Args:
        target: what to launch.
    """
    return f"launched {target}"


async def test_a_placed_step_passes_the_guard_too() -> None:
    state = StateManager(initial={"t": "rocket"})
    runner = ReactiveRunner(ToolNode("Launch", launch, "t", "out"), state)
    first = await runner.run(timeout=10)
    assert first.status is RunStatus.SUSPENDED and state.get("out") is None
    runner.approve(first.pending[0].id)
    assert (await runner.run(timeout=10)).ok and state.get("out") == "launched rocket"


async def test_a_denied_step_fails_with_the_reason() -> None:
    deny = Constraints.model_validate({"guard": {"tool_policy": {"shout": "deny"}}})
    state = StateManager(initial={"text": "x"})
    node = ToolNode("Shout", shout, "text", "out")
    result = await ReactiveRunner(node, state, constraints=deny).run(timeout=10)
    assert result.status is RunStatus.FAILURE and "denied" in node.feedback_message
    assert state.get("out") is None


async def test_guarded_false_trusts_the_author() -> None:
    state = StateManager(initial={"t": "probe"})
    node = ToolNode("Launch", launch, "t", "out", guarded=False)
    assert (await ReactiveRunner(node, state).run(timeout=10)).ok
    assert state.get("out") == "launched probe"


async def test_a_tool_nodes_tool_that_exits_fails_the_node_not_the_process() -> None:
    import sys

    @tool
    def exits(code: int) -> str:
        """Exits.

        Args:
            code: the exit code.
        """
        sys.exit(code)

    node = ToolNode("Exits", exits, "code", "out")
    result, _ = await run(node, StateManager(initial={"code": {"code": 4}}))
    assert result.status is RunStatus.FAILURE
    assert node.feedback_message == "the tool called sys.exit(4)"


async def test_a_tool_nodes_tool_that_cancels_its_own_task_fails_with_that_reason() -> None:
    from tests.nodes.test_tool_executor import cancels_its_own_task

    node = ToolNode("Cancels", cancels_its_own_task, "args", "out")
    result, _ = await run(node, StateManager(initial={"args": {"note": "x"}}))
    assert result.status is RunStatus.FAILURE
    assert "cancelled the task it ran in" in node.feedback_message


@tool
def broken(text: str) -> str:
    """Raise.

    Args:
        text: ignored.
    """
    raise RuntimeError("broken")


async def test_a_workflows_executed_calls_count_in_the_runs_usage() -> None:
    """A step's call that ran counts in ``usage.tool_calls`` as an agent's does (also one that
    raised); arguments that do not fit and a denied step ran nothing and count for nothing.
    `jianmu run` of a BT skill said "tool calls: 8" and "run's usage: ... 0 tool calls"."""
    from jianmu.nodes.state import AgentState

    class Flow(AgentState):
        text: str = "a"
        mid: str | None = None
        end: str | None = None
        dims: dict[str, Any] = {"width": "wide"}

    deny = Constraints.model_validate({"guard": {"tool_policy": {"area": "deny"}}})
    tree = py_trees.composites.Sequence("Flow", memory=True, children=[
        ToolNode("One", shout, "text", "mid"),
        ToolNode("Two", shout, "mid", "end"),
        py_trees.decorators.FailureIsSuccess("ok", ToolNode("Raises", broken, "text", None)),
        py_trees.decorators.FailureIsSuccess("ok2", ToolNode("Unfit", shout, "dims", None)),
        py_trees.decorators.FailureIsSuccess("ok3", ToolNode("Denied", area, "dims", None)),
    ])
    state = StateManager(Flow)
    result = await ReactiveRunner(tree, state, constraints=deny).run(timeout=10)
    assert result.status is RunStatus.SUCCESS and state.get("end") == "A"
    assert result.usage is not None and result.usage.tool_calls == 3
