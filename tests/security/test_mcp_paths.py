"""Issue 12, item 6: ``jianmu mcp serve`` checks path rules against the configured workdir.

The server is a real ``jianmu mcp serve`` process started in a folder outside
``execution.workdir``, driven by the official MCP SDK client, with
``read_file(path:secrets/*): deny``. Every spelling of ``secrets/key`` must be refused, and the
tools must still work on the workspace (not the server's own folder).
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from tests.cli._helpers import REPO

mcp = pytest.importorskip("mcp")

KEY = "SECRET-KEY-MATERIAL"


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(config, workspace, a folder outside it the server runs in)."""
    ws = tmp_path / "ws"
    (ws / "secrets").mkdir(parents=True)
    (ws / "secrets" / "key").write_text(KEY + "\n")
    (ws / "docs").mkdir()
    (ws / "docs" / "readme.txt").write_text("hello from the workspace\n")
    (ws / "docs" / "notes").symlink_to(ws / "secrets", target_is_directory=True)
    (ws / "keylink").symlink_to(Path("secrets") / "key")
    # a sibling whose name starts like the workspace's: outside it
    (tmp_path / "ws-evil").mkdir()
    (tmp_path / "ws-evil" / "loot.txt").write_text("EVIL-SIBLING-LOOT\n")
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "secrets").mkdir(parents=True)  # a decoy where a cwd-relative guard looks
    config = tmp_path / "jianmu-test.yaml"
    config.write_text(
        f"runtime:\n  checkpoint_path: {tmp_path / '.jianmu' / 'runs.sqlite'}\n"
        f"execution:\n  workdir: {ws}\n"
        "guard:\n  tool_policy:\n    'read_file(path:secrets/*)': deny\n"
        "    'file_info(path:secrets/*)': deny\n",
        encoding="utf-8",
    )
    return config, ws, elsewhere


@asynccontextmanager
async def served(config: Path, cwd: Path) -> AsyncIterator[mcp.ClientSession]:
    from mcp.client.stdio import stdio_client

    env = {k: v for k, v in os.environ.items() if not k.startswith(("JIANMU_", "OPENAI_"))}
    env["PYTHONPATH"] = str(REPO)
    params = mcp.StdioServerParameters(
        command=sys.executable,
        args=["-m", "jianmu.cli", "mcp", "serve", "--config", str(config)],
        env=env, cwd=str(cwd),
    )
    async with stdio_client(params) as (read, write), mcp.ClientSession(read, write) as session:
        await session.initialize()
        yield session


def _text(result: object) -> str:
    return "\n".join(b.text for b in result.content if b.type == "text")  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_path_rules_hold_for_every_spelling_from_outside_the_workdir(
    project: tuple[Path, Path, Path],
) -> None:
    config, ws, elsewhere = project
    spellings = [
        "secrets/key",
        str(ws / "secrets" / "key"),  # absolute
        "../ws/secrets/key",  # climbs out and back in
        "./secrets/../secrets/key",
        "docs/notes/key",  # a folder symlink inside the workspace
        "keylink",  # a file symlink inside the workspace
        str(ws / "docs" / ".." / "secrets" / "key"),
    ]
    async with served(config, elsewhere) as session:
        ok = await session.call_tool("read_file", {"path": "docs/readme.txt"})
        assert not ok.is_error and "hello from the workspace" in _text(ok)
        for path in spellings:
            for tool in ("read_file", "file_info"):
                result = await session.call_tool(tool, {"path": path})
                text = _text(result)
                assert result.is_error, (tool, path, text)
                assert "refused by the guard" in text and KEY not in text, (tool, path, text)
        sibling = await session.call_tool("read_file", {"path": "../ws-evil/loot.txt"})
        assert sibling.is_error and "EVIL-SIBLING-LOOT" not in _text(sibling)
        assert "outside the workspace" in _text(sibling)


@pytest.mark.anyio
async def test_the_workdir_is_the_workspace_whatever_the_server_cwd(
    project: tuple[Path, Path, Path],
) -> None:
    config, _ws, elsewhere = project
    (elsewhere / "only-in-cwd.txt").write_text("the server's own folder\n")
    async with served(config, elsewhere) as session:
        listed = _text(await session.call_tool("list_dir", {"path": "."}))
        assert "docs/" in listed and "only-in-cwd.txt" not in listed
        found = _text(await session.call_tool("grep_search", {"pattern": "hello"}))
        assert "docs/readme.txt" in found
