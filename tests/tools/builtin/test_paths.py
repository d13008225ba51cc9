"""Path-escape attempts against every file tool (jianmu/tools/builtin/_paths.py).

Each attempt must be refused (or, for searches, must not show anything from outside), and a
spy on every open/list call proves nothing outside the workspace was read; a snapshot of the
outside folder proves nothing there was written.
"""

from __future__ import annotations

import builtins
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from jianmu.errors import ToolError, ToolInputError
from jianmu.tools.base import Tool
from jianmu.tools.builtin import (
    BashTool,
    FileInfoTool,
    GlobSearchTool,
    GrepSearchTool,
    ListDirTool,
    ReadFileTool,
    StrReplaceTool,
    WriteFileTool,
)
from jianmu.tools.builtin import files as file_tools
from jianmu.tools.builtin._paths import PathEscapeError, resolve_path

OUT = "@OUT@"  # replaced by the outside folder's absolute path
SECRET = "TOP-SECRET-OUTSIDE"  # the content of outside/secret.txt (see conftest.py)


def _snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else b"", p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
    }


@pytest.fixture
def layout(ws: Path, outside: Path) -> Path:
    """Symlinks inside the workspace that lead out, plus an honest folder."""
    (ws / "inner").mkdir()
    (ws / "inner" / "ok.txt").write_text("fine\n")
    (ws / "link_out").symlink_to(outside, target_is_directory=True)
    (ws / "secret_link").symlink_to(outside / "secret.txt")
    (ws / "abs_link").symlink_to("/etc", target_is_directory=True)
    (ws / "dangling").symlink_to(outside / "created.txt")
    (ws / "inner" / "up").symlink_to("../..", target_is_directory=True)
    return ws


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch, outside: Path) -> Iterator[list[str]]:
    """Record every path under ``outside`` that anything opens or lists."""
    touched: list[str] = []
    real_out = os.path.realpath(outside)

    def note(path: Any) -> None:
        if isinstance(path, int):
            return
        real = os.path.realpath(os.fspath(path))
        if real == real_out or real.startswith(real_out + os.sep):
            touched.append(real)

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        def spying(path: Any, *args: Any, **kwargs: Any) -> Any:
            if kwargs.get("dir_fd") is None:
                note(path)
            return fn(path, *args, **kwargs)

        return spying

    monkeypatch.setattr(os, "open", wrap(os.open))
    monkeypatch.setattr(builtins, "open", wrap(builtins.open))
    monkeypatch.setattr(os, "scandir", wrap(os.scandir))
    monkeypatch.setattr(os, "listdir", wrap(os.listdir))
    yield touched


ATTEMPTS: list[tuple[type[Tool], dict[str, Any]]] = [
    (ReadFileTool, {"path": "../outside/secret.txt"}),
    (ReadFileTool, {"path": f"{OUT}/secret.txt"}),
    (ReadFileTool, {"path": "/etc/passwd"}),
    (ReadFileTool, {"path": "secret_link"}),
    (ReadFileTool, {"path": "link_out/secret.txt"}),
    (ReadFileTool, {"path": "inner/../../outside/secret.txt"}),
    (ReadFileTool, {"path": "inner/up/outside/secret.txt"}),
    (ReadFileTool, {"path": "abs_link/passwd"}),
    (ReadFileTool, {"path": "~/.bashrc"}),
    (ReadFileTool, {"path": "inner/\x00/../../outside/secret.txt"}),
    (WriteFileTool, {"path": "../outside/new.txt", "content": "x"}),
    (WriteFileTool, {"path": f"{OUT}/new.txt", "content": "x"}),
    (WriteFileTool, {"path": "link_out/new.txt", "content": "x"}),
    (WriteFileTool, {"path": "link_out/sub/deep.txt", "content": "x"}),
    (WriteFileTool, {"path": "secret_link", "content": "overwritten"}),
    (WriteFileTool, {"path": "secret_link", "content": "more", "mode": "append"}),
    (WriteFileTool, {"path": "dangling", "content": "x"}),
    (StrReplaceTool, {"path": "secret_link", "old": "TOP", "new": "BOTTOM"}),
    (StrReplaceTool, {"path": "../outside/secret.txt", "old": "TOP", "new": "BOTTOM"}),
    (ListDirTool, {"path": ".."}),
    (ListDirTool, {"path": "link_out"}),
    (ListDirTool, {"path": OUT}),
    (FileInfoTool, {"path": "../outside/secret.txt"}),
    (FileInfoTool, {"path": "secret_link"}),
    (GlobSearchTool, {"pattern": "*", "root": ".."}),
    (GlobSearchTool, {"pattern": "../outside/*"}),
    (GlobSearchTool, {"pattern": f"{OUT}/*"}),
    (GrepSearchTool, {"pattern": "SECRET", "path": "link_out"}),
    (GrepSearchTool, {"pattern": "SECRET", "path": "../outside"}),
    (GrepSearchTool, {"pattern": "SECRET", "path": "secret_link"}),
    (BashTool, {"command": "pwd", "cwd": ".."}),
    (BashTool, {"command": "pwd", "cwd": "link_out"}),
]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("tool_cls", "args"), ATTEMPTS, ids=[f"{c().name}:{a}" for c, a in ATTEMPTS]
)
async def test_escape_is_refused(
    tool_cls: type[Tool], args: dict[str, Any], layout: Path, outside: Path, spy: list[str]
) -> None:
    args = {k: v.replace(OUT, str(outside)) if isinstance(v, str) else v for k, v in args.items()}
    before = _snapshot(outside)
    spy.clear()  # the snapshot itself lists the outside folder
    with pytest.raises(ToolInputError) as info:
        await tool_cls().execute(args)
    message = str(info.value)
    assert SECRET not in message
    assert any(word in message for word in ("outside", "NUL", "home folder")), message
    assert spy == [], f"opened outside the workspace: {spy}"
    assert _snapshot(outside) == before


