"""Progress lines and the final tree (jianmu/_cli/progress.py)."""

from __future__ import annotations

import io

import py_trees
from py_trees.common import Status
from rich.console import Console

from jianmu._cli.progress import Progress, render_tree, shorten
from jianmu.runtime.events import Event


def test_shorten_cuts_between_words_and_ends_with_an_ellipsis() -> None:
    text = "the extremely long explanation of the failure keeps going"
    assert shorten(text, 100) == text
    assert shorten(text, 30) == "the extremely long…"
    assert shorten("a,  b\n\tc  d, efgh", 12) == "a, b c d…"
    assert shorten("x" * 50, 10) == "x" * 9 + "…"  # one long word: cut where it must


def test_shorten_escapes_ansi_and_control_characters() -> None:
    assert shorten("red \x1b[31mtext\x1b[0m\x07") == "red \\u001b[31mtext\\u001b[0m\\u0007"


def _console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=200, color_system=None, highlight=False), out


def test_a_failed_node_shows_a_short_reason_in_the_tree() -> None:
    node = py_trees.behaviours.Failure("burn")
    node.tick_once()
    node.feedback_message = "RuntimeError: disk on fire because " + "the fire spreads " * 10
    console, out = _console()
    console.print(render_tree(node))
    line = out.getvalue().strip()
    assert node.status is Status.FAILURE
    assert line.startswith("• burn [✗ failure]  RuntimeError: disk on fire because the")
    assert line.endswith("…") and not line.endswith(" …")
    assert line.split("  ", 1)[1][:-1] in node.feedback_message  # whole words only
    assert len(line.split("  ", 1)[1]) <= 60


def test_event_lines_print_markup_and_escapes_literally() -> None:
    console, out = _console()
    progress = Progress(console, py_trees.behaviours.Success("s"))
    progress.on_event(Event(name="tool.call.started", run_id="r", fields={
        "tool": "bash", "args_preview": '{"command": "[bold]ls\x1b[2J"}'}))
    progress.on_event(Event(name="tool.call.retry", run_id="r", fields={
        "tool": "bash", "attempt": 2, "error": "[red]boom\x1b[0m"}))
    progress.on_event(Event(name="interaction.rejected", run_id="r", fields={
        "request_id": "call_[x]", "message": "no [b]"}))
    assert out.getvalue() == (
        '  → bash({"command": "[bold]ls\\u001b[2J"})\n'
        "  ↻ bash: retry 2 ([red]boom\\u001b[0m)\n"
        "  ✗ rejected call_[x] (no [b])\n"
    )
    assert progress.tool_calls == 1


def test_a_fallback_and_the_model_that_answered_are_shown() -> None:
    console, out = _console()
    progress = Progress(console, py_trees.behaviours.Success("s"))
    progress.on_event(Event(name="llm.fallback", run_id="r", fields={
        "from": "gpt-main", "to": "claude-backup", "error": "HTTP 429 from x: slow down"}))
    progress.on_event(Event(name="llm.call.completed", run_id="r", fields={
        "model": "claude-backup", "tool_calls": [], "answer_preview": "hi",
        "input_tokens": 3, "output_tokens": 1}))
    assert out.getvalue() == (
        "  ⇣ gpt-main failed (HTTP 429 from x: slow down); asking claude-backup\n"
        "  ◆ claude-backup answers: hi [3 in / 1 out tokens]\n"
    )


def test_an_answer_a_guardrail_judges_is_not_shown_as_none() -> None:
    console, out = _console()
    progress = Progress(console, py_trees.behaviours.Success("s"))
    progress.on_event(Event(name="llm.call.completed", run_id="r", fields={
        "model": "m", "tool_calls": [], "answer_preview": None,  # an output guardrail judged it
        "input_tokens": 3, "output_tokens": 1}))
    assert out.getvalue() == (  # it said "m answers: None"
        "  ◆ m answers (not shown here: a guardrail judges the answer) [3 in / 1 out tokens]\n")


def test_the_final_usage_line_says_estimated_tokens() -> None:
    from jianmu.llm import Usage

    console, out = _console()
    Progress(console, py_trees.behaviours.Success("s")).show_final(
        Usage(input_tokens=30, output_tokens=4, requests=2, estimated_requests=1))
    assert "estimated for 1 of the requests" in out.getvalue().splitlines()[-1]


def test_a_reply_cut_off_at_the_token_limit_is_shown() -> None:
    console, out = _console()
    progress = Progress(console, py_trees.behaviours.Success("s"))
    for outcome in ("continued", "accepted", "failed"):
        progress.on_event(Event(name="llm.call.cut_off", run_id="r", fields={
            "model": "m", "finish_reason": "length", "tool_calls": [], "outcome": outcome}))
    progress.on_event(Event(name="llm.call.cut_off", run_id="r", fields={
        "model": "m", "finish_reason": "length", "tool_calls": ["write_note"]}))
    assert out.getvalue() == (
        "  ✂ m: answer cut off at the token limit, asked to go on\n"
        "  ✂ m: answer cut off at the token limit, kept as it is\n"
        "  ✂ m: answer cut off at the token limit, the run fails\n"
        "  ✂ m: a call to write_note cut off at the token limit, not run\n"
    )


def test_the_final_lines_show_the_runs_usage() -> None:
    from jianmu.llm import Usage

    console, out = _console()
    progress = Progress(console, py_trees.behaviours.Success("s"))
    progress.show_final(Usage(input_tokens=30, output_tokens=4, requests=1, tool_calls=2))
    assert out.getvalue().splitlines()[-1] == (
        "run's usage: 1 model request · 2 tool calls · 30 in / 4 out tokens")
    console, out = _console()
    Progress(console, py_trees.behaviours.Success("s")).show_final(None)
    assert "usage" not in out.getvalue()


def test_a_call_that_waited_goes_on_rather_than_starting_again() -> None:
    console, out = _console()
    progress = Progress(console, py_trees.behaviours.Success("s"))
    progress.on_event(Event(name="tool.call.started", run_id="r", fields={
        "tool": "researcher", "call_id": "c1", "args_preview": '{"input": "tides"}'}))
    progress.on_event(Event(name="tool.call.started", run_id="r", fields={
        "tool": "researcher", "call_id": "c1", "args_preview": '{"input": "tides"}',
        "resumed": True}))
    assert out.getvalue() == '  → researcher({"input": "tides"})\n  ↻ researcher goes on\n'
    assert progress.tool_calls == 1  # one call, announced once
