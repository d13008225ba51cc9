"""`python_repl`: run Python code in the sandbox, keeping variables between calls.

Why a state file rather than a long-lived interpreter: the `Sandbox` protocol runs one
command per ``exec`` (a local process group or a container exec), and the same tool may be
handed a different sandbox later. So each call is a fresh ``python -c`` process that reloads
the session from a pickle file in the sandbox's workspace and saves it again at the end. What
survives a call: picklable values, imported modules (re-imported by name), and functions and
classes defined in earlier cells (re-run from their source, so instances of them unpickle).
Names that cannot be kept (open files, generators, lambdas) are listed in the result. The host
never unpickles anything: only the sandboxed process reads the state file. One tool instance
is one session; the file is removed when the instance is garbage-collected, or by `reset()`.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import sys
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jianmu.errors import ToolExecutionError, ToolInputError, ToolTimeoutError
from jianmu.tools.builtin._repl_driver import DRIVER
from jianmu.tools.builtin._sandbox import SandboxedTool, is_local_sandbox
from jianmu.tools.calls import truncate_text

if TYPE_CHECKING:
    from jianmu.execution.sandbox import Sandbox

__all__ = ("PythonREPLTool",)

STATE_DIR = ".jianmu/python_repl"
"""Where session files live, relative to the sandbox workspace."""


def _remove_files(paths: set[Path]) -> None:
    for path in paths:
        with contextlib.suppress(OSError):
            path.unlink()
        # Drop .jianmu/python_repl and .jianmu when this was the last session in them.
        for folder in (path.parent, path.parent.parent):
            with contextlib.suppress(OSError):
                folder.rmdir()


class PythonREPLTool(SandboxedTool):
    """Run Python code like a REPL; variables persist across calls of this instance."""

    name = "python_repl"
    effect_tags = ("code_exec",)
    exec_timeout: float = 60.0
    """Seconds before the code's process group is killed."""
    timeout_seconds = 70.0
    max_result_length = 30_000

    def __init__(self) -> None:
        self._session = secrets.token_hex(8)
        self._cell = 0
        self._state_files: set[Path] = set()
        # Remove the session files when the tool goes away; a finalizer, not __del__, so the
        # set (not self) is what it keeps alive.
        self._finalizer = weakref.finalize(self, _remove_files, self._state_files)

    @property
    def state_path(self) -> str:
        """The session file, relative to the sandbox workspace."""
        return f"{STATE_DIR}/{self._session}.pkl"

    def reset(self) -> None:
        """Forget every variable: delete the session files and start a new session."""
        _remove_files(self._state_files)
        self._state_files.clear()
        self._session = secrets.token_hex(8)

    async def run(self, code: str) -> str:
        """Run Python 3 code in a sandboxed process, like a REPL cell.

        Use it for data processing, quick experiments and calculations that need more than a
        single expression. Variables, functions, classes and imports from earlier calls in
        the same session are still defined (names that cannot be pickled, like open files,
        are listed as not kept). Returns what the code printed, then anything on stderr under
        [stderr], then the repr of the last line's value under [value] when the last line is
        an expression; an exception or a syntax error is an error with its traceback. Runs
        are killed after 60 seconds.

        Args:
            code: Python code to run (one or more statements), e.g.
                'import math\\nx = math.pi\\nx * 2'.

        Returns:
            stdout, stderr and the last value.
        """
        return await self.run_in_default_sandbox(code=code)

    async def run_sandboxed(self, sandbox: Sandbox, code: str) -> str:  # type: ignore[override]
        """Run ``code`` through ``sandbox.exec`` and report its output and last value.

        Raises:
            ToolInputError: ``code`` is empty.
            ToolTimeoutError: the code ran past ``exec_timeout`` (its processes were killed).
            ToolExecutionError: the code raised, or had a syntax error (traceback included).
        """
        if not isinstance(code, str) or not code.strip():
            raise ToolInputError("code is empty; give Python statements such as 'print(1 + 1)'")
        self._cell += 1
        marker = f"\x1e@@JIANMU-REPL-{secrets.token_hex(8)}@@"
        request = {"code": code, "state": self.state_path, "cell": self._cell, "marker": marker}
        self._state_files.add(Path(sandbox.workspace) / self.state_path)
        local = is_local_sandbox(sandbox)
        python = getattr(sandbox, "python", sys.executable) if local else "python3"
        env = {"PYTHONIOENCODING": "utf-8", "PYTHONDONTWRITEBYTECODE": "1"}
        result = await sandbox.exec(
            [python, "-c", DRIVER], stdin=json.dumps(request), env=env, timeout=self.exec_timeout
        )
        stdout, found, tail = result.stdout.rpartition(marker)
        report: dict[str, Any] | None = None
        if found:
            with contextlib.suppress(ValueError):
                report = json.loads(tail.strip().splitlines()[0])
            stdout = stdout[:-1] if stdout.endswith("\n") else stdout
        else:
            stdout = result.stdout
        limit = max(self.max_result_length // 2, 1000)
        stdout, _ = truncate_text(stdout, limit)
        stderr, _ = truncate_text(result.stderr, limit)
        sections = []
        if stdout.strip():
            sections.append(stdout.rstrip("\n"))
        if stderr.strip():
            sections.append("[stderr]\n" + stderr.rstrip("\n"))
        so_far = "\n".join(sections)
        if result.timed_out:
            raise ToolTimeoutError(
                f"the code ran past {self.exec_timeout:g}s and was killed; variables set in "
                "this call are lost" + (f"\noutput so far:\n{so_far}" if so_far else "")
            )
        if report is None:
            raise ToolExecutionError(
                f"the Python process ended abnormally (exit code {result.exit_code})"
                + (f"\n{so_far}" if so_far else "")
            )
        notes = []
        if report.get("restore_failed"):
            notes.append("could not restore: " + "; ".join(report["restore_failed"]))
        if report.get("dropped"):
            notes.append("not kept for the next call: " + "; ".join(report["dropped"]))
        if report.get("error"):
            raise ToolExecutionError(
                report["error"].rstrip("\n")
                + (f"\n[output before the error]\n{so_far}" if so_far else "")
                + "".join(f"\n[note] {n}" for n in notes)
            )
        value = report.get("value")
        if value is not None and not sections and not notes:
            return str(value)
        if value is not None:
            sections.append(f"[value]\n{value}")
        sections.extend(f"[note] {n}" for n in notes)
        return "\n".join(sections) if sections else "(no output)"

    def __repr__(self) -> str:
        return f"<PythonREPLTool session={self._session} cells={self._cell}>"

