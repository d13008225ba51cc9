"""One approval, paid once (issue 33, item 6).

A payment approved in the studio while ``jianmu resume --approve`` answered the same run in a
terminal was executed twice: each restored the last checkpoint and approved, and nothing
claimed the run. Now whoever decides or resumes first claims the run in the checkpoint store;
the other is refused with a message naming the holder. "The same moment" is made certain: the
first side's payment is held open at a gate while the second side tries.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from jianmu.studio import create_app
from tests.support.payments import Payments, payments, studio_of

pytestmark = pytest.mark.timeout(300)
TOKEN = "double-payment-token"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Payments:
    made = payments(tmp_path / "shop")
    monkeypatch.chdir(made.root)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("PAY_LEDGER", str(made.ledger))  # the studio pays in this process
    monkeypatch.delenv("PAY_GATE", raising=False)
    return made


@pytest.fixture
def run_id(project: Payments) -> str:
    """A run of the payment, suspended by ``jianmu run --non-interactive``."""
    return project.suspended()


@pytest.fixture
def studio(project: Payments, run_id: str) -> Iterator[TestClient]:
    with TestClient(create_app(studio_of(project), TOKEN, by="alice"),
                    base_url="http://127.0.0.1", follow_redirects=False) as client:
        assert client.get(f"/?token={TOKEN}").status_code == 303
        yield client


def approve_in_studio(studio: TestClient, run_id: str) -> tuple[int, str]:
    page = studio.get(f"/run/cp/{run_id}").text
    csrf = page.split('<meta name="csrf" content="', 1)[1].split('"', 1)[0]
    answer = studio.post(f"/run/cp/{run_id}/approve", json={"call_id": "pay_1"},
                         headers={"X-CSRF-Token": csrf})
    return answer.status_code, answer.text


def test_a_terminal_resume_while_the_studio_pays_is_refused(
    project: Payments, run_id: str, studio: TestClient, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PAY_GATE", str(project.gate))  # the studio's payment waits at the gate
    code, text = approve_in_studio(studio, run_id)
    assert code == 200, text
    project.wait_paying()  # the studio holds the run, paying, right now

    code, out, err = project.jianmu("resume", run_id, "--approve", "pay_1")
    assert code == 1, out + err
    assert f"run {run_id!r} is claimed by" in err and ":jianmu studio:" in err, err
    assert "Traceback" not in err
    assert project.paid() == ["paid 40"]

    project.let_go()
    view = _finished(studio, run_id)
    assert view["status"] == "success"
    code, out, err = project.jianmu("resume", run_id, "--approve", "pay_1")
    assert code == 2 and "already finished" in err, out + err
    assert project.paid() == ["paid 40"]


def test_a_studio_approval_while_the_terminal_pays_is_refused(
    project: Payments, run_id: str, studio: TestClient,
) -> None:
    terminal = project.start("resume", run_id, "--approve", "pay_1", gated=True)
    try:
        project.wait_paying()  # the terminal holds the run, paying, right now
        code, text = approve_in_studio(studio, run_id)
        assert code == 409, text
        # the terminal's approval was saved before it paid: the studio says it stands
        assert f"request 'pay_1' of run {run_id!r} was already approved" in text, text
        assert project.paid() == ["paid 40"]
    finally:
        project.let_go()
        out, err = terminal.communicate(timeout=120)
    assert terminal.returncode == 0, out + err
    assert f"success run {run_id}" in out
    code, text = approve_in_studio(studio, run_id)
    assert code == 409 and "already finished" in text, text
    assert project.paid() == ["paid 40"]


def _finished(studio: TestClient, run_id: str) -> dict:
    from tests.support.durable import wait_for

    def done() -> dict | None:
        view = studio.get(f"/api/run/cp/{run_id}").json()
        return view if view["status"] in ("success", "failure") else None

    return wait_for(done, 120, "the studio's run to finish")
