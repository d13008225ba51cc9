"""FakeSandbox: the handler-driven stand-in records calls and returns the handler's result."""

from __future__ import annotations

from pathlib import Path

import pytest

from jianmu.execution import ExecCall, ExecResult, FakeSandbox, Sandbox

pytestmark = pytest.mark.anyio


async def test_sync_and_async_handlers(tmp_path: Path) -> None:
    def sync_handler(call: ExecCall) -> ExecResult:
        return ExecResult(exit_code=len(call.argv), stdout=call.cwd)

    async def async_handler(call: ExecCall) -> ExecResult:
        return ExecResult(exit_code=0, stdout=(call.stdin or b"").decode())

    box = FakeSandbox(sync_handler, workspace=tmp_path)
    assert isinstance(box, Sandbox) and box.workspace == tmp_path
    result = await box.exec(["a", "b"], cwd="sub", env={"K": "v"}, timeout=3)
    assert (result.exit_code, result.stdout) == (2, "sub")
    assert box.calls == [ExecCall(argv=["a", "b"], env={"K": "v"}, cwd="sub", timeout=3)]
    echo = FakeSandbox(async_handler)
    assert (await echo.exec("cat", stdin="in")).stdout == "in"
    assert echo.calls[0].argv == ["/bin/sh", "-c", "cat"]


async def test_checks_its_input_like_a_real_sandbox() -> None:
    box = FakeSandbox(lambda call: ExecResult(exit_code=0))
    with pytest.raises(ValueError, match="empty list"):
        await box.exec([])
    with pytest.raises(ValueError, match="relative to the workspace"):
        await box.exec("pwd", cwd="/abs")
    assert box.calls == []
