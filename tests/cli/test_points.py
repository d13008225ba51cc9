"""``jianmu runs show`` and ``jianmu runs fork`` on the runs 'jianmu run' saved."""

from __future__ import annotations

import json
import re

from jianmu.runtime import SQLiteCheckpointer
from tests.cli._helpers import REPO, Project, assert_clean_error, pending_of

APPROVAL_FLOW = str(REPO / "examples" / "approval_flow.py")


def _finished(project: Project, note: str = "milk") -> str:
    first = project.jianmu("run", APPROVAL_FLOW, "-i", f"note={note}", "--approve-all")
    assert first.code == 0, first.text
    found = re.search(r"^run (\w+):", first.out, re.M)
    assert found, first.out
    return found.group(1)


def _points(project: Project, run_id: str) -> list[dict]:
    done = project.jianmu("runs", "show", run_id, "--json")
    assert done.code == 0, done.text
    return list(json.loads(done.out)["points"])


def _notes(project: Project) -> list[str]:
    return (project.root / ".jianmu" / "notes.txt").read_text().splitlines()


def test_show_lists_the_points_with_their_numbers(project: Project) -> None:
    first = project.jianmu("run", APPROVAL_FLOW, "-i", "note=milk", "--non-interactive")
    run_id, (request,) = pending_of(first.out)
    shown = project.jianmu("runs", "show", run_id)
    assert shown.code == 0, shown.text
    assert f"run {run_id}: suspended" in shown.out
    assert "asked: append_note" in shown.out
    assert f"resume with: jianmu resume {run_id} --approve {request}" in shown.out
    assert f"fork with: jianmu runs fork {run_id} --at POINT" in shown.out
    points = _points(project, run_id)
    assert [p["n"] for p in points] == list(range(len(points)))
    assert points[0]["label"] == "start"
    with SQLiteCheckpointer(project.root / ".jianmu" / "runs.sqlite") as store:
        assert [p.number for p in store.history.points(run_id)] == [p["n"] for p in points]
    for point in points:
        assert re.search(rf"^│ {point['n']} +│ {point['tick']} ", shown.out, re.M), point


def test_fork_after_the_call_does_not_run_it_again(project: Project) -> None:
    run_id = _finished(project)
    points = _points(project, run_id)
    # the point whose timeline holds the call's result (it may share a tick with its start)
    shown = project.jianmu("runs", "show", run_id, "--json")
    entries = json.loads(shown.out)["timeline"]
    after = next(e["point"] for e in entries if e["title"].startswith("result of append_note"))
    forked = project.jianmu("runs", "fork", run_id, "--at", str(after))
    assert forked.code == 0, forked.text
    assert re.search(rf"^forked run \w+ from run {run_id} at point {after}:", forked.out, re.M)
    assert "result: added 'milk' to .jianmu/notes.txt" in forked.out
    assert _notes(project) == ["milk"]  # the call ran once, in the original
    assert _points(project, run_id) == points  # the original is untouched


def test_fork_before_the_call_runs_it_through_the_guard(project: Project) -> None:
    run_id = _finished(project)
    points = _points(project, run_id)
    before = next(p["n"] for p in points if "asked: append_note" in p["label"]) - 1
    actions = '[{"name": "append_note", "arguments": {"text": "bread"}}]'
    asked = project.jianmu("runs", "fork", run_id, "--at", str(before), "--set",
                           f"actions:={actions}", "--non-interactive")
    assert asked.code == 3, asked.text  # the guard asks again: the old approval is not reused
    fork_id, (request,) = pending_of(asked.out)
    assert '"text": "bread"' in asked.out
    done = project.jianmu("resume", fork_id, "--approve", request)
    assert done.code == 0, done.text
    assert _notes(project) == ["milk", "bread"]
    shown = project.jianmu("runs", "show", fork_id)
    assert f"forked from: run {run_id} at point {before}" in shown.out


def test_bad_points_and_values_exit_2_and_leave_no_run(project: Project) -> None:
    run_id = _finished(project)
    last = _points(project, run_id)[-1]["n"]
    with SQLiteCheckpointer(project.root / ".jianmu" / "runs.sqlite") as store:
        runs = len(store.list_runs())
    wrong = project.jianmu("runs", "fork", run_id, "--at", "999")
    assert_clean_error(wrong, 2, f"--at 999: run '{run_id}' has no point 999: its points are "
                                 f"0 to {last}")
    bad = project.jianmu("runs", "fork", run_id, "--at", "1", "--set", "rounds=many")
    assert_clean_error(bad, 2, "the fork did not start", "was removed", "rounds")
    unparsed = project.jianmu("runs", "fork", run_id, "--at", "1", "--set", "x:={nope")
    assert_clean_error(unparsed, 2, "--set 'x:={nope'")
    missing = project.jianmu("runs", "show", "nope")
    assert_clean_error(missing, 2, "no run 'nope'", run_id)
    with SQLiteCheckpointer(project.root / ".jianmu" / "runs.sqlite") as store:
        assert len(store.list_runs()) == runs
    assert _notes(project) == ["milk"]


