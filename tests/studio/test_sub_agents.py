"""The studio tells a run with sub-agents right: each call's arguments and result are its own
(call ids repeat across agents), the sub-agent is drawn in the graph, and its ticks are folded."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from jianmu import ReactiveRunner, ScriptedLLM, SQLiteCheckpointer, StateManager
from jianmu.nodes import AgentState, agent_tool, create_react_node
from jianmu.nodes.agents import _label
from jianmu.runtime.scopes import agent_part, unmarked
from jianmu.studio import CheckpointRuns
from jianmu.studio.runs import Journal
from jianmu.studio.timeline import call_scope
from jianmu.tools import tool


@tool
def search_notes(query: str) -> str:
    """Search notes.

    Args:
        query: a keyword.
    """
    return f"notes about {query}"


@tool(read_only=False, confirm=True)
def flag_account(account: str) -> str:
    """Flag an account.

    Args:
        account: its id.
    """
    return f"flagged {account}"


@tool
def lookup_order(order: str) -> str:
    """Look an order up.

    Args:
        order: its id.
    """
    return f"order {order}: shipped"


def _run(path: Path) -> tuple[str, CheckpointRuns]:
    researcher = create_react_node(ScriptedLLM([
        [{"name": "search_notes", "arguments": {"query": "fraud"}}],
        [{"name": "flag_account", "arguments": {"account": "A-7"}}],
        "Account A-7 is flagged.",
    ]), [search_notes, flag_account], name="researcher")
    lead = create_react_node(ScriptedLLM([
        [{"name": "lookup_order", "arguments": {"order": "O-1"}},
         {"name": "researcher", "arguments": {"input": "check the account of O-1"}}],
        "Done.",
    ]), [lookup_order, agent_tool(researcher, name="researcher", description="Researches.")],
        name="lead")
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "O-1?"}]})
    runner = ReactiveRunner(lead, state, checkpointer=SQLiteCheckpointer(path), run_id="team")
    result = runner.run_sync(timeout=30)
    assert result.status.value == "suspended"
    runner.approve(result.pending[0].id)
    assert runner.run_sync(timeout=30).ok
    return "team", CheckpointRuns(str(path), Journal(str(path)))


def _entries(view: dict[str, Any], title: str) -> list[dict[str, Any]]:
    return [e for e in view["timeline"] if e["title"].startswith(title)]


def test_each_call_shows_its_own_arguments_and_result(tmp_path: Path) -> None:
    run_id, runs = _run(tmp_path / "runs.sqlite")
    view = runs.view(run_id)
    (search,) = _entries(view, "started: search_notes")
    assert "fraud" in search["text"] and "O-1" not in search["text"]
    (result,) = _entries(view, "result of search_notes")
    assert result["text"] == "notes about fraud"
    (flagged,) = _entries(view, "result of flag_account")
    assert flagged["text"] == "flagged A-7"  # not lookup_order's result, call_1 of the lead
    (lookup,) = _entries(view, "result of lookup_order")
    assert lookup["text"] == "order O-1: shipped"
    assert search["call"] == "researcher/call_2/call_1" and search["depth"] == 1
    assert lookup["call"] == "call_1" and lookup["depth"] == 0


def test_sub_agent_ticks_are_folded_and_its_end_is_said(tmp_path: Path) -> None:
    run_id, runs = _run(tmp_path / "runs.sqlite")
    view = runs.view(run_id)
    assert not [e for e in view["timeline"] if "ticked" in e["title"]]
    assert _entries(view, "sub-agent researcher waits for 1 approval(s)")
    assert _entries(view, "sub-agent researcher success")


def test_the_graph_draws_the_sub_agent_under_its_caller(tmp_path: Path) -> None:
    run_id, runs = _run(tmp_path / "runs.sqlite")
    nodes = runs.view(run_id)["nodes"]
    (agent,) = [n for n in nodes if n["kind"] == "agent"]
    caller = next(n for n in nodes if n["key"] == agent["parent"])
    assert agent["name"] == "researcher" and caller["name"] == "lead.tools"
    assert agent["path"] == f"{caller['path']}/researcher" and agent["status"] == "success"
    first = runs.point(run_id, 1)["nodes"]
    assert [n["status"] for n in first if n["kind"] == "agent"] == ["invalid"]  # not run yet


def test_call_scope_reads_sub_agent_parts_not_sibling_indexes() -> None:
    assert call_scope("lead/lead.tools") == ""
    assert call_scope("lead/tools/researcher[call_1]/researcher/r.tools") == "researcher/call_1"
    assert call_scope("a/fetch[2]/x") == ""
    assert call_scope("l/t/r[c1]/r/t/helper[c4]/h") == "r/c1/helper/c4"
    assert call_scope("l/t/researcher[#2]/r/t/helper[#1]/h") == "researcher/2/helper/1"
    assert call_scope("l/t/researcher[x%5D1]/r") == "researcher/x]1"


CALL_IDS = ["1", "2", "10", "007", "x]1", "[0]", "a[b", "]", "%5B", "#1", "٣", "call.1",
            "a/b", " 00", "\u2000", "step", "", "call_1"]


@pytest.mark.parametrize("call_id", CALL_IDS)
def test_a_sub_agents_path_part_is_read_back_for_any_call_id(call_id: str) -> None:
    """The part where a call's tree hangs names the call's namespace one to one, and is never
    a sibling's index (``fetch[2]``): call ids of digits alone (``1``, as some servers number
    calls) or with brackets too."""
    label = _label(call_id)
    part = agent_part("researcher", label)
    assert re.fullmatch(r"[^\[\]]+\[[0-9]+\]", part) is None and part.count("[") == 1
    assert call_scope(f"lead/tools/{part}/researcher/r.tools") == f"researcher/{label}"
    assert call_scope(f"l/{part}/r/t/{agent_part('helper', label)}/h") == \
        f"researcher/{label}/helper/{label}"
    # as an older version spelt it (a request restored from its checkpoint names it so)
    assert unmarked(f"l/{part}/r/fetch[2]") == f"l/researcher[{label}]/r/fetch[2]"


def test_digit_call_ids_show_the_sub_agents_own_calls(tmp_path: Path) -> None:
    """A lead whose model numbers its calls ``1``, ``2`` (some OpenAI-compatible servers do),
    as does its sub-agent's: the sub-agent's call shows its own arguments and result, one
    level in, not the lead's call ``1``."""
    researcher = create_react_node(ScriptedLLM([
        [{"id": "1", "name": "lookup_order", "arguments": {"order": "INNER"}}], "inner done",
    ]), [lookup_order], name="researcher")
    lead = create_react_node(ScriptedLLM([
        [{"id": "1", "name": "lookup_order", "arguments": {"order": "OUTER"}},
         {"id": "2", "name": "researcher", "arguments": {"input": "go"}}], "Done.",
    ]), [lookup_order, agent_tool(researcher, name="researcher", description="R.")],
        name="lead")
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "q"}]})
    path = tmp_path / "runs.sqlite"
    runner = ReactiveRunner(lead, state, checkpointer=SQLiteCheckpointer(path), run_id="digits")
    assert runner.run_sync(timeout=30).ok
    view = CheckpointRuns(str(path), Journal(str(path))).view("digits")
    started = _entries(view, "started: lookup_order")
    results = _entries(view, "result of lookup_order")
    assert [(e["call"], e["depth"]) for e in started] == [("1", 0), ("researcher/2/1", 1)]
    assert "OUTER" in started[0]["text"] and "INNER" in started[1]["text"]
    assert [e["text"] for e in results] == ["order OUTER: shipped", "order INNER: shipped"]
    assert [e["call"] for e in results] == ["1", "researcher/2/1"]


