"""The timeline's words for events a person needs to read: a model fallback names both models."""

from __future__ import annotations

from jianmu.studio.timeline import event_timeline


def test_a_fallback_says_which_model_failed_and_which_answered() -> None:
    entries = event_timeline([
        {"time": 1.0, "name": "llm.call.started", "node": "a/llm", "fields": {"model": "main"}},
        {"time": 1.5, "name": "llm.fallback", "node": "a/llm",
         "fields": {"from": "main", "to": "backup", "error": "HTTP 503 from x: overloaded"}},
        {"time": 2.0, "name": "llm.call.completed", "node": "a/llm",
         "fields": {"model": "backup", "tool_calls": [], "answer_preview": "hi",
                    "input_tokens": 5, "output_tokens": 1}},
    ])
    assert [(e["title"], e["text"]) for e in entries] == [
        ("model main failed: asking backup", "HTTP 503 from x: overloaded"),
        ("model turn · backup · 5 in / 1 out tokens · 1.0 s", "answers: hi"),
    ]


def test_a_tripped_guardrail_says_which_and_what_follows() -> None:
    entries = event_timeline([
        {"time": 1.0, "name": "guardrail.tripped", "node": "a/tools",
         "fields": {"kind": "tool_output", "guardrail": "prompt_injection", "tool": "fetch",
                    "call_id": "c1", "reason": "possible prompt injection"}},
        {"time": 2.0, "name": "guardrail.tripped", "node": "a/llm",
         "fields": {"kind": "input", "guardrail": "no_secrets", "reason": "asks for a secret"}},
    ])
    assert [(e["kind"], e["title"], e["text"]) for e in entries] == [
        ("guard", "tool output guardrail prompt_injection tripped: fetch",
         "possible prompt injection (result withheld from the model)"),
        ("guard", "input guardrail no_secrets tripped", "asks for a secret (the run fails)"),
    ]


def test_a_persons_answer_an_input_guardrail_trips_on_is_withheld_not_a_failure() -> None:
    # ask_user's answer is read by the input guardrails; a trip withholds it from the model and
    # the run goes on (it said "the run fails" of a run that then succeeded)
    entries = event_timeline([
        {"time": 1.0, "name": "guardrail.tripped", "node": "a/tools",
         "fields": {"kind": "input", "guardrail": "no_secret", "tool": "ask_user",
                    "call_id": "call_1", "reason": "holds a secret"}},
    ])
    assert [(e["title"], e["text"]) for e in entries] == [
        ("input guardrail no_secret tripped: ask_user",
         "holds a secret (answer withheld from the model)")]


def test_a_call_that_waited_goes_on_rather_than_starting_again() -> None:
    started = {"tool": "researcher", "call_id": "c1", "args_preview": '{"input": "tides"}'}
    entries = event_timeline([
        {"time": 1.0, "name": "tool.call.started", "node": "a/tools", "fields": started},
        {"time": 2.0, "name": "tool.call.started", "node": "a/tools",
         "fields": {**started, "resumed": True}},
    ])
    assert [e["title"] for e in entries] == ["started: researcher", "goes on: researcher"]
    assert entries[1]["text"] == "after waiting for a person"


def test_a_call_stopped_after_it_began_says_it_may_be_done_and_was_not_run_again() -> None:
    told = "the run was stopped while 'pay' was running, so whether it did its work is unknown"
    entries = event_timeline([
        {"time": 1.0, "name": "tool.call.failed", "node": "a/tools",
         "fields": {"tool": "pay", "call_id": "p1", "error": told, "in_doubt": True}},
        {"time": 2.0, "name": "tool.call.failed", "node": "a/tools",
         "fields": {"tool": "pay", "call_id": "p2", "error": "declined"}},
    ])
    assert [(e["kind"], e["title"], e["text"]) for e in entries] == [
        ("error", "stopped, maybe done (not run again): pay", told),
        ("error", "failed: pay", "declined"),
    ]


def test_a_durable_call_settled_at_a_takeover_says_it_may_be_done() -> None:
    from jianmu.studio.timeline import durable_timeline
    from jianmu.tools.calls import ToolResult

    told = ToolResult(tool="pay", ok=False, error="whether it did its work is unknown",
                      maybe_done=True)
    failed = ToolResult(tool="pay", ok=False, error="declined")
    entries = durable_timeline([
        {"name": "jianmu:tool:p1", "output": told, "error": None, "started": 1.0,
         "completed": 2.0},
        {"name": "jianmu:tool:p2", "output": failed, "error": None, "started": 3.0,
         "completed": 4.0},
    ])
    assert [e["title"] for e in entries] == [
        "stopped, maybe done (not run again): pay · 1.0 s", "failed: pay · 1.0 s"]


def test_an_answer_a_guardrail_judges_is_said_so_not_shown_empty() -> None:
    # an output guardrail refused the answer: the event leaves it out (answer_preview None),
    # and the entry read "answers: " with nothing after it, as if the model said nothing
    entries = event_timeline([
        {"time": 1.0, "name": "guardrail.tripped", "node": "a/llm",
         "fields": {"kind": "output", "guardrail": "no_sun", "reason": "sunny"}},
        {"time": 2.0, "name": "llm.call.completed", "node": "a/llm",
         "fields": {"model": "m", "tool_calls": [], "answer_preview": None,
                    "input_tokens": 5, "output_tokens": 1}},
        {"time": 3.0, "name": "llm.call.completed", "node": "a/llm",
         "fields": {"model": "m", "tool_calls": [], "answer_preview": "",
                    "input_tokens": 5, "output_tokens": 0}},
    ])
    assert [e["text"] for e in entries[1:]] == [
        "answers (not shown here: a guardrail judges the answer)", "answers: "]


def test_a_run_waiting_for_answers_says_answers_not_approvals() -> None:
    entries = event_timeline([
        {"time": 1.0, "name": "agent.suspended", "node": "a/tools",
         "fields": {"agent": "researcher", "pending": ["ask:call_1"]}},
        {"time": 2.0, "name": "run.suspended", "node": None,
         "fields": {"pending": ["researcher/call_1/ask:call_1", "call_2",
                                "ask:ask flow/ask"]}},
        {"time": 3.0, "name": "run.suspended", "node": None, "fields": {"pending": ["call_3"]}},
    ])
    assert [e["title"] for e in entries] == [
        "sub-agent researcher waits for 1 answer(s)",
        "waits for 1 approval(s) and 2 answer(s)",
        "waits for 1 approval(s)"]


def test_a_durable_approval_with_edited_arguments_says_what_the_person_changed_them_to() -> None:
    """As a checkpointed run's timeline says it: it read "approved by alice: d1", as if the
    model's arguments had run."""
    from jianmu.studio.timeline import durable_timeline

    def decision(arguments: dict[str, str] | None) -> dict[str, object]:
        return {"name": "DBOS.recv", "error": None, "started": 1.0, "completed": 1.0,
                "output": {"kind": "jianmu.approval", "call_id": "d1", "approved": True,
                           "message": "ok (approved by alice in Jianmu Studio)",
                           "arguments": arguments}}

    edited, plain = durable_timeline([decision({"target": "staging"}), decision(None)])
    assert (edited["title"], edited["text"]) == (
        "approved by alice (edited): d1", 'edited arguments:\n{\n  "target": "staging"\n}\nok')
    assert (plain["title"], plain["text"]) == ("approved by alice: d1", "ok")