def test_a_damaged_checkpoint_is_listed_as_damaged_and_hides_no_other_run(
    project: Project,
) -> None:
    """One run's row cut short (a damaged file, a store's bug): ``runs list`` failed as a whole
    with that run's error; it lists the run as damaged, and the others as they are."""
    import sqlite3

    done = _finished(project)
    first = project.jianmu("run", APPROVAL_FLOW, "-i", "note=eggs", "--non-interactive")
    waiting, _ = pending_of(first.out)
    with sqlite3.connect(project.root / ".jianmu" / "runs.sqlite") as db:
        db.execute("UPDATE checkpoints SET data = substr(data, 1, 40) WHERE run_id = ?"
                   " AND seq = (SELECT MAX(seq) FROM checkpoints WHERE run_id = ?)",
                   (waiting, waiting))
    listed = project.jianmu("runs", "list", "--json")
    assert listed.code == 0, listed.text
    assert [(r["run_id"], r["status"], r["tree"]) for r in json.loads(listed.out)] == [
        (waiting, "damaged", None), (done, "success", "approval-flow")]
    only = project.jianmu("runs", "list", "--status", "damaged", "--json")
    assert [r["run_id"] for r in json.loads(only.out)] == [waiting]
    table = project.jianmu("runs", "list")
    assert table.code == 0 and "damaged" in table.out, table.text
    shown = project.jianmu("runs", "show", waiting)  # says what is wrong with it
    assert_clean_error(shown, 1, f"the checkpoint of run {waiting!r}", "is not JSON")


def test_list_shows_the_saved_runs_newest_first(project: Project) -> None:
    """``jianmu runs list`` asked for a durable app; without one it lists the runs 'jianmu
    run' saved, as ``runs show`` shows one."""
    none = project.jianmu("runs", "list")
    assert_clean_error(none, 2, "no runs saved in")
    done = _finished(project)
    first = project.jianmu("run", APPROVAL_FLOW, "-i", "note=eggs", "--non-interactive")
    waiting, _ = pending_of(first.out)
    listed = project.jianmu("runs", "list", "--json")
    assert listed.code == 0, listed.text
    rows = json.loads(listed.out)
    assert [(r["run_id"], r["status"], r["pending"]) for r in rows] == [
        (waiting, "suspended", 1), (done, "success", 0)]
    assert {r["tree"] for r in rows} == {"approval-flow"}
    table = project.jianmu("runs", "list")
    assert table.code == 0, table.text
    assert table.out.index(waiting) < table.out.index(done)
    assert "show one with: jianmu runs show RUN_ID" in table.out
    only = project.jianmu("runs", "list", "--status", "success", "--json")
    assert [r["run_id"] for r in json.loads(only.out)] == [done]
    assert "no runs with status stopped" in project.jianmu("runs", "list", "--status",
                                                         "stopped").out


def test_show_says_how_to_answer_a_question(project: Project) -> None:
    # it said "--approve ask:ask flow/ask", which resume refuses for a question (and the shell
    # splits at the space)
    import shlex

    flow = str(REPO / "tests" / "studio" / "ask_flow.py")
    first = project.jianmu("run", flow, "--non-interactive")
    found = re.search(r"^suspended: run (\w+) waits for 1 answer\(s\);", first.out, re.M)
    assert found, first.text  # not "1 approval(s)"
    run_id = found.group(1)
    shown = project.jianmu("runs", "show", run_id)
    assert shown.code == 0, shown.text
    hint = re.search(r"^resume with: (.+)$", shown.out, re.M)
    # with the config the run is saved under, as `jianmu run` gives it
    assert hint and hint.group(1) == (f"jianmu resume {run_id} --answer 'ask:ask flow/ask' TEXT"
                                      f" --config {shlex.quote(str(project.config))}")
    argv = shlex.split(hint.group(1).replace("TEXT", "Lisbon"))
    done = project.jianmu(*argv[1:])  # as a person would type it
    assert done.code == 0, done.text
    assert "going to Lisbon" in done.out
