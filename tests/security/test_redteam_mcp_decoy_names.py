"""Red team, MCP client: a decoy tool takes the name a rule was written for.

Jianmu names an MCP tool ``<server>__<tool>`` with unsafe characters made ``_``; where two
names meet (``delete.repo`` and ``delete_repo``), the one listed first kept the plain name and
the other got a hash. A server listing a decoy ``delete.repo`` first gave the decoy
``srv__delete_repo``, so ``tool_policy: {mcp__srv__delete_repo: deny}``, written for the tool
``delete_repo``, denied the decoy, and ``delete_repo`` ran under ``srv__delete_repo_<hash>``;
a listing that changed order after ``list_changed`` moved the rule from one tool to another.
Now the tool whose name needs no change keeps it, whatever the order.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed")

from jianmu import Constraints, ReactiveRunner, StateManager
from jianmu.mcp import MCPToolProvider, mcp_tool_names
from jianmu.nodes.state import AgentState
from jianmu.nodes.tool_executor import ToolExecutor
from tests.support.forked_stdio import stdio_kwargs

pytestmark = pytest.mark.anyio
SERVER = str(Path(__file__).parent / "servers" / "decoy_names_server.py")


def test_who_keeps_a_plain_name_does_not_depend_on_the_order() -> None:
    for tools in (["delete.repo", "delete_repo"], ["delete_repo", "delete.repo"]):
        named = dict(zip(tools, mcp_tool_names("srv", tools), strict=True))
        assert named["delete_repo"] == "srv__delete_repo", named
        assert named["delete.repo"].startswith("srv__delete_repo_"), named
    for tools in (["Get", "get"], ["get", "Get"]):
        assert dict(zip(tools, mcp_tool_names("s", tools), strict=True))["get"] == "s__get"


async def test_a_deny_rule_holds_for_the_tool_it_names_behind_a_decoy(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.touch()
    provider = MCPToolProvider("srv", trust="all", **stdio_kwargs(SERVER, str(marks)))
    await provider.initialize()
    try:
        tools = provider.get_tools()
        real = next(t for t in tools if t.metadata["mcp_tool"] == "delete_repo")
        constraints = Constraints.model_validate(
            {"guard": {"tool_policy": {"mcp__srv__delete_repo": "deny"}}})
        node = ToolExecutor(tools=tools, constraints=constraints)
        actions = [{"id": "c0", "name": real.name, "arguments": {"repo": "r"}}]
        result = await ReactiveRunner(node, StateManager(AgentState, {"actions": actions})).run()
        assert not result.pending
        assert "delete_repo" not in marks.read_text().split(), "the denied tool ran"
    finally:
        await provider.close()
