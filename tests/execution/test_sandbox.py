"""BaseSandbox: one `exec` checks every call before a sandbox's `run` sees it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from jianmu.execution import BaseSandbox, ExecCall, ExecResult, Sandbox

pytestmark = pytest.mark.anyio


class _EchoSandbox(BaseSandbox):
    """Runs nothing: answers with the checked call it was handed."""

    def __init__(self, workspace: Path) -> None:
        super().__init__(workspace)
        self.seen: list[ExecCall] = []

    async def run(self, call: ExecCall) -> ExecResult:
        self.seen.append(call)
        return ExecResult(exit_code=0, stdout=" ".join(call.argv))


async def test_a_subclass_is_a_sandbox_that_gets_checked_calls(tmp_path: Path) -> None:
    async with _EchoSandbox(tmp_path) as box:
        assert isinstance(box, Sandbox) and box.workspace == tmp_path
        result = await box.exec("echo hi", stdin="in", env={"K": "v"}, cwd="sub/")
    assert result.stdout == "/bin/sh -c echo hi"
    assert box.seen == [ExecCall(argv=["/bin/sh", "-c", "echo hi"], stdin=b"in",
                                 env={"K": "v"}, cwd="sub")]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"command": []}, "empty list"),
        ({"command": " "}, "empty string"),
        ({"command": ["ls", 1]}, "must be a string"),
        ({"command": "ls", "cwd": "../up"}, "without '..'"),
        ({"command": "ls", "cwd": "/abs"}, "relative to the workspace"),
    ],
)
async def test_bad_calls_never_reach_run(
    tmp_path: Path, kwargs: dict[str, Any], message: str
) -> None:
    box = _EchoSandbox(tmp_path)
    with pytest.raises(ValueError, match=message):
        await box.exec(**kwargs)
    assert box.seen == []


def test_timeout_or_applies_the_default_and_refuses_non_positive() -> None:
    assert ExecCall(argv=["ls"]).timeout_or(7) == 7
    assert ExecCall(argv=["ls"], timeout=2).timeout_or(7) == 2
    with pytest.raises(ValueError, match="timeout must be positive, got 0"):
        ExecCall(argv=["ls"], timeout=0).timeout_or(7)


def test_check_positive_names_the_limit() -> None:
    BaseSandbox.check_positive(memory_mb=None, cpus=0.5)
    with pytest.raises(ValueError, match="pids must be positive, got -1"):
        BaseSandbox.check_positive(memory_mb=1, pids=-1)
