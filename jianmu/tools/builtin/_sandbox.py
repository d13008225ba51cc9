"""What `bash` and `python_repl` share: their base class and the sandbox used without a runner."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from jianmu.execution.workspace import current_workspace
from jianmu.tools.base import Tool
from jianmu.tools.schema import FunctionSchema, function_schema

if TYPE_CHECKING:
    from jianmu.execution.local_sandbox import LocalSandbox

__all__ = ("SandboxedTool", "default_sandbox", "is_local_sandbox")


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
