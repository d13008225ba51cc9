"""Control and format characters from a run (ANSI escapes, bidi overrides, zero-width spaces)
are shown as escapes in the studio, as the CLI shows them: a bidi override in a tool call's
arguments made the approval box read ``"prod,"exe.png`` for ``prod\\u202egnp.exe``."""

from __future__ import annotations

import json
from pathlib import Path

from starlette.testclient import TestClient

from tests.studio.test_app import _csrf, _finished
from tests.support.durable import wait_for
from tests.support.studio import start_suspended

TARGET = "prod\u202egnp.exe \x1b[2J zero\u200bwidth"
HIDDEN = ("\u202e", "\x1b", "\u200b")


def _raw(text: str) -> list[str]:
    return [c for c in HIDDEN if c in text]


def test_an_approval_shows_hidden_characters_as_escapes(client: TestClient,
                                                         checkpoints: Path) -> None:
    run_id = start_suspended(checkpoints, TARGET)
    view = client.get(f"/api/run/cp/{run_id}").json()
    [request] = view["pending"]
    for text in (request["summary"], request["arguments"]):
        assert not _raw(text), text
        assert "\\u202e" in text and "\\u001b" in text and "\\u200b" in text
    # the arguments are still the call's JSON: what the edit box holds means the same call
    assert json.loads(request["arguments"]) == {"target": TARGET}
    for entry in view["timeline"]:
        assert not _raw(entry["title"] + entry["text"]), entry
    page = client.get(f"/run/cp/{run_id}").text
    assert not _raw(page)
    answer = client.post(f"/run/cp/{run_id}/approve", json={"call_id": "deploy_1"},
                         headers={"X-CSRF-Token": _csrf(client, run_id)})
    assert answer.status_code == 200, answer.text
    done = wait_for(lambda: _finished(client, run_id), 60, "the run to finish")
    assert done["status"] == "success"
    assert "deployed</b> prod\\u202egnp.exe" in done["result"] and not _raw(done["result"])
    assert not _raw(client.get(f"/run/cp/{run_id}").text)
    # the state itself is kept as it was: a fork starts from the real value
    state = json.dumps(done["state"], ensure_ascii=False)
    assert "\u202e" in state