def test_a_nested_sub_agents_own_entries_sit_where_its_call_does(tmp_path: Path) -> None:
    """lead -> researcher -> helper: the helper's own entries (it waits, it ended) and the
    decision on its call are nested as its call and its calls are, not at the run's level."""
    helper = create_react_node(ScriptedLLM([
        [{"name": "flag_account", "arguments": {"account": "A-7"}}], "helper done",
    ]), [flag_account], name="helper")
    researcher = create_react_node(ScriptedLLM([
        [{"name": "helper", "arguments": {"input": "go"}}], "researcher done",
    ]), [agent_tool(helper, name="helper", description="H.")], name="researcher")
    lead = create_react_node(ScriptedLLM([
        [{"name": "researcher", "arguments": {"input": "go"}}], "Done.",
    ]), [agent_tool(researcher, name="researcher", description="R.")], name="lead")
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "q"}]})
    path = tmp_path / "runs.sqlite"
    runner = ReactiveRunner(lead, state, checkpointer=SQLiteCheckpointer(path), run_id="nest")
    waiting = runner.run_sync(timeout=30)
    runner.approve(waiting.pending[0].id, arguments={"account": "A-8"})
    assert runner.run_sync(timeout=30).ok
    view = CheckpointRuns(str(path), Journal(str(path))).view("nest")

    def depth(title: str) -> int:
        (entry,) = _entries(view, title)
        return int(entry["depth"])

    assert depth("started: helper") == depth("sub-agent helper waits") == 1
    assert depth("sub-agent helper success") == depth("result of helper") == 1
    assert depth("started: researcher") == depth("sub-agent researcher success") == 0
    assert depth("approved (edited): flag_account") == depth("asked: flag_account") == 2
    assert depth("result of flag_account") == 2


@tool
def read_report(name: str) -> str:
    """Read a long report.

    Args:
        name: its name.
    """
    return f"report {name}: " + "x" * 400 + " [end of report]"


