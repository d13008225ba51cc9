"""``jianmu resume --approve ID --arguments JSON`` and ``--answer ID TEXT``, and questions asked
on standard input (issue 36, items 3 and 4), as subprocesses."""

from __future__ import annotations

from tests.cli._helpers import REPO, Project, assert_clean_error, pending_of

APPROVAL_FLOW = str(REPO / "examples" / "approval_flow.py")

ASK_SCRIPT = '''
from jianmu import AgentState, StateManager
from jianmu.llm import ScriptedLLM
from jianmu.nodes import create_react_node
from jianmu.tools import ToolSet

def respond(messages):
    said = [m.content for m in messages if m.role == "tool"]
    if said:
        return f"Booking a trip to {said[-1]}."
    return [{"id": "q1", "name": "ask_user", "arguments": {"question": "Which city?"}}]

def build_llm():
    return ScriptedLLM([respond, respond])

def build_state(inputs):
    return StateManager(AgentState, {"messages": [{"role": "user", "content": "book a trip"}]})

def build_tree(llm):
    return create_react_node(llm, ToolSet.resolve(["ask_user"]), max_iterations=4)
'''


def test_resume_approves_with_edited_arguments(project: Project) -> None:
    first = project.jianmu("run", APPROVAL_FLOW, "-i", "note=model's note", "--non-interactive")
    assert first.code == 3, first.text
    run_id, (request,) = pending_of(first.out)

    bad = project.jianmu("resume", run_id, "--approve", request, "--arguments", '{"txt": 1}')
    assert_clean_error(bad, 2, "do not fit tool 'append_note'", "text", "still pending")
    not_json = project.jianmu("resume", run_id, "--approve", request, "--arguments", "{nope")
    assert_clean_error(not_json, 2, "--arguments is not valid JSON")
    two = project.jianmu("resume", run_id, "--approve", request, "--approve", "x",
                         "--arguments", "{}")
    assert_clean_error(two, 2, "exactly one --approve")
    assert not (project.root / ".jianmu" / "notes.txt").exists()

    done = project.jianmu("resume", run_id, "--approve", request, "--arguments",
                          '{"text": "edited by a person"}')
    assert done.code == 0, done.text
    assert f"✓ approved {request} with edited arguments" in done.out
    assert (project.root / ".jianmu" / "notes.txt").read_text() == "edited by a person\n"


def test_a_question_is_answered_with_resume(project: Project) -> None:
    script = project.write("ask.py", ASK_SCRIPT)
    first = project.jianmu("run", str(script), "--non-interactive")
    assert first.code == 3, first.text
    run_id, (request,) = pending_of(first.out)
    assert request == "ask:q1"
    assert f"resume with: jianmu resume {run_id} --answer ask:q1 TEXT" in first.out

    refused = project.jianmu("resume", run_id, "--approve", request)
    assert_clean_error(refused, 2, "is a question")
    done = project.jianmu("resume", run_id, "--answer", request, "Lisbon")
    assert done.code == 0, done.text
    assert "✓ answered ask:q1" in done.out
    assert "result: Booking a trip to Lisbon." in done.out


def test_an_interactive_run_asks_the_question_on_stdin(project: Project) -> None:
    script = project.write("ask.py", ASK_SCRIPT)
    done = project.jianmu("run", str(script), stdin="Porto\n")
    assert done.code == 0, done.text
    assert "question ask:q1: Which city?" in done.out
    assert "result: Booking a trip to Porto." in done.out


def test_an_interactive_run_approves_arguments_edited_at_the_prompt(project: Project) -> None:
    done = project.jianmu("run", APPROVAL_FLOW, "-i", "note=model's note",
                          stdin='e {nope\ne {"txt": 1}\ne {"text": "typed here"}\n')
    assert done.code == 0, done.text
    assert "the arguments are not JSON" in done.out
    assert "do not fit tool 'append_note'" in done.out
    assert "approved " in done.out and "with edited arguments" in done.out
    assert (project.root / ".jianmu" / "notes.txt").read_text() == "typed here\n"
