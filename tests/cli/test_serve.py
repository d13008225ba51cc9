"""``jianmu mcp serve`` (driven by the MCP SDK's client) and ``jianmu sandbox build-image``."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TextIO

import pytest

from jianmu._cli.serve import DEFAULT_SERVED_TOOLS
from tests.cli._helpers import REPO, SHIPPED_SKILLS, Project, assert_clean_error

PUBLIC_SKILLS = REPO / "tests" / "fixtures" / "public_skills"

mcp = pytest.importorskip("mcp")


@asynccontextmanager
async def served(
    project: Project, *args: str, errlog: TextIO = sys.stderr
) -> AsyncIterator[mcp.ClientSession]:
    from mcp.client.stdio import stdio_client

    params = mcp.StdioServerParameters(
        command=sys.executable,
        args=["-m", "jianmu.cli", "mcp", "serve", *args, "--config", str(project.config)],
        env={"PYTHONPATH": str(REPO)}, cwd=str(project.root),
    )
    async with stdio_client(params, errlog=errlog) as (read, write), \
            mcp.ClientSession(read, write) as session:
        await session.initialize()
        yield session


def _text(result: object) -> str:
    return "\n".join(b.text for b in result.content if b.type == "text")  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_serves_the_read_only_builtins_by_default(project: Project) -> None:
    async with served(project) as session:
        listed = {t.name: t for t in (await session.list_tools()).tools}
        assert sorted(listed) == sorted(DEFAULT_SERVED_TOOLS)
        assert listed["read_file"].annotations.read_only_hint is True  # type: ignore[union-attr]
        result = await session.call_tool("calculator", {"expression": "17 * 23"})
        assert not result.is_error and _text(result) == "391"
        read = await session.call_tool("read_file", {"path": "README.md"})  # in the workdir
        assert "# demo" in _text(read)


@pytest.mark.anyio
async def test_named_tools_with_the_config_guard_and_bt_skills(project: Project) -> None:
    async with served(project, "--tools", "calculator,bash",
                      "--skills-dir", str(SHIPPED_SKILLS)) as session:
        names = [t.name for t in (await session.list_tools()).tools]
        assert names == ["calculator", "bash", "run_bt_skill"]
        prompts = [p.name for p in (await session.list_prompts()).prompts]
        assert prompts == ["code-review", "release-notes"]  # the shipped prompt skills
        uris = {r.uri for r in (await session.list_resources()).resources}
        assert {"skill://code-review/references/checklist.md",
                "skill://workspace-report/tree.py"} <= uris
        refused = await session.call_tool("bash", {"command": "echo hi"})
        assert refused.is_error and "needs a person's approval" in _text(refused)


@pytest.mark.anyio
async def test_prompt_skills_only_are_served_as_prompts_and_resources(project: Project) -> None:
    async with served(project, "--skills-dir", str(PUBLIC_SKILLS)) as session:
        prompts = [p.name for p in (await session.list_prompts()).prompts]
        assert {"pdf-forms", "release-notes", "brand-styling"} <= set(prompts)
        got = await session.get_prompt("release-notes")
        assert got.messages[0].content.text.startswith("# Release notes")  # type: ignore[union-attr]
        uris = [r.uri for r in (await session.list_resources()).resources]
        assert "skill://release-notes/examples/weekly-update.md" in uris
        read = await session.read_resource("skill://release-notes/examples/weekly-update.md")
        assert read.contents[0].text.startswith("# Week 20")  # type: ignore[union-attr]
        assert sorted(t.name for t in (await session.list_tools()).tools) == \
            sorted(DEFAULT_SERVED_TOOLS)  # no BT skill: no run_bt_skill


def test_serve_bad_arguments_exit_2(project: Project) -> None:
    assert_clean_error(project.jianmu("mcp", "serve", "--tools", "calculator,nosuch"), 2,
                       "--tools: no built-in tool named 'nosuch'")
    (project.root / "noskills").mkdir()
    assert_clean_error(project.jianmu("mcp", "serve", "--skills-dir", "noskills"), 2,
                       "no skill found there")


def test_build_image_without_docker_fails_cleanly(project: Project) -> None:
    pytest.importorskip("docker")
    done = project.jianmu("sandbox", "build-image", "--name", "jianmu-test:none",
                          env={"DOCKER_HOST": f"unix://{project.root}/no-docker.sock"})
    assert_clean_error(done, 1, "Docker")


@pytest.mark.anyio
async def test_version_and_start_up_line_list_only_the_served_tools(
    project: Project, tmp_path: Path
) -> None:
    from jianmu.mcp.server import jianmu_version

    project.config.write_text(project.config.read_text(encoding="utf-8") + (
        "guard:\n  tool_policy:\n    calculator: deny\n"
    ), encoding="utf-8")
    errlog = tmp_path / "stderr.txt"
    with errlog.open("w", encoding="utf-8") as log:
        async with served(project, "--tools", "calculator,read_file,list_dir",
                          errlog=log) as session:
            info = await session.initialize()  # the handshake's result, kept by the session
            names = [t.name for t in (await session.list_tools()).tools]
    assert names == ["read_file", "list_dir"]
    assert info.server_info.name == "jianmu" and info.server_info.version == jianmu_version()
    assert jianmu_version() != ""
    text = errlog.read_text(encoding="utf-8")
    assert "serving 2 tool(s) over MCP (stdio): read_file, list_dir" in text
    assert "not served (hidden by the guard, admin only or deprecated): calculator" in text
