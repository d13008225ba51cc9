"""Tests for jianmu/tools/builtin/python_repl.py (and its driver, _repl_driver.py)."""

from __future__ import annotations

import gc
import secrets
from pathlib import Path
from typing import Any

import anyio
import pytest

from jianmu.errors import ToolExecutionError, ToolInputError, ToolTimeoutError
from jianmu.execution.local_sandbox import LocalSandbox
from jianmu.execution.sandbox import ExecResult
from jianmu.tools.builtin import PythonREPLTool
from jianmu.tools.builtin.python_repl import STATE_DIR

pytestmark = pytest.mark.anyio


async def test_stdout_stderr_and_last_value(ws: Path) -> None:
    repl = PythonREPLTool()
    out = await repl.execute(
        {"code": "import sys\nprint('hello')\nprint('careful', file=sys.stderr)\n6 * 7"}
    )
    assert out == "hello\n[stderr]\ncareful\n[value]\n42"
    assert await repl.execute({"code": "'just a value'"}) == "'just a value'"
    assert await repl.execute({"code": "x = 1"}) == "(no output)"
    assert await repl.execute({"code": "None"}) == "(no output)"


async def test_state_is_kept_across_calls(ws: Path) -> None:
    repl = PythonREPLTool()
    await repl.execute(
        {
            "code": (
                "import math as m\n"
                "from collections import Counter\n"
                "data = {'a': [1, 2, 3]}\n"
                "def double(v):\n    return v * 2\n"
                "@staticmethod\ndef decorated():\n    return 'deco'\n"
                "class Point:\n    def __init__(self, x):\n        self.x = x\n"
                "p = Point(5)\n"
            )
        }
    )
    out = await repl.execute(
        {"code": "(double(p.x), m.floor(m.pi), data['a'][-1], Counter('aab')['a'])"}
    )
    assert out == "(10, 3, 3, 2)"
    await repl.execute({"code": "import functools\n@functools.cache\ndef sq(v):\n    return v * v"})
    assert await repl.execute({"code": "sq(9), decorated()"}) == "(81, 'deco')"
    # Redefining a function replaces it for the next call.
    await repl.execute({"code": "def double(v):\n    return v * 3"})
    assert await repl.execute({"code": "double(2)"}) == "6"
    # Assignments made before an exception stay, as in a real REPL.
    with pytest.raises(ToolExecutionError, match="ZeroDivisionError"):
        await repl.execute({"code": "kept = 'yes'\n1 / 0"})
    assert await repl.execute({"code": "kept"}) == "'yes'"


async def test_each_instance_is_its_own_session(ws: Path) -> None:
    a, b = PythonREPLTool(), PythonREPLTool()
    await a.execute({"code": "secret = 1"})
    with pytest.raises(ToolExecutionError, match="NameError: name 'secret' is not defined"):
        await b.execute({"code": "secret"})


async def test_syntax_error_is_clear(ws: Path) -> None:
    with pytest.raises(ToolExecutionError) as info:
        await PythonREPLTool().execute({"code": "def broken(:\n    pass"})
    message = str(info.value)
    assert message.startswith("SyntaxError: ")
    assert "line 1" in message and "def broken(:" in message


async def test_exception_shows_a_traceback_with_the_source_line(ws: Path) -> None:
    with pytest.raises(ToolExecutionError) as info:
        await PythonREPLTool().execute({"code": "print('before')\nvalue = {}['missing']"})
    message = str(info.value)
    assert 'File "<cell 1>", line 2' in message
    assert "value = {}['missing']" in message
    assert "KeyError: 'missing'" in message
    assert "[output before the error]\nbefore" in message


async def test_unpicklable_names_are_reported(ws: Path) -> None:
    repl = PythonREPLTool()
    out = await repl.execute({"code": "gen = (i for i in range(3))\nn = 4"})
    assert "not kept for the next call: gen (generator" in out
    assert await repl.execute({"code": "n"}) == "4"


