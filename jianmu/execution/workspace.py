"""The workspace root that file tools are confined to, carried by a context variable."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path

__all__ = ("current_workspace", "use_workspace")

# None means "not set": the current folder, read at call time so `chdir` is honoured.
_WORKSPACE: ContextVar[Path | None] = ContextVar("jianmu_workspace", default=None)


def current_workspace() -> Path:
    """Return the workspace root for this context: the one set by `use_workspace`, else cwd."""
    root = _WORKSPACE.get()
    return root if root is not None else Path.cwd()


@contextlib.contextmanager
def use_workspace(path: str | os.PathLike[str], *, check: bool = True) -> Iterator[Path]:
    """Make ``path`` the workspace root inside the ``with`` block (this task and its children).

    ``check=False`` skips the existence check, for a caller that made the folder itself (the
    `ToolRunner`, once, not on every call).

    Raises:
        ValueError: ``path`` is not an existing folder.
    """
    root = path if isinstance(path, Path) and not check else Path(path).expanduser().absolute()
    if check and not root.is_dir():
        raise ValueError(f"workspace {str(path)!r} is not an existing folder; create it first")
    token = _WORKSPACE.set(root)
    try:
        yield root
    finally:
        _WORKSPACE.reset(token)
