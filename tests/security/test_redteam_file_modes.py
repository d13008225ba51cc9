"""A file's special mode bits, planted by sandboxed code, never survive the file tools.

Sandboxed code runs as an unprivileged user, but `write_file` and `str_replace` run in the
engine's process, as whoever started it (often root). They keep a rewritten file's mode, so
a command that did ``chmod 6777 f`` before the model rewrote ``f`` got back a file owned by
the engine's user, set-user-ID, holding what the model wrote: a set-user-ID root program in
the workspace, for anyone on the host to run. Only the permission bits may carry over.
"""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import pytest

from jianmu.constraints import ExecutionConstraints
from jianmu.execution.runner import ToolRunner
from jianmu.tools import ToolSet
from tests.execution._helpers import local_problem

pytestmark = pytest.mark.anyio

SPECIAL = stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    problem = local_problem("local-bwrap")
    if problem is not None:
        pytest.skip(problem)
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("write_file", {"path": "tool", "content": "\x7fELF written by the model"}),
        ("write_file", {"path": "tool", "content": " more", "mode": "append"}),
        ("str_replace", {"path": "tool", "old": "planted", "new": "rewritten"}),
    ],
)
async def test_a_planted_setuid_mode_is_not_kept(
    workspace: Path, name: str, args: dict[str, Any]
) -> None:
    tools = ToolSet.resolve(["bash", name], strict=True)
    async with ToolRunner(ExecutionConstraints(mode="local", workdir=str(workspace))) as runner:
        planted = await tools.execute(
            "bash", {"command": "printf planted > tool && chmod 6777 tool && stat -c %a tool"},
            runner=runner,
        )
        assert planted.output is not None and "6777" in str(planted.output), planted
        result = await tools.execute(name, args, runner=runner)
        assert result.error is None, result
    mode = (workspace / "tool").stat().st_mode
    assert not mode & SPECIAL, oct(mode)
    assert stat.S_IMODE(mode) == 0o777  # the permission bits themselves still carry over
