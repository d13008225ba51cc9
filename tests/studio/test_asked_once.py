"""A request asked once reads as asked once: a run waiting on two approvals, resumed with one
of them decided, suspends again on the other, and its timeline said the other was asked
twice (three times after two resumes), as if a person had been asked again."""

from __future__ import annotations

from contextlib import redirect_stdout
from io import StringIO
from pathlib import Path

from starlette.testclient import TestClient

from tests.support.studio import start_suspended

TWO_CALLS = Path(__file__).resolve().parent / "two_calls_flow.py"


def test_a_request_still_waiting_after_a_resume_is_not_asked_again(
        client: TestClient, checkpoints: Path) -> None:
    from jianmu.cli import main

    run_id = start_suspended(checkpoints, flow=TWO_CALLS)
    out = StringIO()
    with redirect_stdout(out):  # one of the two decided in a terminal: it waits on the other
        code = main(["resume", run_id, "--approve", "deploy_1", "--config",
                     str(checkpoints.parent / "jianmu.yaml"), "--non-interactive"])
    assert code == 3, out.getvalue()
    timeline = client.get(f"/api/run/cp/{run_id}").json()["timeline"]
    asked = [e["call"] for e in timeline if e["kind"] == "ask"]
    assert asked == ["deploy_1", "deploy_2"]


def test_a_request_asked_again_after_its_decision_is_shown_again() -> None:
    from jianmu.studio.timeline import event_timeline

    def asked(at: float) -> dict[str, object]:
        return {"time": at, "name": "interaction.asked", "node": "a/tools",
                "fields": {"request_id": "c1", "tool": "pay", "arguments": {"n": 1}}}

    entries = event_timeline([
        asked(1.0), asked(1.0),  # recorded again by a resumed process: one question
        {"time": 2.0, "name": "interaction.approved", "node": None,
         "fields": {"request_id": "c1", "tool": "pay"}},
        asked(3.0),  # a new question about the same call (a fork, a second round)
    ])
    assert [e["title"] for e in entries] == ["asked: pay", "approved: pay", "asked: pay"]