def ended_team_run(path: Path) -> str:
    """A lead whose researcher reads a report longer than an event's preview, and ends: the
    run's id (``ended``)."""
    name = "quarterly-" + "q" * 300 + "-final"
    researcher = create_react_node(ScriptedLLM([
        [{"name": "read_report", "arguments": {"name": name}}], "read " + "y" * 300 + " [end]",
    ]), [read_report], name="researcher")
    lead = create_react_node(ScriptedLLM([
        [{"name": "researcher", "arguments": {"input": "read it"}}], "Done.",
    ]), [agent_tool(researcher, name="researcher", description="R.")], name="lead")
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "q"}]})
    runner = ReactiveRunner(lead, state, checkpointer=SQLiteCheckpointer(path), run_id="ended")
    assert runner.run_sync(timeout=30).ok
    return "ended"


def test_an_ended_sub_agents_calls_keep_their_whole_arguments_and_results(
        tmp_path: Path) -> None:
    """A sub-agent that ended leaves only its answer in the state: its calls' entries still
    show their whole arguments and results (read from the point before it ended), not the
    events' previews cut at 200 characters; the caller's call of it keeps its result."""
    path = tmp_path / "runs.sqlite"
    run_id = ended_team_run(path)
    runs = CheckpointRuns(str(path), Journal(str(path)))
    for _ in range(2):  # the second view reads what the first kept
        view = runs.view(run_id)
        (started,) = _entries(view, "started: read_report")
        (result,) = _entries(view, "result of read_report")
        assert started["call"] == "researcher/call_1/call_1"
        assert "-final" in started["text"] and started["text"].startswith("{\n")
        assert result["text"].endswith("[end of report]")
        (answer,) = _entries(view, "result of researcher")
        assert answer["text"].endswith("[end]")


def test_runs_show_keeps_an_ended_sub_agents_calls_whole(tmp_path: Path) -> None:
    """``jianmu runs show`` tells the same timeline as the studio."""
    from jianmu._cli.points import run_points

    path = tmp_path / "runs.sqlite"
    run_id = ended_team_run(path)
    store = SQLiteCheckpointer(path)
    try:
        entries = run_points(store, run_id)["timeline"]
    finally:
        store.close()
    (result,) = [e for e in entries if e["title"].startswith("result of read_report")]
    assert result["text"].endswith("[end of report]")


@pytest.mark.parametrize("caller", ["", "left"])
def test_the_sub_agents_node_names_the_namespaces_its_calls_run_in(tmp_path: Path,
                                                                    caller: str) -> None:
    """The sub-agent's node says where its state is (a namespace per call, under the
    caller's), not "" (which the page reads as the root state)."""
    researcher = create_react_node(ScriptedLLM(["found"]), [], name="researcher")
    lead = create_react_node(ScriptedLLM([
        [{"name": "researcher", "arguments": {"input": "go"}}], "Done.",
    ]), [agent_tool(researcher, name="researcher", description="R.")], name="lead")
    state = StateManager(AgentState)
    for part in lead.iterate() if caller else ():
        part.namespace = caller  # type: ignore[attr-defined]
    (state.scope(caller) if caller else state).update(
        {"messages": [{"role": "user", "content": "q"}]})
    path = tmp_path / "runs.sqlite"
    runner = ReactiveRunner(lead, state, checkpointer=SQLiteCheckpointer(path), run_id="ns")
    assert runner.run_sync(timeout=30).ok
    view = CheckpointRuns(str(path), Journal(str(path))).view("ns")
    (agent,) = [n for n in view["nodes"] if n["kind"] == "agent"]
    prefix = f"{caller}." if caller else ""
    assert agent["namespace"] == f"{prefix}researcher/<call id> (one per call)"
    assert f"{prefix}researcher/call_1" in view["state"]["namespaces"]


def test_a_run_made_again_under_its_id_shows_its_own_sub_agents_calls(tmp_path: Path) -> None:
    """What the studio kept of a deleted run's ended sub-agents is not shown for the run made
    again under the same id."""
    path = tmp_path / "runs.sqlite"
    runs = CheckpointRuns(str(path), Journal(str(path)))
    run_id = ended_team_run(path)
    assert _entries(runs.view(run_id), "result of read_report")[0]["text"].endswith("report]")
    store = SQLiteCheckpointer(path)
    store.delete(run_id)
    store.close()
    researcher = create_react_node(ScriptedLLM([
        [{"name": "read_report", "arguments": {"name": "other"}}], "read",
    ]), [read_report], name="researcher")
    lead = create_react_node(ScriptedLLM([
        [{"name": "researcher", "arguments": {"input": "read it"}}], "Done.",
    ]), [agent_tool(researcher, name="researcher", description="R.")], name="lead")
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "q"}]})
    again = ReactiveRunner(lead, state, checkpointer=SQLiteCheckpointer(path), run_id=run_id)
    assert again.run_sync(timeout=30).ok
    (started,) = _entries(runs.view(run_id), "started: read_report")
    assert '"other"' in started["text"]
