"""The sandbox that `bash` and `python_repl` use when no `ToolRunner` is given."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from jianmu.execution.workspace import current_workspace

if TYPE_CHECKING:
    from jianmu.execution.local_sandbox import LocalSandbox

__all__ = ("default_sandbox", "is_local_sandbox")


def default_sandbox(workspace: str | os.PathLike[str] | None = None) -> LocalSandbox:
    """A `LocalSandbox` on ``workspace`` (default: the current workspace), no extra limits."""
    from jianmu.execution.local_sandbox import LocalSandbox

    return LocalSandbox(Path(workspace) if workspace is not None else current_workspace())


def is_local_sandbox(sandbox: object) -> bool:
    """Whether ``sandbox`` runs on this host, where this interpreter's Python is usable."""
    from jianmu.execution.local_sandbox import LocalSandbox

    return isinstance(sandbox, LocalSandbox)
