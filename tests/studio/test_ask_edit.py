"""The studio's approval box with edited arguments, and a question's text box (issue 36)."""

from __future__ import annotations

import re
from pathlib import Path

from starlette.testclient import TestClient

from tests.studio.test_app import _csrf, _finished
from tests.support.durable import wait_for


def test_approve_with_edited_arguments(client: TestClient, run_id: str) -> None:
    csrf = _csrf(client, run_id)
    page = client.get(f"/run/cp/{run_id}").text
    assert 'class="edit-arguments"' in page
    bad = client.post(f"/run/cp/{run_id}/approve",
                      json={"call_id": "deploy_1", "arguments": {"target": 5}},
                      headers={"X-CSRF-Token": csrf})
    assert bad.status_code == 409 and "$.target" in bad.json()["error"]
    assert client.get(f"/api/run/cp/{run_id}").json()["status"] == "suspended"
    not_object = client.post(f"/run/cp/{run_id}/approve",
                             json={"call_id": "deploy_1", "arguments": ["x"]},
                             headers={"X-CSRF-Token": csrf})
    assert not_object.status_code == 400
    answer = client.post(f"/run/cp/{run_id}/approve",
                         json={"call_id": "deploy_1", "arguments": {"target": "staging"}},
                         headers={"X-CSRF-Token": csrf})
    assert answer.status_code == 200, answer.text
    assert "with edited arguments" in answer.json()["message"]
    view = wait_for(lambda: _finished(client, run_id), 60, "the run to finish")
    assert view["status"] == "success"
    assert "deployed</b> staging" in view["result"]
    assert "a person edited" in view["result"]
    [approved] = [t for t in view["timeline"] if t["kind"] == "decision"]
    assert "(edited)" in approved["title"] and '"staging"' in approved["text"]


def _start_question(checkpoints: Path) -> str:
    from contextlib import redirect_stdout
    from io import StringIO

    from jianmu.cli import main

    config = checkpoints.parent / "jianmu.yaml"
    out = StringIO()
    with redirect_stdout(out):
        code = main(["run", str(Path(__file__).parent / "ask_flow.py"), "--config", str(config),
                     "--non-interactive"])
    assert code == 3, out.getvalue()
    found = re.search(r"run (\w+)", out.getvalue())
    assert found, out.getvalue()
    return found.group(1)


def test_a_question_is_answered_in_the_text_box(client: TestClient, checkpoints: Path) -> None:
    asking = _start_question(checkpoints)
    view = client.get(f"/api/run/cp/{asking}").json()
    [request] = view["pending"]
    assert request["kind"] == "question" and request["question"] == "Which <b>city</b>?"
    page = client.get(f"/run/cp/{asking}").text
    assert 'class="answer-text"' in page and "Which &lt;b&gt;city&lt;/b&gt;?" in page
    csrf = _csrf(client, asking)
    refused = client.post(f"/run/cp/{asking}/approve", json={"call_id": request["id"]},
                          headers={"X-CSRF-Token": csrf})
    assert refused.status_code == 409 and "is a question" in refused.json()["error"]
    no_text = client.post(f"/run/cp/{asking}/answer", json={"call_id": request["id"]},
                          headers={"X-CSRF-Token": csrf})
    assert no_text.status_code == 400
    answer = client.post(f"/run/cp/{asking}/answer",
                         json={"call_id": request["id"], "answer": "Lisbon"},
                         headers={"X-CSRF-Token": csrf})
    assert answer.status_code == 200, answer.text
    assert answer.json()["message"].startswith(f"answered {request['id']}")
    done = wait_for(lambda: _finished(client, asking), 60, "the run to finish")
    assert done["status"] == "success" and done["result"] == "going to Lisbon"
    [answered] = [t for t in done["timeline"] if t["kind"] == "decision"]
    assert answered["title"].startswith("answered") and answered["text"] == "Lisbon"


def test_the_timeline_says_who_answered_a_question(client: TestClient,
                                                   checkpoints: Path) -> None:
    """As it says who approved a call ("approved by tester: deploy"): the run's own record of
    the answer comes first and carries no name, the studio's journal has it."""
    asking = _start_question(checkpoints)
    [request] = client.get(f"/api/run/cp/{asking}").json()["pending"]
    answer = client.post(f"/run/cp/{asking}/answer",
                         json={"call_id": request["id"], "answer": "Lisbon"},
                         headers={"X-CSRF-Token": _csrf(client, asking)})
    assert answer.status_code == 200, answer.text
    done = wait_for(lambda: _finished(client, asking), 60, "the run to finish")
    [answered] = [t for t in done["timeline"] if t["kind"] == "decision"]
    assert answered["title"] == f"answered by tester: {request['id']}"



def test_the_timeline_shows_the_call_as_it_ran_after_an_edit(tmp_path: Path) -> None:
    """The call that ran is the edited one: its "started" entry said the model's arguments
    (the conversation's), the address the mail did not go to."""
    from jianmu import ReactiveRunner, ScriptedLLM, SQLiteCheckpointer, StateManager, tool
    from jianmu.nodes import AgentState, create_react_node
    from jianmu.studio import CheckpointRuns
    from jianmu.studio.runs import Journal

    @tool(read_only=False, confirm=True)
    def send_mail(to: str) -> str:
        """Send a mail.

        Args:
            to: the address.
        """
        return f"sent to {to}"

    path = str(tmp_path / "runs.sqlite")
    tree = create_react_node(ScriptedLLM([
        [{"name": "send_mail", "arguments": {"to": "bob@example.com"}}], "sent"]), [send_mail])
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "mail"}]})
    runner = ReactiveRunner(tree, state, checkpointer=SQLiteCheckpointer(path))
    waiting = runner.run_sync(timeout=30)
    runner.approve(waiting.pending[0].id, arguments={"to": "carol@example.com"})
    assert runner.run_sync(timeout=30).ok
    view = CheckpointRuns(path, Journal(path)).view(runner.run_id)
    [started] = [t for t in view["timeline"] if t["title"] == "started: send_mail"]
    assert "carol@example.com" in started["text"] and "bob" not in started["text"], started
