"""Red team, a ``Read(path)`` rule (Claude Code's name, mapped to read_file and
read_skill_file) and the searches: ``Read(secrets/*): deny`` held for read_file only, and
``grep_search`` of the workspace returned the key's text, ``glob_search`` its name. Claude Code
applies its Read rules to Grep and Glob.

Fixed here: a restricting ``Read`` rule with a path also holds for the folder each search
reads (``grep_search``'s ``path``, ``glob_search``'s ``root``), and above what it names (a
search of ``.`` reads ``secrets/key``), as ``grep_search(secrets/*)`` does; a bare ``Read:
deny`` denies the searches too. A search of another folder still runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jianmu import Constraints, ReactiveRunner, StateManager
from jianmu.nodes.state import AgentState
from jianmu.nodes.tool_executor import ToolExecutor
from jianmu.tools import ToolSet

pytestmark = pytest.mark.anyio


def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "secrets").mkdir(parents=True)
    (ws / "secrets" / "key").write_text("s3cr3t-value\n")
    (ws / "src").mkdir()
    (ws / "src" / "app.py").write_text("s3cr3t = 'not it'\n")
    return ws


async def said_by(ws: Path, rule: str, name: str, arguments: dict[str, str]) -> str:
    constraints = Constraints.model_validate(
        {"guard": {"tool_policy": {rule: "deny"}}, "execution": {"workdir": str(ws)}})
    node = ToolExecutor(tools=ToolSet.resolve([name]), constraints=constraints)
    state = StateManager(AgentState, {"actions": [
        {"id": "c", "name": name, "arguments": arguments}]})
    await ReactiveRunner(node, state).run()
    return str(state.get("messages")[-1].content)


@pytest.mark.parametrize("rule", ["Read(secrets/*)", "Read(./secrets/**)", "READ(secrets)",
                                  "Read(path:secrets/*)", "Read"])
@pytest.mark.parametrize(("name", "arguments"), [
    ("grep_search", {"pattern": "s3cr3t"}),
    ("grep_search", {"pattern": "s3cr3t", "path": "secrets"}),
    ("grep_search", {"pattern": "s3cr3t", "path": "./secrets/key"}),
    ("glob_search", {"pattern": "**/*"}),
    ("glob_search", {"pattern": "*", "root": "secrets"}),
])
async def test_a_read_rule_holds_for_the_searches(
    tmp_path: Path, rule: str, name: str, arguments: dict[str, str],
) -> None:
    said = await said_by(workspace(tmp_path), rule, name, arguments)
    assert "s3cr3t-value" not in said and "secrets/key" not in said and "denied" in said, said


@pytest.mark.parametrize(("name", "arguments", "found"), [
    ("grep_search", {"pattern": "s3cr3t", "path": "src"}, "app.py"),
    ("glob_search", {"pattern": "*.py", "root": "src"}, "app.py"),
])
async def test_a_search_of_another_folder_runs(
    tmp_path: Path, name: str, arguments: dict[str, str], found: str,
) -> None:
    said = await said_by(workspace(tmp_path), "Read(secrets/*)", name, arguments)
    assert found in said and "denied" not in said, said
