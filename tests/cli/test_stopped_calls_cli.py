"""A payment the CLI stopped after it began (the run's ``--timeout``, Ctrl-C) is saved as maybe
done, which the stopped command prints: ``jianmu resume`` goes on without paying again."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from tests.cli._helpers import REPO, Project, ctrl_c_as_in_a_terminal

pytestmark = pytest.mark.timeout(300)

PAYING_SCRIPT = '''
import asyncio
from pathlib import Path

import py_trees
from py_trees.common import Status

from jianmu import AgentState, AsyncNode, ToolExecutor, tool

HERE = Path(__file__).parent


@tool(category="write", permission="user_confirm")
async def pay(amount: int) -> str:
    """Pay (a person approves first).

    Args:
        amount: how much.
    """
    with (HERE / "ledger.txt").open("a") as ledger:
        ledger.write(f"paid {amount}\\n")
    while (HERE / "hold").exists():  # the bank is slow to answer while the test says so
        await asyncio.sleep(0.05)
    return f"paid {amount}"


class Plan(AsyncNode):
    async def update_async(self):
        self.state.update({"actions": [{"id": "pay_1", "name": "pay",
                                        "arguments": {"amount": 40}}]})
        return Status.SUCCESS


def build_tree():
    return py_trees.composites.Sequence("paying", memory=True, children=[
        Plan("plan"), ToolExecutor("execute", [pay])])


STATE_SCHEMA = AgentState
'''



def _run_id(text: str) -> str:
    found = re.search(r"run (\w+)", text)
    assert found, text
    return found.group(1)


def test_a_payment_stopped_by_the_timeout_is_not_paid_again_on_resume(project: Project) -> None:
    project.write("paying.py", PAYING_SCRIPT)
    hold = project.write("hold", "")
    first = project.jianmu("run", "paying.py", "--approve-all", "--timeout", "2")
    assert first.code == 4, first.text
    assert (project.root / "ledger.txt").read_text() == "paid 40\n"
    hold.unlink()
    done = project.jianmu("resume", _run_id(first.out))
    assert done.code == 0, done.text
    assert (project.root / "ledger.txt").read_text() == "paid 40\n"  # once
    # the stopping process said it, as the call was recorded so
    assert "✗ pay (maybe done, not run again): " in first.out
    assert "whether it did its work is unknown" in first.out
    assert "approval needed" not in done.out


def test_a_payment_stopped_by_ctrl_c_is_not_paid_again_on_resume(project: Project) -> None:
    project.write("paying.py", PAYING_SCRIPT)
    hold = project.write("hold", "")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JIANMU_", "OPENAI_"))}
    env.update(COLUMNS="200", NO_COLOR="1", PYTHONPATH=str(REPO))
    proc = subprocess.Popen(
        [sys.executable, "-m", "jianmu.cli", "run", "paying.py", "--approve-all",
         "--config", str(project.config)],
        cwd=project.root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=ctrl_c_as_in_a_terminal)
    ledger = project.root / "ledger.txt"
    try:
        for _ in range(1200):  # bounded: until the payment went out
            if ledger.exists() or proc.poll() is not None:
                break
            time.sleep(0.05)
        assert ledger.exists(), proc.communicate()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 4, out + err
    hold.unlink()
    done = project.jianmu("resume", _run_id(out))
    assert done.code == 0, done.text
    assert ledger.read_text() == "paid 40\n"
    assert "whether it did its work is unknown" in out