@pytest.mark.anyio
async def test_searches_skip_symlinks_that_lead_out(layout: Path, spy: list[str]) -> None:
    (layout / "inner" / "note.txt").write_text("SECRET? no, TOP-SECRET-INSIDE\n")
    grep = await GrepSearchTool().execute({"pattern": "TOP-SECRET"})
    assert grep == "inner/note.txt:1:SECRET? no, TOP-SECRET-INSIDE"
    globbed = await GlobSearchTool().execute({"pattern": "**/*"})
    assert "secret" not in globbed
    assert set(globbed.splitlines()) == {"inner/note.txt", "inner/ok.txt"}
    listing = await ListDirTool().execute({"depth": 3})
    assert "link_out@ -> outside" in listing
    assert "secret_link@ -> outside" in listing
    assert SECRET not in listing
    assert spy == []


@pytest.mark.anyio
async def test_paths_inside_are_allowed(layout: Path) -> None:
    # Absolute paths inside the root, `..` that stays inside, and inner symlinks all work.
    assert await ReadFileTool().execute({"path": str(layout / "inner" / "ok.txt")}) == "fine\n"
    assert await ReadFileTool().execute({"path": "inner/../inner/ok.txt"}) == "fine\n"
    (layout / "ok_link").symlink_to("inner/ok.txt")
    assert await ReadFileTool().execute({"path": "ok_link"}) == "fine\n"
    await WriteFileTool().execute({"path": "ok_link", "content": "changed\n"})
    assert (layout / "inner" / "ok.txt").read_text() == "changed\n"
    assert (layout / "ok_link").is_symlink()


def test_resolve_rejects_empty_and_non_strings(layout: Path) -> None:
    with pytest.raises(ToolInputError, match="empty"):
        resolve_path("  ")
    with pytest.raises(ToolInputError, match="must be a string"):
        resolve_path(3)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_folder_swapped_for_a_symlink_after_the_check_is_caught(
    layout: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A TOCTOU race: the folder becomes a symlink to outside between check and open."""
    (layout / "d").mkdir()
    (layout / "d" / "secret.txt").write_text("inside\n")
    real_resolve = file_tools.resolve_path

    def racing_resolve(path: str, *, root: str | None = None) -> str:
        resolved = real_resolve(path, root=root)
        (layout / "d").rename(layout / "d_moved")
        (layout / "d").symlink_to(outside, target_is_directory=True)
        return resolved

    monkeypatch.setattr(file_tools, "resolve_path", racing_resolve)
    with pytest.raises(PathEscapeError, match="redirected outside"):
        await ReadFileTool().execute({"path": "d/secret.txt"})


@pytest.mark.anyio
async def test_write_racing_a_folder_swap_writes_nothing_outside(
    layout: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (layout / "d").mkdir()
    before = _snapshot(outside)
    real_resolve = file_tools.resolve_path

    def racing_resolve(path: str, *, root: str | None = None) -> str:
        resolved = real_resolve(path, root=root)
        (layout / "d").rename(layout / "d_moved")
        (layout / "d").symlink_to(outside, target_is_directory=True)
        return resolved

    monkeypatch.setattr(file_tools, "resolve_path", racing_resolve)
    with pytest.raises(ToolError, match="outside"):
        await WriteFileTool().execute({"path": "d/new.txt", "content": "x"})
    assert _snapshot(outside) == before
