"""Red team, ``jianmu mcp serve``: a client of the official MCP SDK calls what the config denies.

A real server process, started outside ``execution.workdir`` with ``--tools`` serving write
and execute tools. Denied tools are hidden and refused by name in every spelling; tools that
ask first are refused (nobody can answer); shell re-spellings and searches above a denied
folder are refused. The bypasses fixed in the other red-team files are driven here too.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.cli._helpers import REPO

mcp = pytest.importorskip("mcp")

pytestmark = pytest.mark.anyio

KEY = "KEY-MATERIAL-77"
TOOLS = "write_file,bash,str_replace,python_repl,read_file,grep_search,list_dir,glob_search"


def _text(result: object) -> str:
    return "\n".join(b.text for b in result.content if b.type == "text")  # type: ignore[attr-defined]


async def test_mcp_serve_holds_against_a_hostile_client(tmp_path: Path) -> None:
    from mcp.client.stdio import stdio_client

    ws = tmp_path / "ws"
    (ws / "secrets").mkdir(parents=True)
    (ws / "secrets" / "key").write_text(KEY + "\n")
    (ws / "docs").mkdir()
    (ws / "docs" / "k").symlink_to(ws / "secrets" / "key")
    config = tmp_path / "c.yaml"
    config.write_text(
        f"runtime:\n  checkpoint_path: {tmp_path / '.jianmu' / 'r.sqlite'}\n"
        f"execution:\n  workdir: {ws}\n"
        "guard:\n  tool_policy:\n    write_file: deny\n    'bash(rm *)': deny\n"
        "    'bash(ls*)': allow\n    'str_replace(path:secrets/*)': deny\n"
        "    'grep_search(path:secrets*)': deny\n    'glob_search(root:secrets*)': deny\n",
        encoding="utf-8",
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JIANMU_", "OPENAI_"))}
    env["PYTHONPATH"] = str(REPO)
    params = mcp.StdioServerParameters(
        command=sys.executable,
        args=["-m", "jianmu.cli", "mcp", "serve", "--config", str(config), "--tools", TOOLS],
        env=env, cwd=str(tmp_path),
    )
    async with stdio_client(params) as (read, write), mcp.ClientSession(read, write) as session:
        await session.initialize()
        listed = {t.name for t in (await session.list_tools()).tools}
        assert "write_file" not in listed and "bash" in listed
        refused = [
            ("write_file", {"path": "a.txt", "content": "x"}),
            ("WRITE_FILE", {"path": "a.txt", "content": "x"}),
            ("Write_File", {"path": "a.txt", "content": "x"}),
            ("functions.write_file", {"path": "a.txt", "content": "x"}),
            ("bash", {"command": "touch a.txt"}),  # asks first: nobody can answer
            ("bash", {"command": "rm secrets/key"}),
            ("BASH", {"command": "coproc { rm secrets/key; }"}),
            ("bash", {"command": "x='a[$(rm secrets/key)]'; (( x ))"}),
            ("bash", {"command": "ls; touch a.txt"}),
            ("bash", {"command": "ls", "cwd": "/"}),
            ("python_repl", {"code": "open('a.txt', 'w').write('x')"}),
            ("str_replace", {"path": "./secrets/key", "old": "KEY", "new": "PWN"}),
            ("grep_search", {"pattern": "KEY-MAT"}),
            ("grep_search", {"pattern": "KEY-MAT", "path": "."}),
            ("glob_search", {"pattern": "*", "root": "./secrets"}),
        ]
        for name, args in refused:
            result = await session.call_tool(name, args)
            assert result.is_error and KEY not in _text(result), (name, args, _text(result))
        result = await session.call_tool("grep_search", {"pattern": "KEY-MAT", "path": "docs"})
        assert KEY not in _text(result)  # the link docs/k is not followed
        result = await session.call_tool("bash", {"command": "ls"})
        assert not result.is_error and "secrets" in _text(result)
    assert sorted(p.name for p in ws.iterdir()) == ["docs", "secrets"]
    assert (ws / "secrets" / "key").read_text() == KEY + "\n"
