"""Red team: a command leaves a daemon behind, then the run suspends for a person.

The daemon double-forks into a session of its own, closes its descriptors and ignores SIGTERM
and SIGHUP; the run suspends on a sibling's approval right after. Nothing of the command is
left running once ``run_sync`` returns SUSPENDED; the sandbox itself (its idle supervisor, its
``/tmp``) waits for the run to go on, and ``aclose`` releases it.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path

import py_trees
import pytest

from jianmu import ReactiveRunner, RunStatus, StateManager, ToolExecutor
from jianmu.constraints import Constraints
from jianmu.execution._process import cgroup_support
from jianmu.execution.local_sandbox import bwrap_available
from jianmu.nodes import AgentState
from jianmu.tools.builtin.bash import BashTool
from tests.support import suspend_app as app

pytestmark = pytest.mark.skipif(
    not bwrap_available(network=False) or cgroup_support() is None,
    reason="a sandbox with its network off and control groups")

_DAEMON = (
    '(setsid bash -c \'trap "" TERM HUP; exec </dev/null >/dev/null 2>&1; '
    '(exec -a {tag} sleep 300 &); exec -a {tag} sleep 300\' &) ; echo started'
)


def _running(tag: str) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if tag.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            continue
    return found


def _scratch() -> list[str]:
    prefix = f"jianmu-sandbox-{os.getpid()}-"
    return [n for n in os.listdir(tempfile.gettempdir()) if n.startswith(prefix)]


def test_nothing_of_a_command_runs_after_the_run_suspends(tmp_path: Path) -> None:
    tag = f"jm-daemon-{os.getpid()}"
    constraints = Constraints.model_validate({
        "guard": {"tool_policy": {"bash": "allow"}},
        "execution": {"workdir": str(tmp_path)},
    })
    state = StateManager(AgentState, {"actions": [
        {"id": "b1", "name": "bash", "arguments": {"command": _DAEMON.format(tag=tag)}}]})
    root = py_trees.composites.Parallel(
        "both", policy=py_trees.common.ParallelPolicy.SuccessOnAll(),
        children=[app.Asker("ask"), ToolExecutor(tools=[BashTool()], constraints=constraints)],
    )
    runner = ReactiveRunner(root, state)
    before = set(_scratch())
    result = runner.run_sync(timeout=60)
    assert result.status is RunStatus.SUSPENDED, result.error
    assert [m.content for m in state.get("messages")] == ["started"]
    assert _running(tag) == []
    assert set(_scratch()) - before  # the sandbox waits for the run to go on...
    asyncio.run(runner.aclose())
    assert set(_scratch()) <= before  # its /tmp went with the sandbox
