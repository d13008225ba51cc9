"""Red team: text a model may send that JSON allows and UTF-8 or JSON numbers do not.

Found here: a tool call whose arguments hold ``"\\ud800"`` (a lone surrogate: a valid JSON
escape) made a checkpointed run raise ``UnicodeEncodeError`` out of ``run()``: the run's
points went to SQLite as UTF-8, which cannot encode it. And a model's ``NaN`` (Python's JSON
reads it) must not break the studio's view of the run either: a browser's JSON has no such
number. Now the points, the studio's journal and its responses are written with ``\\u``
escapes when the text needs them (`json_text`, which reads back as the same text); the call
with the NaN is refused (no tool takes a number JSON has not) and stays in the run's messages.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from jianmu import ReactiveRunner, RunStatus, StateManager
from jianmu._json import json_text
from jianmu.llm import LLMResponse, Message, ScriptedLLM
from jianmu.nodes import AgentState, create_react_node
from jianmu.runtime import SQLiteCheckpointer
from jianmu.studio import CheckpointRuns, create_app
from jianmu.studio.runs import Journal
from jianmu.tools import tool

pytestmark = pytest.mark.anyio
LONE = "\ud800"
TOKEN = "t0ken"


@tool
def note(text: str, score: float) -> str:
    """Keep a note.

    Args:
        text: the note.
        score: how much it matters.
    """
    return f"noted {text} ({score})"


async def hostile_run(path: Path) -> str:
    arguments = '{"text": "a \\ud800 b", "score": NaN}'  # as a model's JSON would say them
    reply = LLMResponse(message=Message(role="assistant", tool_calls=[
        {"id": "c1", "name": "note", "arguments": arguments}]))
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": f"go {LONE}"}]})
    runner = ReactiveRunner(create_react_node(ScriptedLLM([reply, f"done {LONE}"]), [note]),
                            state, checkpointer=SQLiteCheckpointer(str(path)))
    result = await runner.run(timeout=60)
    assert result.status is RunStatus.SUCCESS, result.error
    told = [m.content or "" for m in state.get("messages") if m.role == "tool"]
    # NaN is no JSON number: the call is refused (`test_redteam_non_finite_numbers`), and the
    # call itself, NaN and lone surrogate included, stays in the run's messages
    assert len(told) == 1 and "$.score: NaN and Infinity are not JSON numbers" in told[0]
    return result.run_id


async def test_a_lone_surrogate_and_nan_from_the_model_are_checkpointed(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    run_id = await hostile_run(path)
    saved = SQLiteCheckpointer(str(path)).load(run_id)
    assert saved is not None and saved["status"] == "success"
    assert saved["state"]["root"]["final_answer"] == f"done {LONE}"  # read back as it was


async def test_the_studio_shows_such_a_run(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    run_id = await hostile_run(path)
    app = create_app([CheckpointRuns(str(path), Journal(str(path)))], TOKEN, by="tester")
    with TestClient(app, base_url="http://127.0.0.1", follow_redirects=False) as client:
        assert client.get(f"/?token={TOKEN}").status_code == 303
        view = client.get(f"/api/run/cp/{run_id}")
        assert view.status_code == 200, view.text
        text = view.content.decode("utf-8")
        assert '"text":"a \\ud800 b"' in text  # escaped, as JSON may say it
        assert client.get(f"/run/cp/{run_id}").status_code == 200  # the page
        assert client.get("/").status_code == 200  # the list of runs


@pytest.mark.parametrize("value", [f"a {LONE}", {"k": [LONE, "é", "木"]}, "plain 木"])
def test_json_text_reads_back_as_the_same_value_and_encodes(value: Any) -> None:
    text = json_text(value)
    assert json.loads(text) == value
    text.encode("utf-8")
    if value == "plain 木":
        assert "木" in text  # no escapes where UTF-8 needs none
