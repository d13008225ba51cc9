"""A `jianmu run` killed before its first checkpoint is listed as stopped and resumed.

The README: "A run whose process ended before the run did (killed, crashed) is **stopped** ...;
`jianmu resume RUN_ID` goes on from its last checkpoint, and `jianmu runs show` says the same."
A run killed during its first long step (a model call, say) used to leave no checkpoint at all:
`runs show` and `resume` answered "no run", and the studio never listed it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.cli._helpers import REPO, Project

pytestmark = pytest.mark.timeout(300)

SCRIPT = '''
import asyncio
from pathlib import Path

import py_trees
from py_trees.common import Status

from jianmu import AsyncNode

HERE = Path(__file__).parent


class LongStep(AsyncNode):
    """Says it started, then waits until a `go` file is there."""

    async def update_async(self) -> Status:
        (HERE / "started").write_text("yes")
        while not (HERE / "go").exists():
            await asyncio.sleep(0.05)
        self.state.update({"final_answer": "finished"})
        return Status.SUCCESS


def build_tree():
    return py_trees.composites.Sequence("long", memory=True, children=[LongStep("step")])
'''


def _wait_for(path: os.PathLike[str], process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 120  # a bound against a hang, not a speed expectation
    while not os.path.exists(path):
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the run never started its step"
        time.sleep(0.05)


def test_a_run_killed_before_its_first_checkpoint_is_stopped_and_resumed(
    project: Project,
) -> None:
    project.write("long.py", SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JIANMU_", "OPENAI_"))}
    env.update(COLUMNS="200", NO_COLOR="1", PYTHONPATH=str(REPO))
    process = subprocess.Popen(
        [sys.executable, "-m", "jianmu.cli", "run", "long.py", "--config", str(project.config)],
        cwd=project.root, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first.startswith("run "), first + process.communicate()[1]
        run_id = first.split()[1].rstrip(":")
        _wait_for(project.root / "started", process)
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.communicate(timeout=60)

    shown = project.jianmu("runs", "show", run_id)
    assert shown.code == 0, shown.text
    assert f"run {run_id}: stopped" in shown.out, shown.out
    listed = project.jianmu("runs", "list")
    assert run_id in listed.out and "stopped" in listed.out, listed.out

    project.write("go", "")
    resumed = project.jianmu("resume", run_id)
    assert resumed.code == 0, resumed.text
    assert "result: finished" in resumed.out, resumed.out
