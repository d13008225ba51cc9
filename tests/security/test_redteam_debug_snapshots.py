"""A failed skill's debug snapshot is never written through a link that sandboxed code made.

The snapshot goes to ``runtime.debug_dir`` (``.jianmu/debug`` by default), relative to the
engine's folder, which is usually the workspace, where `bash` may write anything: a command
that made ``.jianmu/debug`` a symbolic link to ``/etc`` had the engine (often root) create
``/etc/<run id>/<namespace>.json`` holding what the model wrote. Below the configured folder,
no link is followed.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from jianmu import ReactiveRunner, RunStatus, StateManager
from jianmu.config import parse_config
from jianmu.llm import ScriptedLLM
from jianmu.nodes import AgentState
from jianmu.skills import SkillCatalog
from jianmu.skills.node import SkillNode
from jianmu.tools import tool

pytestmark = pytest.mark.anyio


@tool
def ping(host: str) -> str:
    """Ping a host.

    Args:
        host: the host name.
    """
    return f"pong from {host}"


def _looper(root: Path) -> SkillCatalog:
    folder = root / "looper"
    folder.mkdir(parents=True)
    front = "tools: [ping]\nconstraints:\n  max_iterations: 1\n"
    (folder / "SKILL.md").write_text(
        f"---\nname: looper\ndescription: A skill that fails.\n{textwrap.dedent(front)}---\nGo.\n"
    )
    return SkillCatalog([root], custom_tools=[ping])


async def _fail_a_skill(tmp_path: Path) -> tuple[SkillNode, list[str]]:
    llm = ScriptedLLM([[{"name": "ping", "arguments": {"host": "x"}}]] * 3)
    node = SkillNode("Looper", ["looper"], llm, catalog=_looper(tmp_path / "skills"),
                     tools=[ping])
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    runner = ReactiveRunner(node, state, config=parse_config(""))  # the default debug_dir
    failed: list[str] = []
    runner.ctx.events.subscribe("skill.debug_snapshot_failed",
                                lambda e: failed.append(e.fields["error"]))
    result = await runner.run(timeout=30)
    assert result.status is RunStatus.FAILURE
    return node, failed


@pytest.mark.parametrize("planted", [".jianmu", ".jianmu/debug"])
async def test_a_linked_debug_folder_is_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, planted: str
) -> None:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    monkeypatch.chdir(ws)
    link = ws / planted
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(outside, target_is_directory=True)  # what `bash` may have left there
    node, failed = await _fail_a_skill(tmp_path)
    assert list(outside.rglob("*")) == [], "the snapshot was written outside the workspace"
    assert node.debug_snapshot_path is None and failed


async def test_a_snapshot_is_still_written_where_no_link_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    monkeypatch.chdir(ws)
    node, failed = await _fail_a_skill(tmp_path)
    assert failed == [] and node.debug_snapshot_path is not None
    written = (ws / node.debug_snapshot_path).resolve()
    assert written.is_relative_to(ws / ".jianmu" / "debug") and written.is_file()
    assert not os.path.islink(ws / ".jianmu")
