"""The built-in tools under a `ToolRunner`: its workdir is the workspace root they see."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jianmu.constraints import ExecutionConstraints
from jianmu.errors import ToolInputError, ToolTimeoutError
from jianmu.execution.runner import ToolRunner
from jianmu.tools.builtin import BashTool, PythonREPLTool, ReadFileTool, WriteFileTool

pytestmark = pytest.mark.anyio


async def test_file_tools_use_the_runner_workdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the current folder is not the workspace here
    async with ToolRunner(ExecutionConstraints(workdir=str(work))) as runner:
        await WriteFileTool().execute({"path": "notes/a.txt", "content": "hi\n"}, runner=runner)
        assert (work / "notes" / "a.txt").read_text() == "hi\n"
        assert not (elsewhere / "notes").exists()
        assert await ReadFileTool().execute({"path": "notes/a.txt"}, runner=runner) == "hi\n"
        with pytest.raises(ToolInputError, match="outside the workspace"):
            await ReadFileTool().execute({"path": "../elsewhere"}, runner=runner)


async def test_bash_and_python_run_in_the_runner_sandbox(tmp_path: Path) -> None:
    work = tmp_path / "work"
    async with ToolRunner(ExecutionConstraints(workdir=str(work))) as runner:
        pwd = await BashTool().execute({"command": "pwd"}, runner=runner)
        assert pwd == os.path.realpath(work)
        repl = PythonREPLTool()
        await repl.execute({"code": "n = 21"}, runner=runner)
        assert await repl.execute({"code": "n * 2"}, runner=runner) == "42"
        assert (work / repl.state_path).is_file()


async def test_the_runner_timeout_bounds_bash(tmp_path: Path) -> None:
    execution = ExecutionConstraints(workdir=str(tmp_path), timeout_s=1)
    async with ToolRunner(execution) as runner:
        with pytest.raises(ToolTimeoutError):
            await BashTool().execute({"command": "sleep 30"}, runner=runner)