async def test_sys_exit_and_replaced_stdout_do_not_break_the_session(ws: Path) -> None:
    repl = PythonREPLTool()
    assert await repl.execute({"code": "a = 1\nimport sys\nsys.exit(0)"}) == "(no output)"
    assert await repl.execute({"code": "import io, sys\nsys.stdout = io.StringIO()\na"}) == "1"


async def test_marker_cannot_be_forged_from_user_output(ws: Path) -> None:
    out = await PythonREPLTool().execute(
        {"code": "print('\\x1e@@JIANMU-REPL-0000000000000000@@{\"value\": \"forged\"}')\n2"}
    )
    assert out.endswith("[value]\n2")


async def test_timeout_kills_the_code(ws: Path) -> None:
    repl = PythonREPLTool()
    repl.exec_timeout = 1
    with anyio.fail_after(20):
        with pytest.raises(ToolTimeoutError, match="ran past 1s"):
            await repl.execute({"code": "while True:\n    pass"})


async def test_empty_code(ws: Path) -> None:
    with pytest.raises(ToolInputError, match="code is empty"):
        await PythonREPLTool().execute({"code": "   "})


async def test_session_file_lives_in_the_sandbox_workspace_and_is_removed(ws: Path) -> None:
    repl = PythonREPLTool()
    await repl.execute({"code": "x = 1"})
    state = ws / repl.state_path
    assert state.is_file() and repl.state_path.startswith(STATE_DIR)
    repl.reset()
    assert not state.exists()
    with pytest.raises(ToolExecutionError, match="NameError"):
        await repl.execute({"code": "x"})
    state = ws / repl.state_path
    assert state.is_file()
    del repl
    gc.collect()
    assert not state.exists()
    assert not (ws / ".jianmu").exists()


async def test_run_sandboxed_with_another_sandbox(tmp_path: Path) -> None:
    box = LocalSandbox(tmp_path / f"box-{secrets.token_hex(3)}")
    async with box:
        repl = PythonREPLTool()
        await repl.run_sandboxed(box, code="total = sum(range(10))")
        assert await repl.run_sandboxed(box, code="total") == "45"
        assert (box.workspace / repl.state_path).is_file()


async def test_metadata_matches_the_issue() -> None:
    tool = PythonREPLTool()
    assert tool.category == "execute" and tool.permission == "user_confirm"
    assert tool.effect_tags == ("code_exec",) and tool.parallel_safe is False
    assert tool.sandboxed
    tool.check_definition(require_parameter_descriptions=True)


async def test_cells_import_from_the_workspace_and_pythonpath(tmp_path: Path) -> None:
    """The driver runs isolated (-I), but a cell sees what `python -c` in the workspace would."""
    ws = tmp_path / f"box-{secrets.token_hex(3)}"
    (ws / "lib").mkdir(parents=True)
    (ws / "local_mod.py").write_text("WHERE = 'workspace'\n")
    (ws / "lib" / "path_mod.py").write_text("WHERE = 'pythonpath'\n")
    async with LocalSandbox(ws, env={"PYTHONPATH": str(ws / "lib")}) as box:
        repl = PythonREPLTool()
        out = await repl.run_sandboxed(
            box, code="import local_mod, path_mod\nlocal_mod.WHERE, path_mod.WHERE"
        )
        assert out == "('workspace', 'pythonpath')"
        assert await repl.run_sandboxed(box, code="path_mod.WHERE") == "'pythonpath'"
        assert await repl.run_sandboxed(box, code="print('é')") == "é"


async def test_a_process_killed_for_memory_says_so(tmp_path: Path) -> None:
    class Killed:
        workspace = tmp_path

        async def exec(self, command: Any, **options: Any) -> ExecResult:
            return ExecResult(exit_code=-9, oom_killed=True)

    with pytest.raises(ToolExecutionError, match="exceeding the sandbox's memory limit"):
        await PythonREPLTool().run_sandboxed(Killed(), code="big = bytearray(10**10)")
