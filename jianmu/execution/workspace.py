"""The workspace root that tools are confined to, and the one resolver of tool paths.

The root is carried by a context variable (`use_workspace`, set by the `ToolRunner` from
``execution.workdir``); `effective_root` gives it for a configured workdir. Every place that
turns a tool's path argument into a file — the file tools, the guard's path rules, the MCP
server, a sandbox's ``cwd`` — goes through `locate` / `resolve_tool_path`, so they all agree on
which file a path names.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from contextvars import ContextVar, Token
from dataclasses import dataclass
from pathlib import Path

from jianmu.errors import PathEscapeError, ToolExecutionError, ToolInputError

__all__ = (
    "ToolPath",
    "current_workspace",
    "effective_root",
    "is_inside",
    "locate",
    "resolve_tool_path",
    "use_workspace",
)

# None means "not set": the current folder, read at call time so `chdir` is honoured.
_WORKSPACE: ContextVar[Path | None] = ContextVar("jianmu_workspace", default=None)


def current_workspace() -> Path:
    """Return the workspace root for this context: the one set by `use_workspace`, else cwd."""
    root = _WORKSPACE.get()
    return root if root is not None else Path.cwd()


def effective_root(workdir: str | os.PathLike[str] | None = None) -> Path:
    """The absolute workspace root: ``workdir`` (``~`` expanded, relative to cwd) if given,
    else `current_workspace()`. Symlinks are kept; `locate` resolves them."""
    root = Path(workdir).expanduser() if workdir is not None else current_workspace()
    return root.absolute()


@contextlib.contextmanager
def use_workspace(path: str | os.PathLike[str], *, check: bool = True) -> Iterator[Path]:
    """Make ``path`` the workspace root inside the ``with`` block (this task and its children).

    ``check=False`` skips the existence check, for a caller that made the folder itself (the
    `ToolRunner`, once, not on every call).

    Raises:
        ValueError: ``path`` is not an existing folder.
    """
    root = path if isinstance(path, Path) and not check else effective_root(path)
    if check and not root.is_dir():
        raise ValueError(f"workspace {str(path)!r} is not an existing folder; create it first")
    token = _WORKSPACE.set(root)
    try:
        yield root
    finally:
        _WORKSPACE.reset(token)


def set_workspace(root: Path) -> Token[Path | None]:
    """Make the absolute, existing ``root`` the workspace root until `reset_workspace`.

    The bare form of `use_workspace` for the `ToolRunner`'s per-call path (no generator).
    """
    return _WORKSPACE.set(root)


def reset_workspace(token: Token[Path | None]) -> None:
    """Undo the `set_workspace` that returned ``token``."""
    _WORKSPACE.reset(token)


def is_inside(path: str, root: str) -> bool:
    """Whether ``path`` is ``root`` or below it (``/ws-evil`` is not below ``/ws``)."""
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _relative(path: str, root: str) -> str:
    """``path`` relative to ``root`` with ``/`` separators ("." for the root itself)."""
    return os.path.relpath(path, root).replace(os.sep, "/")


@dataclass(frozen=True)
class ToolPath:
    """Where a tool's path argument leads, under one workspace root."""

    given: str
    """The path as the model wrote it."""
    base: str
    """The absolute workspace root as configured (it may be reached through a symlink)."""
    root: str
    """The real (symlink-free) workspace root."""
    lexical: str
    """The path joined to `base` and normalised, no symlink followed."""
    real: str
    """The path's real location: its existing part with every symlink followed."""

    @property
    def inside(self) -> bool:
        """Whether the real location is the root or below it."""
        return is_inside(self.real, self.root)

    @property
    def rel(self) -> str:
        """The real location relative to the real root ("." for the root itself)."""
        return _relative(self.real, self.root)

    def forms(self) -> tuple[str, str]:
        """The lexical and the real location, each relative to its root when inside it,
        else absolute: what a path rule is matched against."""
        lexical = self.lexical
        lexical = _relative(lexical, self.base) if is_inside(lexical, self.base) else lexical
        real = self.rel if self.inside else self.real
        return lexical.replace(os.sep, "/"), real.replace(os.sep, "/")


def locate(path: str, root: str | os.PathLike[str] | None = None) -> ToolPath:
    """Where ``path`` leads from the workspace ``root`` (default `effective_root`), unchecked.

    Relative paths are taken from the root, absolute ones as they are.

    Raises:
        OSError, ValueError: the path cannot be resolved (a symlink loop, a NUL character).
    """
    base = os.fspath(effective_root(root))
    real_root = os.path.realpath(base)
    candidate = os.path.join(base, path)  # an absolute path replaces the base
    return ToolPath(
        given=path, base=base, root=real_root,
        lexical=os.path.normpath(candidate), real=os.path.realpath(candidate),
    )


def resolve_tool_path(path: str, root: str | os.PathLike[str] | None = None) -> ToolPath:
    """Resolve a tool's ``path`` argument and refuse it unless its real location is inside
    the workspace ``root`` (default `effective_root`). The path need not exist (for writes).

    Raises:
        ToolInputError: ``path`` is not a string, is empty or contains a NUL character.
        PathEscapeError: ``path`` leads outside the workspace (``..``, an absolute path, a
            symlink, or ``~``).
        ToolExecutionError: the workspace root is not an existing folder.
    """
    if not isinstance(path, str):
        raise ToolInputError(f"path must be a string, got {type(path).__name__}")
    if "\x00" in path:
        raise ToolInputError(f"path {path!r} contains a NUL character")
    if not path.strip():
        raise ToolInputError("path is empty; give a path relative to the workspace root")
    if path.startswith("~"):
        # `~` is the user's home, which is outside the workspace; never expand it silently.
        raise PathEscapeError(
            f"path {path!r} refers to a home folder, outside the workspace; "
            "give a path relative to the workspace root"
        )
    where = locate(path, root)
    if not os.path.isdir(where.root):
        raise ToolExecutionError(f"workspace root {where.base!r} is not an existing folder")
    if not where.inside:
        how = "through a symbolic link, " if is_inside(where.lexical, where.base) else ""
        raise PathEscapeError(
            f"path {path!r} leads {how}outside the workspace {where.base!r}; give a path "
            "relative to the workspace root whose real location is inside it"
        )
    return where
