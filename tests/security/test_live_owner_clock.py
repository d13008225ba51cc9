"""A live owner's run is not taken over because another process's clock says its lease ran out.

Before the fix, a lease whose expiry had passed by the claimant's clock was taken whoever held
it: a process of this machine whose clock ran ahead (or that read the lease while the owner's
loop was held up past the time-to-live) took over a run whose owner was alive and paying. The
owner's record of the payment was then refused, and the payment was left "maybe done". Now a
lease held by another live process of this machine is never taken by expiry (that process is
known to be alive, whatever the clocks say); only its release, or its death, frees the run.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from jianmu._cli.serve import restorer
from jianmu.config import load_config
from jianmu.errors import RunClaimedError
from jianmu.runtime import SQLiteCheckpointer
from tests.support.payments import Payments, payments

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Payments:
    made = payments(tmp_path / "shop")
    monkeypatch.chdir(made.root)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return made


def test_a_clock_ahead_does_not_take_a_live_owners_run(project: Payments) -> None:
    run_id = project.suspended()
    owner = project.start("resume", run_id, "--approve", "pay_1", gated=True)
    try:
        project.wait_paying()  # the terminal holds the run, paying, right now
        later = SQLiteCheckpointer(project.checkpoints, clock=lambda: time.time() + 3600)
        with pytest.raises(RunClaimedError, match="jianmu resume"):
            later.claim(run_id, "late-clock")
        rebuild = restorer(str(project.checkpoints), load_config(str(project.config)), True)
        with pytest.raises(RunClaimedError, match="jianmu resume"):
            rebuild(run_id)  # as a studio whose clock runs ahead would
        later.close()
    finally:
        project.let_go()
        out, err = owner.communicate(timeout=120)
    assert owner.returncode == 0, out + err  # its record of the payment was saved
    assert f"success run {run_id}" in out
    assert project.paid() == ["paid 40"]
    with SQLiteCheckpointer(project.checkpoints) as store:
        data = store.load(run_id) or {}
        assert data.get("status") == "success"
        assert not data["state"]["root"].get("calls_under_way")

