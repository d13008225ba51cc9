"""`jianmu resume --approve` and the studio address requests whose ids are qualified by the
namespace that owns the call (``left/pay_1``): by that id, or by the call id alone where it
names one pending request; where it names several, the decision is refused and the error lists
the qualified ids."""

from __future__ import annotations

import os
import re
import textwrap
from pathlib import Path

import pytest

from jianmu.errors import InteractionError
from jianmu.studio.runs import CheckpointRuns, Journal
from tests.support.forked_cli import run_jianmu

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(300)

TEAM = textwrap.dedent('''
    import os

    import py_trees
    from py_trees.common import ParallelPolicy, Status

    from jianmu import AgentState, AsyncNode, ToolExecutor, tool


    @tool(category="write", permission="user_confirm")
    def pay(amount: int) -> str:
        """Pay an amount (asks a person first).

        Args:
            amount: How much.
        """
        with open(os.environ["PAY_LEDGER"], "a", encoding="utf-8") as ledger:
            ledger.write(f"paid {amount}\\n")
        return f"paid {amount}"


    class Plan(AsyncNode):
        def __init__(self, name, amount):
            super().__init__(name)
            self.amount = amount

        async def update_async(self):
            # both models number their calls the same way
            self.state.update({"actions": [{"id": "pay_1", "name": "pay",
                                            "arguments": {"amount": self.amount}}]})
            return Status.SUCCESS


    def branch(namespace, amount):
        node = py_trees.composites.Sequence(namespace, memory=True, children=[
            Plan("plan", amount), ToolExecutor("execute", [pay]),
        ])
        for part in node.iterate():
            part.namespace = namespace
        return node


    def build_tree(inputs=None):
        return py_trees.composites.Parallel("team", policy=ParallelPolicy.SuccessOnAll(),
                                            children=[branch("left", 40), branch("right", 7)])


    STATE_SCHEMA = AgentState
''')


class Project:
    def __init__(self, root: Path) -> None:
        root.mkdir()
        self.root = root
        self.script = root / "team.py"
        self.script.write_text(TEAM)
        self.checkpoints = root / "runs.sqlite"
        self.config = root / "jianmu-test.yaml"
        (root / "ws").mkdir()
        self.config.write_text(f"runtime:\n  checkpoint_path: {self.checkpoints}\n"
                               f"execution:\n  workdir: {root / 'ws'}\n")
        self.ledger = root / "ledger.txt"

    def jianmu(self, *args: str) -> tuple[int, str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("JIANMU_")}
        env.update(COLUMNS="200", NO_COLOR="1", PYTHONPATH=str(REPO),
                   PAY_LEDGER=str(self.ledger), XDG_STATE_HOME=str(self.root / "state"))
        done = run_jianmu([*args, "--config", str(self.config)], cwd=self.root, env=env,
                          timeout=120)
        return done.returncode, done.stdout, done.stderr

    def paid(self) -> list[str]:
        return self.ledger.read_text().splitlines() if self.ledger.exists() else []

    def suspended(self) -> str:
        code, out, err = self.jianmu("run", str(self.script), "--non-interactive")
        assert code == 3, out + err
        assert "left/pay_1" in out and "right/pay_1" in out, out
        found = re.search(r"^suspended: run (\w+) waits", out, re.M)
        assert found, out
        return found.group(1)


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path / "team")


def test_resume_takes_qualified_ids_and_refuses_an_ambiguous_call_id(project: Project) -> None:
    run_id = project.suspended()
    code, out, err = project.jianmu("resume", run_id, "--approve", "pay_1")
    assert code == 2, out + err  # as for an id that names no request
    assert "left/pay_1, right/pay_1" in err, err
    assert project.paid() == []

    code, out, err = project.jianmu("resume", run_id, "--approve", "left/pay_1",
                                    "--reject", "right/pay_1")
    assert code == 0, out + err
    assert "✓ approved left/pay_1" in out and "✗ rejected right/pay_1" in out, out
    assert project.paid() == ["paid 40"]  # the left branch's call, once


def test_a_call_id_alone_never_names_the_one_left_waiting_when_another_had_it(
    project: Project,
) -> None:
    """Once left/pay_1 is decided, "pay_1" still names it too: run again, the command must not
    approve right/pay_1, which nobody named."""
    run_id = project.suspended()
    code, out, err = project.jianmu("resume", run_id, "--reject", "left/pay_1")
    assert code == 3 and "right/pay_1" in out, out + err  # still waits for the other one
    code, out, err = project.jianmu("resume", run_id, "--approve", "pay_1")
    assert code == 2 and "left/pay_1, right/pay_1" in out + err, out + err
    assert project.paid() == []
    code, out, err = project.jianmu("resume", run_id, "--approve", "right/pay_1")
    assert code == 0, out + err
    assert "✓ approved right/pay_1" in out, out
    assert project.paid() == ["paid 7"]


def test_the_studio_resolves_a_call_id_alone_against_the_runs_pending_requests(
    project: Project,
) -> None:
    run_id = project.suspended()
    runs = CheckpointRuns(str(project.checkpoints), Journal(str(project.checkpoints)))
    with pytest.raises(InteractionError, match="left/pay_1, right/pay_1"):
        runs.decide(run_id, "pay_1", True, None, "tester")
    done = runs.decide(run_id, "left/pay_1", False, "not this one", "tester")
    assert done.startswith("rejected left/pay_1")
    with pytest.raises(InteractionError, match="left/pay_1, right/pay_1"):
        runs.decide(run_id, "pay_1", True, None, "tester")  # left/pay_1 had it too
    done = runs.decide(run_id, "right/pay_1", True, None, "tester")
    assert done.startswith("approved right/pay_1")
    code, out, err = project.jianmu("resume", run_id)
    assert code == 0, out + err
    assert project.paid() == ["paid 7"]
