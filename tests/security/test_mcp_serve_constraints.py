"""Every tool ``jianmu mcp serve`` exposes runs under the server's constraints (issue 27, 8).

``run_bt_skill`` over MCP ran its tree with a default run context: the server config's deny
rules and ``execution.workdir`` did not reach the tools the skill runs, so a denied
``write_file`` wrote anyway, into the server's working folder. Now the server's own run context
(its guard, its workdir, nobody to approve) is what a served tool that runs tools gets.

Driven as a client would: the real ``jianmu mcp serve`` process over stdio, the SDK's client.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.cli._helpers import REPO, SHIPPED_SKILLS, Project, make_config
from tests.support.forked_stdio import stdio_kwargs

mcp = pytest.importorskip("mcp")

pytestmark = pytest.mark.anyio


@pytest.fixture
def project(tmp_path: Path) -> Project:
    """A project folder (the server's working folder) whose workspace is ``ws/``."""
    root = tmp_path / "proj"
    ws = root / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "app.py").write_text("x = 1  # TODO: rename\n", encoding="utf-8")
    (root / "src").mkdir()
    (root / "src" / "outside.py").write_text("# TODO: never surveyed\n", encoding="utf-8")
    return Project(root=root, config=make_config(root), workspace=ws)


@asynccontextmanager
async def served(project: Project, config: Path) -> AsyncIterator[Any]:
    from mcp.client.stdio import stdio_client

    params = mcp.StdioServerParameters(  # forked with the MCP SDK imported (forked_stdio)
        **stdio_kwargs("-m", "jianmu.cli", "mcp", "serve", "--skills-dir", str(SHIPPED_SKILLS),
                       "--config", str(config)),
        env={"PYTHONPATH": str(REPO)}, cwd=str(project.root),
    )
    async with stdio_client(params) as (read, write), mcp.ClientSession(read, write) as session:
        await session.initialize()
        yield session


def _text(result: Any) -> str:
    return "\n".join(b.text for b in result.content if b.type == "text")


async def test_a_bt_skill_runs_in_the_servers_workdir(project: Project) -> None:
    config = make_config(project.root, "guard:\n  tool_policy:\n    write_file: allow\n")
    async with served(project, config) as session:
        result = await session.call_tool(
            "run_bt_skill", {"skill": "workspace-report", "inputs": {"folder": "src"}})
    assert not result.is_error, _text(result)
    report = project.workspace / "workspace-report.md"
    assert report.is_file() and "app.py" in report.read_text()
    assert not (project.root / "workspace-report.md").exists()  # never the server's cwd
    assert "outside.py" not in report.read_text()


async def test_a_deny_rule_of_the_server_holds_inside_a_bt_skill(project: Project) -> None:
    config = make_config(project.root, "guard:\n  tool_policy:\n    write_file: deny\n")
    async with served(project, config) as session:
        result = await session.call_tool(
            "run_bt_skill", {"skill": "workspace-report", "inputs": {"folder": "src"}})
    assert result.is_error
    assert "write_file" in _text(result) and "denied" in _text(result).lower(), _text(result)
    assert not (project.workspace / "workspace-report.md").exists()
    assert not (project.root / "workspace-report.md").exists()


async def test_a_confirm_rule_is_refused_inside_a_bt_skill(project: Project) -> None:
    config = make_config(project.root, "guard:\n  tool_policy:\n    write_file: confirm\n")
    async with served(project, config) as session:
        result = await session.call_tool(
            "run_bt_skill", {"skill": "workspace-report", "inputs": {"folder": "src"}})
    assert result.is_error, _text(result)  # nobody here can approve
    assert not (project.workspace / "workspace-report.md").exists()
    assert not (project.root / "workspace-report.md").exists()
