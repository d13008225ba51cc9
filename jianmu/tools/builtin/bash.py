"""`bash`: run a shell command in the sandbox, with a timeout that kills its process group.

`SandboxedTool` is the base of the built-ins that run code in a sandbox (`bash`,
`python_repl`): its schema comes from ``run``, and without a `ToolRunner` it runs in a local
sandbox on the current workspace (`default_sandbox`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

from pydantic import Field

from jianmu.errors import ToolExecutionError, ToolInputError, ToolTimeoutError
from jianmu.execution.runner import current_workspace
from jianmu.tools.base import Tool
from jianmu.tools.builtin._paths import PathEscapeError, display_path, resolve_path
from jianmu.tools.calls import truncate_text
from jianmu.tools.schema import FunctionSchema, function_schema

if TYPE_CHECKING:
    from collections.abc import Mapping

    from jianmu.execution.local_sandbox import LocalSandbox
    from jianmu.execution.sandbox import ExecResult, Sandbox

__all__ = (
    "BashTool",
    "SandboxedTool",
    "default_sandbox",
    "exec_output",
    "format_exec_output",
    "is_local_sandbox",
)


def default_sandbox(workspace: str | os.PathLike[str] | None = None) -> LocalSandbox:
    """A `LocalSandbox` on ``workspace`` (default: the current workspace), no extra limits."""
    from jianmu.execution.local_sandbox import LocalSandbox

    return LocalSandbox(Path(workspace) if workspace is not None else current_workspace())


def is_local_sandbox(sandbox: object) -> bool:
    """Whether ``sandbox`` runs on this host, where this interpreter's Python is usable."""
    from jianmu.execution.local_sandbox import LocalSandbox

    return isinstance(sandbox, LocalSandbox)


class SandboxedTool(Tool):
    """A built-in that runs code in a sandbox (``run_sandboxed``); ``run`` describes it.

    The input schema, the description and the output schema come from the signature and the
    docstring of the subclass's ``run``, computed once per class, and arguments are checked
    with the same pydantic model, as for a `FunctionTool`.
    """

    category = "execute"
    permission = "user_confirm"
    sandboxed = True
    _function_schema: ClassVar[FunctionSchema]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        schema = function_schema(cls.run)
        cls._function_schema = schema
        cls.input_schema = schema.parameters
        cls.description = schema.description
        cls.output_schema = schema.output_schema

    def validate_args(self, args: Any) -> dict[str, Any]:
        """Validate with the pydantic model built from ``run``'s signature (lax mode).

        Raises:
            ToolInputError: listing every problem, so that the model can correct its call.
        """
        return self._function_schema.validate(self.name, args)

    async def run_in_default_sandbox(self, **kwargs: Any) -> Any:
        """``run_sandboxed`` in a local sandbox on the current workspace (no `ToolRunner`)."""
        sandbox = default_sandbox()
        await sandbox.start()
        try:
            return await self.run_sandboxed(sandbox, **kwargs)
        finally:
            await sandbox.close()


_MAX_TIMEOUT = 600.0
# bash when the sandbox has it (models write bash syntax), /bin/sh otherwise; `exec` keeps
# the shell the group leader, so the timeout's group kill still reaches everything.
_SHELL = (
    "/bin/sh",
    "-c",
    'if command -v bash >/dev/null 2>&1; then exec bash -c "$0"; else exec /bin/sh -c "$0"; fi',
)


def format_exec_output(result: ExecResult, limit: int) -> str:
    """stdout, then stderr under a ``[stderr]`` heading, each cut to ``limit`` with a note."""
    parts = []
    stdout, _ = truncate_text(result.stdout, limit)
    stderr, _ = truncate_text(result.stderr, limit)
    if stdout:
        parts.append(stdout.rstrip("\n"))
    if stderr.strip():
        parts.append("[stderr]\n" + stderr.rstrip("\n"))
    return "\n".join(parts)


