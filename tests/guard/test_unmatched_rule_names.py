"""A ``tool_policy`` or ``rate_limits`` key naming a tool that exists nowhere (a typo:
``delet_file: deny``) was accepted silently: the operator thought the tool denied, and it ran.
The guard cannot refuse it, for a name may be another agent's tool of the same run, or an MCP
server's or a skill's that comes later; so when a run's tool executor starts, a name that no
tool it has matches under any spelling of a restriction, nor any built-in, Claude Code, skill or
MCP name, and that is spelt close to a known name, is a ``guard.rule.unmatched`` event and a
``jianmu.guard`` warning naming the key and the closest name."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from jianmu import Constraints, ReactiveRunner, StateManager
from jianmu.constraints import GuardConstraints
from jianmu.guard.enforcer import unmatched_rule_names
from jianmu.nodes.state import AgentState
from jianmu.nodes.tool_executor import ToolExecutor
from jianmu.tools import tool

pytestmark = pytest.mark.anyio


@tool
def delete_file(path: str) -> str:
    """Delete a file (a custom tool).

    Args:
        path: which.
    """
    return "deleted"


async def events_of(guard: dict[str, Any]) -> list[Any]:
    node = ToolExecutor(tools=[delete_file],
                        constraints=Constraints.model_validate({"guard": guard}))
    state = StateManager(AgentState, {"actions": [
        {"id": "c", "name": "delete_file", "arguments": {"path": "x"}}]})
    runner = ReactiveRunner(node, state)
    seen: list[Any] = []
    runner.ctx.events.subscribe("guard.rule.unmatched", seen.append)
    await runner.run()
    return seen


async def test_a_typo_in_a_rule_is_a_warning_naming_the_closest_tool(
    caplog: pytest.LogCaptureFixture,
) -> None:
    guard = {"tool_policy": {"delet_file": "deny", "delete_file(path:zz)": "deny"},
             "rate_limits": {"Delete_Fil": 1}}
    with caplog.at_level(logging.WARNING, logger="jianmu.guard"):
        seen = await events_of(guard)
    found = {(e.fields["section"], e.fields["rule"], e.fields["closest"]) for e in seen}
    assert found == {("tool_policy", "delet_file", "delete_file"),
                     ("rate_limits", "Delete_Fil", "delete_file")}
    assert "guard.tool_policy['delet_file']" in caplog.text and "'delete_file'?" in caplog.text


@pytest.mark.parametrize("name", [
    "delete_file", "DELETE_FILE(path:x)", "bash", "file_read", "Read(secrets/*)", "WebFetch",
    "mcp__gh", "mcp__gh__delete_repo", "gh__delete_repo", "run_skill_script", "pay",
])
async def test_a_name_that_matches_or_may_still_match_is_no_warning(name: str) -> None:
    limits = {name.split("(")[0]: 5}
    assert await events_of({"tool_policy": {name: "deny"}, "rate_limits": limits}) == []


def test_every_unmatched_name_is_listed_with_its_closest() -> None:
    guard = GuardConstraints.model_validate(
        {"tool_policy": {"red_file": "deny", "zzqq": "deny", "read_file": "deny"}})
    assert unmatched_rule_names(guard, ["delete_file"]) == [
        ("tool_policy", "red_file", "read_file"), ("tool_policy", "zzqq", None)]
