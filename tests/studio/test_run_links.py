"""A run's id is any text (`ReactiveRunner(run_id=...)`): the studio's links to a run say it
URL-encoded. ``nightly build #7?v=2 100%`` was linked as written, so the browser took ``#7``
for a fragment and the page answered "no run 'nightly build '"."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path
from urllib.parse import quote

from starlette.testclient import TestClient

from jianmu import ReactiveRunner, ScriptedLLM, SQLiteCheckpointer, StateManager, tool
from jianmu.nodes import AgentState, create_react_node
from jianmu.runtime.fork import fork_run
from jianmu.studio import CheckpointRuns, create_app
from jianmu.studio.runs import Journal
from tests.studio.conftest import TOKEN

ODD = "nightly build #7?v=2 100%"


@tool(read_only=False, confirm=True)
def flag_account(account: str) -> str:
    """Flag an account.

    Args:
        account: its id.
    """
    return f"flagged {account}"


def test_links_to_a_run_with_an_odd_id_open_it(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    tree = create_react_node(ScriptedLLM([
        [{"name": "flag_account", "arguments": {"account": "A-7"}}], "ok"]), [flag_account])
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "x"}]})
    store = SQLiteCheckpointer(str(path))
    runner = ReactiveRunner(tree, state, checkpointer=store, run_id=ODD)
    assert runner.run_sync(timeout=30).status.value == "suspended"
    fork_id = fork_run(store, ODD, 1)
    app = create_app([CheckpointRuns(str(path), Journal(str(path)))], TOKEN, by="tester",
                     project=str(tmp_path))
    with TestClient(app, base_url="http://127.0.0.1", follow_redirects=False) as client:
        assert client.get(f"/?token={TOKEN}").status_code == 303
        listed = client.get("/?scope=all").text
        found = {unescape(h) for h in re.findall(r'href="(/run/[^"]+)"', listed)}
        # the fork's origin links to the run again, at the point it was forked from
        assert {h for h in found if "#" in h} == {f"/run/cp/{quote(ODD, safe='')}#point=1"}
        links = {h.partition("#")[0] for h in found}
        assert len(links) == 2  # the run, and its fork
        for link in links:
            page = client.get(link)
            assert page.status_code == 200, (link, page.text)
        shown = client.get(next(h for h in links if fork_id in h)).text
        [origin] = re.findall(r'forked from <a href="([^"]+)"', shown)
        opened = client.get(unescape(origin))
        assert opened.status_code == 200 and "nightly build #7?v=2 100%" in unescape(
            opened.text)


def test_a_run_whose_id_holds_a_slash_opens_and_is_decided(tmp_path: Path) -> None:
    """``team/nightly``: its link says ``team%2Fnightly``, which the server reads back as
    ``team/nightly``; the routes took the slash for the end of the id, and the page answered
    405 (Method Not Allowed): the run could be neither seen nor approved in the studio."""
    path = tmp_path / "runs.sqlite"
    tree = create_react_node(ScriptedLLM([
        [{"name": "flag_account", "arguments": {"account": "A-7"}}], "ok"]), [flag_account])
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "x"}]})
    runner = ReactiveRunner(tree, state, checkpointer=SQLiteCheckpointer(str(path)),
                            run_id="team/nightly")
    (request,) = runner.run_sync(timeout=30).pending
    app = create_app([CheckpointRuns(str(path), Journal(str(path)))], TOKEN, by="tester",
                     project=str(tmp_path))
    with TestClient(app, base_url="http://127.0.0.1", follow_redirects=False) as client:
        assert client.get(f"/?token={TOKEN}").status_code == 303
        [link] = {unescape(h) for h in re.findall(r'href="(/run/[^"]+)"',
                                                  client.get("/?scope=all").text)}
        assert link == "/run/cp/team%2Fnightly"
        page = client.get(link)
        assert page.status_code == 200, page.text
        assert client.get(f"/api{link}").json()["run_id"] == "team/nightly"
        assert client.get(f"/api{link}/point/0").status_code == 200
        csrf = page.text.split('<meta name="csrf" content="', 1)[1].split('"', 1)[0]
        answer = client.post(f"{link}/reject", json={"call_id": request.id},
                             headers={"X-CSRF-Token": csrf})
        assert answer.status_code == 200, answer.text