def sandbox_cwd(sandbox: Sandbox, cwd: str | None) -> str | None:
    """Check ``cwd`` against the sandbox's workspace (symlinks included); return it relative."""
    if cwd is None or cwd.strip() in ("", "."):
        return None
    root = os.path.realpath(sandbox.workspace)
    try:
        real = resolve_path(cwd, root=root)
    except PathEscapeError as exc:
        raise ToolInputError(f"cwd: {exc}") from None
    if not os.path.isdir(real):
        raise ToolInputError(f"cwd {cwd!r} is not an existing folder of the workspace")
    rel = display_path(real, root)
    return None if rel == "." else rel


class BashTool(SandboxedTool):
    """Run a shell command in the workspace."""

    name = "bash"
    effect_tags = ("shell",)
    # The per-call `timeout` kills the process group first; this outer bound only backs it up.
    timeout_seconds = _MAX_TIMEOUT + 10
    max_result_length = 30_000

    async def run(
        self,
        command: str,
        cwd: str | None = None,
        timeout: Annotated[float, Field(gt=0, le=_MAX_TIMEOUT)] = 60,
    ) -> str:
        """Run a shell command (/bin/sh -c, or bash when installed) in the workspace.

        Use it to run programs, tests, builds or git. Returns stdout, then stderr under a
        [stderr] heading; a non-zero exit code is an error showing the code, stderr and
        stdout. Long output is cut with a note of how much was dropped.

        Args:
            command: The shell command to run.
            cwd: Folder to run in, relative to the workspace root (default: the root).
            timeout: Seconds before the command and every process it started are killed.

        Returns:
            The command's stdout and stderr.
        """
        return await self.run_in_default_sandbox(
            command=command, cwd=cwd, timeout=timeout
        )

    def read_only_mounts(self, sandbox: Sandbox) -> Mapping[str | int, str]:
        """Host folders shown read-only to each command (none here; see the skills' bash)."""
        return {}

    async def run_sandboxed(  # type: ignore[override]
        self, sandbox: Sandbox, command: str, cwd: str | None = None, timeout: float = 60
    ) -> str:
        """Run ``command`` through ``sandbox.exec`` and turn its result into text or an error.

        Raises:
            ToolInputError: empty command, bad timeout, or a ``cwd`` outside the workspace.
            ToolTimeoutError: the command ran past ``timeout`` (its process group was killed).
            ToolExecutionError: the command exited with a non-zero code.
        """
        if not isinstance(command, str) or not command.strip():
            raise ToolInputError("command is empty; give a shell command such as 'ls -la'")
        if not 0 < timeout <= _MAX_TIMEOUT:
            raise ToolInputError(
                f"timeout must be in (0, {_MAX_TIMEOUT:g}] seconds, got {timeout!r}"
            )
        rel = sandbox_cwd(sandbox, cwd)
        mounts = self.read_only_mounts(sandbox)
        if mounts:
            result = await sandbox.exec(  # type: ignore[call-arg]
                [*_SHELL, command], cwd=rel, timeout=timeout, ro_mounts=mounts
            )
        else:
            result = await sandbox.exec([*_SHELL, command], cwd=rel, timeout=timeout)
        return exec_output(
            result, max(self.max_result_length // 2, 1000),
            timed_out=f"command timed out after {timeout:g}s and was killed with every process "
            "it started; raise timeout or run something shorter",
        )


def exec_output(result: ExecResult, limit: int, *, timed_out: str, what: str = "command") -> str:
    """A finished command's output (`format_exec_output`), or the error it ended in.

    Args:
        result: What the sandbox returned.
        limit: Characters kept of each of stdout and stderr.
        timed_out: The message of the timeout error.
        what: What ran, in the other errors ("command", "script").

    Raises:
        ToolTimeoutError: it ran past its timeout (its process group was killed).
        ToolExecutionError: it was killed for memory, or exited with a non-zero code.
    """
    output = format_exec_output(result, limit)
    if result.timed_out:
        raise ToolTimeoutError(timed_out + (f"\noutput so far:\n{output}" if output else ""))
    if result.oom_killed:
        raise ToolExecutionError(
            f"{what} was killed for exceeding the sandbox's memory limit"
            + (f"\n{output}" if output else "")
        )
    if result.exit_code != 0:
        raise ToolExecutionError(
            f"{what} exited with code {result.exit_code}"
            + (f"\n{output}" if output else " and printed nothing")
        )
    return output if output else "(no output; exit code 0)"
