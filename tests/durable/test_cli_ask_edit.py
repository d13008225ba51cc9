"""``jianmu runs approve --arguments`` and ``jianmu runs answer`` in real processes (issue 36)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.durable.test_cli import APP, CLI, _clean_error, cli  # noqa: F401 - the fixture
from tests.support.durable import wait_for

pytestmark = pytest.mark.timeout(400)


def test_runs_approve_with_arguments_and_runs_answer(cli: CLI, tmp_path: Path) -> None:  # noqa: F811
    deployed = tmp_path / "deployed.txt"
    cli.worker("w1")
    done = cli("run", "--durable", APP, "confirm", "-i", f"path={deployed}", "--non-interactive")
    assert done.code == 3, done.text
    run_id = done.out.split()[1].rstrip(":")
    _clean_error(cli("runs", "approve", run_id, "deploy_1", "--app", APP, "--arguments",
                     '{"target": 5}'), 2, "$.target", "still pending")
    _clean_error(cli("runs", "answer", run_id, "deploy_1", "yes", "--app", APP), 2,
                 "not for an answer")
    approved = cli("runs", "approve", run_id, "deploy_1", "--app", APP, "--arguments",
                   '{"target": "staging"}')
    assert approved.code == 0, approved.text
    wait_for(lambda: cli.json("runs", "show", run_id, "--app", APP)["status"] == "success",
             what="the edited run to finish")
    assert deployed.read_text().splitlines() == ["deployed staging"]

    asked = cli("run", "--durable", APP, "ask", "--non-interactive")
    assert asked.code == 3, asked.text
    question = asked.out.split()[1].rstrip(":")
    assert f"answer with: jianmu runs answer {question} ask:q1 TEXT" in asked.out
    _clean_error(cli("runs", "approve", question, "ask:q1", "--app", APP), 2, "is a question")
    answered = cli("runs", "answer", question, "ask:q1", "Lisbon", "--app", APP)
    assert answered.code == 0, answered.text
    assert "answered ask:q1" in answered.out
    shown = wait_for(lambda: (s := cli.json("runs", "show", question, "--app", APP))["status"]
                     == "success" and s, what="the answered run to finish")
    assert shown["final_answer"] == "going to Lisbon"
