"""Two terminals answering one run (issue 33, item 6): ``jianmu resume`` and ``jianmu runs
fork`` claim the run first, so a second one at the same moment is refused naming the first,
and an approved payment runs once."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.support.payments import Payments, payments

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def project(tmp_path: Path) -> Payments:
    return payments(tmp_path / "shop")


def test_two_resumes_at_the_same_moment_pay_once(project: Payments) -> None:
    run_id = project.suspended()
    first = project.start("resume", run_id, "--approve", "pay_1", gated=True)
    try:
        project.wait_paying()  # the first terminal holds the run, paying, right now
        code, out, err = project.jianmu("resume", run_id, "--approve", "pay_1")
        assert code == 1, out + err
        assert f"run {run_id!r} is claimed by" in err and ":jianmu resume:" in err, err
        # its process is alive: its lease does not run out, it lets go when it is done
        assert f"held by process {first.pid} of this machine, which is alive" in err, err
        assert "will be free when that process exits or closes the run" in err, err
        assert "lease has expired" not in err and "Traceback" not in err
        assert project.paid() == ["paid 40"]
    finally:
        project.let_go()
        out, err = first.communicate(timeout=120)
    assert first.returncode == 0, out + err
    code, out, err = project.jianmu("resume", run_id, "--approve", "pay_1")
    assert code == 2 and f"run {run_id!r} already finished (success)" in err, out + err
    assert project.paid() == ["paid 40"]


def _point_of_the_payment(project: Payments, run_id: str) -> int:
    """The point where the resuming process started the payment: it saves it just after the
    payment has begun (as the tick that began it ends), so it is waited for."""
    deadline = time.monotonic() + 120
    while True:
        code, out, err = project.jianmu("runs", "show", run_id, "--json")
        assert code == 0, out + err
        latest = json.loads(out)["points"][-1]
        if "started: pay" in latest["label"]:
            return int(latest["n"])
        assert time.monotonic() < deadline, f"no point of the payment's start: {out}"
        time.sleep(0.05)


def test_a_fork_from_the_latest_point_waits_for_the_runs_owner(project: Payments) -> None:
    run_id = project.suspended()
    first = project.start("resume", run_id, "--approve", "pay_1", gated=True)
    try:
        project.wait_paying()
        latest = _point_of_the_payment(project, run_id)  # where the run's owner is now
        code, out, err = project.jianmu("runs", "fork", run_id, "--at", str(latest),
                                        "--non-interactive")
        assert code == 1, out + err
        assert f"run {run_id!r} is claimed by" in err and ":jianmu resume:" in err, err
    finally:
        project.let_go()
        out, err = first.communicate(timeout=120)
    assert first.returncode == 0, out + err
    assert project.paid() == ["paid 40"]
