"""Issue 12, item 10: symlink races against the file tools.

A separate process swaps ``ws/A`` between a real folder and a symlink to a folder outside the
workspace, as fast as it can, while the file tools run on paths through ``A`` many times (a
fixed number of calls, not a time budget). Whatever the interleaving, no outside name may be
listed, no outside content read, and nothing created or changed outside.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jianmu.constraints import ExecutionConstraints
from jianmu.execution.runner import ToolRunner
from jianmu.tools import ToolSet
from tests.support.swapper import Swapper

MARK = "OUTSIDE-NAME-MARK"  # a file name that exists only outside
SECRET = "TOP-SECRET-OUTSIDE-CONTENT"
ROUNDS = 150


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else b"<dir>")
        for p in sorted(folder.rglob("*"))
    }


@pytest.fixture
def racing(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(workspace, outside) with the swapper running; stopped and checked on the way out."""
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    for name in ("inside.txt", "edit.txt"):
        (outside / name).write_text((SECRET + " needle\n").ljust(4096, "x"))
    (outside / MARK).write_text(SECRET)
    (outside / "sub").mkdir()
    (outside / "sub" / f"{MARK}-deep.txt").write_text(SECRET)
    (ws / "A").mkdir()
    (ws / "A" / "inside.txt").write_text("inside\n")
    (ws / "A" / "edit.txt").write_text("needle\n")
    (ws / "A.lnk").symlink_to(outside, target_is_directory=True)
    # A is always there, in turn the folder and a link to outside; the folder again after
    with Swapper(ws / "A", ws / "A.lnk", tmp_path / "stop"):
        yield ws, outside


def _text(result: Any) -> str:
    return f"{result.output!r} {result.error!r}"


@pytest.mark.anyio
async def test_tools_racing_a_folder_symlink_swap_never_leave_the_workspace(
    racing: tuple[Path, Path],
) -> None:
    ws, outside = racing
    before = _snapshot(outside)
    tools = ToolSet.resolve(
        ["read_file", "write_file", "str_replace", "list_dir", "glob_search", "grep_search",
         "file_info"],
        strict=True,
    )
    seen: list[str] = []
    async with ToolRunner(ExecutionConstraints(workdir=str(ws))) as runner:
        for i in range(ROUNDS):
            calls: list[tuple[str, dict[str, Any]]] = [
                ("list_dir", {"path": ".", "depth": 4}),
                ("list_dir", {"path": "A", "depth": 2}),
                ("glob_search", {"pattern": "**/*"}),
                ("glob_search", {"pattern": "*", "root": "A"}),
                ("grep_search", {"pattern": "SECRET|needle"}),
                ("grep_search", {"pattern": "SECRET", "path": "A"}),
                ("read_file", {"path": "A/inside.txt"}),
                ("file_info", {"path": "A/inside.txt"}),
                ("file_info", {"path": "A"}),
                ("write_file", {"path": f"A/d{i}/x.txt", "content": "made inside"}),
                ("write_file", {"path": "A/inside.txt", "content": "inside\n"}),
                ("str_replace", {"path": "A/edit.txt", "old": "needle", "new": "needle!"}),
                ("str_replace", {"path": "A/edit.txt", "old": "needle!", "new": "needle"}),
            ]
            for name, args in calls:
                result = await tools.execute(name, args, runner=runner)
                text = _text(result)
                seen.append(text)
                assert MARK not in text and SECRET not in text, (name, args, text)
                # the outside files are 4096 bytes, the inside ones 7: a size tells which was seen
                assert "4.0 KB" not in text and "4096" not in text, (name, args, text)
    assert _snapshot(outside) == before, "something outside the workspace was created or changed"
    assert any("inside" in t for t in seen)  # the tools did work between the swaps
