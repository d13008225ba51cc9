"""What ``jianmu resume`` says when it refuses a decision: each fact once.

Before the fix, a decision already taken was refused as "... the first decision stands and this
one was not recorded; nothing was recorded" (said twice in one message).
"""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

from jianmu import AgentState
from jianmu.runtime import ReactiveRunner, SQLiteCheckpointer
from jianmu.state import StateManager
from tests.support.payments import Payments, payments

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def project(tmp_path: Path) -> Payments:
    return payments(tmp_path / "shop")


def test_a_decision_already_taken_is_refused_saying_so_once(project: Payments) -> None:
    run_id = project.suspended()
    tree = runpy.run_path(str(project.script))["build_tree"]()
    with SQLiteCheckpointer(project.checkpoints) as store:  # decided elsewhere, not run yet
        runner = ReactiveRunner.restore(tree, store, run_id,
                                        state_manager=StateManager(AgentState))
        runner.approve("pay_1", "ok")
        runner.save_checkpoint("suspended")

    code, out, err = project.jianmu("resume", run_id, "--approve", "pay_1")
    assert code == 2, out + err
    assert "request 'pay_1' was already approved ('ok')" in err, err
    assert err.count("not recorded") == 1 and "nothing was recorded" not in err, err
    assert "Traceback" not in err and project.paid() == []


def test_a_refused_decision_says_the_ones_before_it_were_not_recorded(
    project: Payments,
) -> None:
    run_id = project.suspended()
    code, out, err = project.jianmu("resume", run_id, "--approve", "pay_1", "--reject", "nope")
    assert code == 2, out + err
    assert "no approval request 'nope' was asked in this run" in err, err
    assert "the decisions given before it were not recorded either" in err, err
    assert project.paid() == []
    code, out, err = project.jianmu("resume", run_id, "--approve", "pay_1")
    assert code == 0, out + err  # pay_1 was still pending: approved now, paid once
    assert project.paid() == ["paid 40"]
