"""The studio tells a run of two agents in namespaced branches right: both models number their
calls ``call_0``, and each branch's entries show its own call's arguments (the person's edit
where they edited it), its result and its request id (``left/call_0``), never the other's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jianmu import ReactiveRunner, SQLiteCheckpointer
from jianmu.studio import CheckpointRuns
from jianmu.studio.runs import Journal
from tests.nodes.test_one_call_id_two_namespaces import state, tree


def _run(path: Path) -> CheckpointRuns:
    runner = ReactiveRunner(tree(), state(), checkpointer=SQLiteCheckpointer(path), run_id="team")
    result = runner.run_sync(timeout=30)
    assert sorted(r.id for r in result.pending) == ["left/call_0", "right/call_0"]
    runner.approve("left/call_0", arguments={"to": "alice", "amount": 50})
    runner.approve("right/call_0")
    assert runner.run_sync(timeout=30).ok
    return CheckpointRuns(str(path), Journal(str(path)))


def _one(view: dict[str, Any], title: str, node: str) -> dict[str, Any]:
    (entry,) = [e for e in view["timeline"]
                if e["title"].startswith(title) and e["node"].startswith(node)]
    return entry


def test_each_branch_shows_its_own_call(tmp_path: Path) -> None:
    view = _run(tmp_path / "runs.sqlite").view("team")
    left = _one(view, "started: pay", "team/left")
    assert '"amount": 50' in left["text"] and "bob" not in left["text"]  # the edit ran
    assert left["call"] == "left/call_0"
    right = _one(view, "started: pay", "team/right")
    assert '"bob"' in right["text"] and '"amount": 7' in right["text"]
    assert right["call"] == "right/call_0"
    paid = _one(view, "result of pay", "team/left")["text"]
    assert paid.endswith("paid alice 50") and "edited" in paid
    assert _one(view, "result of pay", "team/right")["text"] == "paid bob 7"


def test_the_cli_names_each_branchs_call_by_its_request_id(tmp_path: Path) -> None:
    """``jianmu runs show --json`` reads the same timeline."""
    from jianmu._cli.points import run_points

    path = tmp_path / "runs.sqlite"
    _run(path)
    shown = run_points(SQLiteCheckpointer(path), "team")
    started = {e["node"].split("/")[1]: e["call"] for e in shown["timeline"]
               if e["title"] == "started: pay"}
    assert started == {"left": "left/call_0", "right": "right/call_0"}
