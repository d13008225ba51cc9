"""A payment that asks first, for the one-owner-per-run tests (issue 33, item 6): every
execution of ``pay`` adds a line to a ledger file, and a gate (two FIFOs) can hold a payment
open until the test lets it finish, so "at the same moment" is a fact, not a hope."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import py_trees
from py_trees.common import Status

from jianmu import AsyncNode, ToolExecutor, tool
from tests.support.forked_cli import run_jianmu

REPO = Path(__file__).resolve().parents[2]

PAID: list[str] = []
"""Every execution of `pay` in this process: a second entry is a second payment."""


@tool(category="write", permission="user_confirm")
def pay(amount: int) -> str:
    """Pay an amount (asks a person first).

    Args:
        amount: How much.
    """
    PAID.append(f"paid {amount}")
    return f"paid {amount}"


class Plan(AsyncNode):
    """Asks for one ``pay`` call, as a model would."""

    async def update_async(self) -> Status:
        self.state.update({"actions": [{"id": "pay_1", "name": "pay",
                                        "arguments": {"amount": 40}}]})
        return Status.SUCCESS


def pay_flow(*after: py_trees.behaviour.Behaviour) -> py_trees.behaviour.Behaviour:
    """The in-process payment: plan ``pay_1``, execute it (after approval), then ``after``."""
    return py_trees.composites.Sequence("pay-flow", memory=True, children=[
        Plan("plan"), ToolExecutor("execute", [pay]), *after,
    ])

def suspended_payment(db: Path) -> str:
    """A `pay_flow` run saved in the SQLite file ``db``, suspended on its ``pay_1``; its id."""
    from jianmu import AgentState, ReactiveRunner, RunStatus, SQLiteCheckpointer, StateManager

    with SQLiteCheckpointer(db) as store:
        first = ReactiveRunner(pay_flow(), StateManager(AgentState), checkpointer=store)
        assert first.run_sync(timeout=60).status is RunStatus.SUSPENDED
        return first.run_id


PAY_SCRIPT = '''
import os

import py_trees
from py_trees.common import Status

from jianmu import AgentState, AsyncNode, ToolExecutor, tool


@tool(category="write", permission="user_confirm")
def pay(amount: int) -> str:
    """Pay an amount (asks a person first).

    Args:
        amount: How much.
    """
    with open(os.environ["PAY_LEDGER"], "a", encoding="utf-8") as ledger:
        ledger.write(f"paid {amount}\\n")
    gate = os.environ.get("PAY_GATE")
    if gate:  # hold the payment open: say so, then wait to be let go
        with open(gate + ".paying", "w", encoding="utf-8") as fifo:
            fifo.write("paying")
        with open(gate + ".go", encoding="utf-8") as fifo:
            fifo.read()
    return f"paid {amount}"


class Plan(AsyncNode):
    async def update_async(self):
        self.state.update({"actions": [{"id": "pay_1", "name": "pay",
                                        "arguments": {"amount": 40}}]})
        return Status.SUCCESS


def build_tree(inputs=None):
    return py_trees.composites.Sequence("payment", memory=True, children=[
        Plan("plan"), ToolExecutor("execute", [pay]),
    ])


STATE_SCHEMA = AgentState
'''


@dataclass
class Payments:
    """A project folder with the payment script, its config, ledger and gate."""

    root: Path
    config: Path
    checkpoints: Path
    script: Path
    ledger: Path
    gate: Path

    def paid(self) -> list[str]:
        """Every payment made so far."""
        return self.ledger.read_text().splitlines() if self.ledger.exists() else []

    def env(self, *, gated: bool) -> dict[str, str]:
        """The environment of a ``jianmu`` process: its payments held at the gate or not."""
        clean = {k: v for k, v in os.environ.items() if not k.startswith(("JIANMU_", "PAY_"))}
        clean.update(COLUMNS="200", NO_COLOR="1", PYTHONPATH=str(REPO),
                     PAY_LEDGER=str(self.ledger), PAY_GATE=str(self.gate) if gated else "")
        return clean

    def start(self, *args: str, gated: bool = False) -> subprocess.Popen[str]:
        """Start ``jianmu ARGS --config CONFIG`` in the project folder."""
        return subprocess.Popen(
            [sys.executable, "-m", "jianmu.cli", *args, "--config", str(self.config)],
            cwd=self.root, env=self.env(gated=gated), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )

    def jianmu(self, *args: str, gated: bool = False) -> tuple[int, str, str]:
        """Run ``jianmu ARGS`` to its end: exit code, stdout, stderr."""
        done = run_jianmu([*args, "--config", str(self.config)], cwd=self.root,
                          env=self.env(gated=gated), timeout=120)
        return done.returncode, done.stdout, done.stderr

    def suspended(self) -> str:
        """A run of the payment waiting for approval of ``pay_1``; its id."""
        code, out, err = self.jianmu("run", str(self.script), "--non-interactive")
        assert code == 3, out + err
        found = re.search(r"^suspended: run (\w+) waits", out, re.M)
        assert found, out
        return found.group(1)

    def wait_paying(self, timeout: float = 90) -> None:
        """Return once a gated payment has started (it holds the run), else fail."""
        _through(lambda: (self.gate.parent / (self.gate.name + ".paying")).read_text(),
                 timeout, "a gated payment to start")

    def let_go(self, timeout: float = 90) -> None:
        """Let the gated payment finish."""
        _through(lambda: (self.gate.parent / (self.gate.name + ".go")).write_text("go"),
                 timeout, "the gated payment to take the go")


def _through(step: Callable[[], object], timeout: float, what: str) -> None:
    """Do a FIFO step that blocks until the other end opens, in a thread, within ``timeout``."""
    done = threading.Event()

    def run() -> None:
        step()
        done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(timeout), f"timed out waiting for {what}"


def payments(root: Path) -> Payments:
    """A new payment project under ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    checkpoints = root / ".jianmu" / "runs.sqlite"
    config = root / "jianmu-test.yaml"
    config.write_text(f"runtime:\n  checkpoint_path: {checkpoints}\n"
                      f"execution:\n  workdir: {root / 'ws'}\n", encoding="utf-8")
    (root / "ws").mkdir(exist_ok=True)
    script = root / "pay.py"
    script.write_text(PAY_SCRIPT, encoding="utf-8")
    gate = root / "gate"
    for end in (".paying", ".go"):
        os.mkfifo(gate.parent / (gate.name + end))
    return Payments(root=root, config=config, checkpoints=checkpoints, script=script,
                    ledger=root / "ledger.txt", gate=gate)


def studio_of(project: Payments) -> list[object]:
    """The studio's sources for the project's checkpoints, runs rebuilt as the CLI does."""
    from jianmu._cli.serve import restorer
    from jianmu.config import load_config
    from jianmu.studio import CheckpointRuns
    from jianmu.studio.runs import Journal

    path = str(project.checkpoints)
    config = load_config(str(project.config))
    return [CheckpointRuns(path, Journal(path), restorer(path, config, True))]

