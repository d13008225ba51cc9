"""An edit a person makes at approval is a new call: the guard's policy checks it again (issue
36, item 3). Approving ``ls`` and editing it into ``rm -rf``, or a write into a path outside
the workspace, must not run, whatever the approval says."""

from __future__ import annotations

from pathlib import Path

import pytest

from jianmu import Constraints, ReactiveRunner, RunStatus, StateManager
from jianmu.nodes.state import AgentState
from jianmu.nodes.tool_executor import ToolExecutor
from jianmu.tools.builtin import BashTool, WriteFileTool

pytestmark = pytest.mark.anyio


def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "victim").write_text("keep me\n")
    return ws


async def approve_edited(
    ws: Path, tool: object, call: dict[str, object], edit: dict[str, object],
    policy: dict[str, str],
) -> str:
    constraints = Constraints.model_validate(
        {"guard": {"tool_policy": policy}, "execution": {"workdir": str(ws)}}
    )
    node = ToolExecutor(tools=[tool], constraints=constraints)  # type: ignore[list-item]
    state = StateManager(AgentState, {"actions": [{"id": "c", **call}]})
    runner = ReactiveRunner(node, state)
    first = await runner.run(timeout=60)
    assert first.status is RunStatus.SUSPENDED
    runner.approve("c", arguments=edit)
    result = await runner.run(timeout=60)
    assert result.status is RunStatus.SUCCESS, result.error
    (message,) = runner.state.get("messages")
    return message.content or ""


@pytest.mark.parametrize("command", [
    "rm -rf victim", "ls; rm victim", "timeout 5 rm victim", "bash -lc 'rm -rf victim'",
    "echo $(rm victim)", "find . -name victim -delete",
])
async def test_ls_approved_and_edited_into_rm_does_not_run(tmp_path: Path, command: str) -> None:
    ws = workspace(tmp_path)
    said = await approve_edited(
        ws, BashTool(), {"name": "bash", "arguments": {"command": "ls"}},
        {"command": command},
        {"bash(ls*)": "confirm", "bash(rm *)": "deny", "bash(find *)": "deny"},
    )
    assert "denied" in said, said
    assert (ws / "victim").read_text() == "keep me\n"


async def test_an_edit_under_a_deny_rule_does_not_run(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    said = await approve_edited(
        ws, BashTool(), {"name": "bash", "arguments": {"command": "ls"}},
        {"command": "rm victim"}, {"bash": "confirm", "bash(rm *)": "deny"},
    )
    assert "the guard denied this call" in said and "bash(rm *)" in said
    assert (ws / "victim").read_text() == "keep me\n"


@pytest.mark.parametrize("path", ["../outside.txt", "{outside}", "sub/../../outside.txt"])
async def test_a_write_edited_to_outside_the_workspace_does_not_run(
    tmp_path: Path, path: str
) -> None:
    ws = workspace(tmp_path)
    outside = tmp_path / "outside.txt"
    said = await approve_edited(
        ws, WriteFileTool(),
        {"name": "write_file", "arguments": {"path": "notes.txt", "content": "hi"}},
        {"path": path.format(outside=outside), "content": "pwned"},
        {"write_file": "confirm"},
    )
    assert not outside.exists(), said
    assert not (ws / "notes.txt").exists()
    assert "outside" in said or "denied" in said, said


async def test_an_edit_never_approves_the_unedited_call(tmp_path: Path) -> None:
    """A decision with edited arguments confirms those arguments only: the guard denies the
    call as the model asked it (a node that did not apply the edit)."""
    from jianmu.guard import GuardEnforcer
    from jianmu.runtime import Interaction
    from jianmu.runtime.context import RunContext
    from jianmu.tools.calls import ToolCall

    constraints = Constraints.model_validate({"guard": {"tool_policy": {"bash": "confirm"}}})
    enforcer = GuardEnforcer.from_guard_constraints(constraints.guard)
    interaction = Interaction()
    ctx = RunContext(interaction=interaction)
    asked = ToolCall(id="c", name="bash", arguments={"command": "ls"})
    tool = BashTool()
    (pending,) = enforcer.preflight([asked], [tool], run=ctx)
    assert pending.awaiting_approval
    interaction.suspend(enforcer.approval_request(asked, pending, parameters=tool.parameters))
    interaction.approve("c", arguments={"command": "pwd"})

    (as_asked,) = enforcer.preflight([asked], [tool], run=ctx)
    assert as_asked.denied
    edited = ToolCall(id="c", name="bash", arguments={"command": "pwd"})
    (as_edited,) = enforcer.preflight([edited], [tool], run=ctx)
    assert as_edited.allowed
