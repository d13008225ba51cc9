"""``jianmu run`` and ``jianmu resume`` as subprocesses: scripts, skills, approvals."""

from __future__ import annotations

import json
import re

import pytest

from tests.cli._helpers import REPO, SHIPPED_SKILLS, Project, assert_clean_error, pending_of

APPROVAL_FLOW = str(REPO / "examples" / "approval_flow.py")

AGENT_SCRIPT = '''
from jianmu import AgentState, StateManager
from jianmu.llm import ScriptedLLM
from jianmu.nodes import create_react_node
from jianmu.tools import ToolSet

def build_llm():
    return ScriptedLLM([
        [{"name": "calculator", "arguments": {"expression": "17 * 23"}}],
        lambda messages: "17 * 23 = " + [m.content for m in messages if m.role == "tool"][-1],
    ])

def build_state(inputs):
    return StateManager(AgentState, {"messages": [{"role": "user", "content": inputs["question"]}]})

def build_tree(llm):
    return create_react_node(llm, ToolSet.resolve(["calculator"]), max_iterations=4)
'''

GREET_SCRIPT = '''
from py_trees.common import Status
from jianmu import AsyncNode

class Greet(AsyncNode):
    async def update_async(self):
        n = self.state.get("n")
        self.state.update({"final_answer": f"hello {self.state.get('name')} x{n + 1}"})
        return Status.SUCCESS

tree = Greet("greet")
'''

FAILING_SCRIPT = '''
import py_trees
from jianmu import AsyncNode

class Burn(AsyncNode):
    async def update_async(self):
        raise RuntimeError("disk on fire")

def build_tree():
    return py_trees.composites.Sequence("main", memory=True, children=[
        py_trees.behaviours.Success("ok"), Burn("burn")])
'''

HANGING_SCRIPT = '''
import asyncio
from jianmu import AsyncNode

class Wait(AsyncNode):
    async def update_async(self):
        await asyncio.Event().wait()  # nothing ever sets it

def build_tree():
    return Wait("wait")
'''


def test_script_run_shows_calls_tree_tokens_and_answer(project: Project) -> None:
    project.write("agent.py", AGENT_SCRIPT)
    done = project.jianmu("run", "agent.py", "--input", "question=What is 17 * 23?")
    assert done.code == 0, done.text
    out = done.out
    assert re.search(r"^run \w+: script .*agent\.py with \{\"question\"", out, re.M)
    assert "◆ scripted asks for calculator" in out
    assert '→ calculator({"expression": "17 * 23"})' in out
    assert "← calculator: 391" in out
    assert "◆ scripted answers: 17 * 23 = 391" in out
    assert "ReAct.tools [✓ success]" in out  # the tree with each node's status
    assert re.search(r"tool calls: 1 · model calls: 2 · tokens: \d+ in / \d+ out", out)
    assert re.search(r"run's usage: 2 model requests · 1 tool call · \d+ in / \d+ out", out)
    assert "result: 17 * 23 = 391" in out
    assert re.search(r"^success run \w+ after \d+ ticks$", out, re.M)


def test_inputs_become_state_fields_and_json_values_parse(project: Project) -> None:
    project.write("greet.py", GREET_SCRIPT)
    done = project.jianmu("run", "greet.py", "-i", "name=Ada", "-i", "n:=2")
    assert done.code == 0, done.text
    assert "result: hello Ada x3" in done.out


def test_failing_tree_exits_1_with_the_reason(project: Project) -> None:
    project.write("burn.py", FAILING_SCRIPT)
    done = project.jianmu("run", "burn.py")
    assert done.code == 1, done.text
    assert "• burn [✗ failure]" in done.out and "• ok [✓ success]" in done.out
    assert re.search(r"^failure run \w+ after \d+ ticks: burn: RuntimeError: disk on fire",
                     done.out, re.M)
    assert "Traceback" not in done.text


def test_a_long_error_is_shown_in_full_once_and_short_in_the_tree(project: Project) -> None:
    reason = "disk on fire because " + " ".join(f"step{i}" for i in range(40))
    project.write("burn.py", FAILING_SCRIPT.replace("disk on fire", reason))
    done = project.jianmu("run", "burn.py")
    assert done.code == 1, done.text
    assert done.out.count(reason) == 1
    assert re.search(rf"^failure run \w+ after \d+ ticks: burn: RuntimeError: {reason}$",
                     done.out, re.M)
    tree_line = next(line for line in done.out.splitlines() if "• burn [✗ failure]" in line)
    shown = tree_line.split("[✗ failure]  ", 1)[1]
    assert shown.endswith("…") and len(shown) <= 60
    assert f"RuntimeError: {reason}".startswith(shown[:-1])
    assert f"RuntimeError: {reason}"[len(shown) - 1] == " "  # cut between words


def test_timeout_exits_4(project: Project) -> None:
    project.write("hang.py", HANGING_SCRIPT)
    done = project.jianmu("run", "hang.py", "--timeout", "0.3")
    assert done.code == 4, done.text
    assert "timeout run" in done.out and "timed out after" in done.out


TIMED_OUT_SCRIPT = '''
import asyncio
from pathlib import Path

import py_trees
from py_trees.common import ParallelPolicy, Status

from jianmu import AgentState, AsyncNode, ToolExecutor, tool

HERE = Path(__file__).parent


@tool(category="write", permission="user_confirm")
def pay(amount: int) -> str:
    """Pay (a person approves first).

    Args:
        amount: how much.
    """
    with (HERE / "ledger.txt").open("a") as ledger:
        ledger.write(f"paid {amount}\\n")
    return f"paid {amount}"


class Plan(AsyncNode):
    async def update_async(self):
        self.state.update({"actions": [{"id": "pay_1", "name": "pay",
                                        "arguments": {"amount": 40}}]})
        return Status.SUCCESS


class Slow(AsyncNode):
    """Holds the run until it times out while the test keeps a file ``hold`` here."""

    async def update_async(self):
        if (HERE / "hold").exists():
            await asyncio.Event().wait()
        return Status.SUCCESS


def build_tree():
    paying = py_trees.composites.Sequence("paying", memory=True, children=[
        Plan("plan"), ToolExecutor("execute", [pay])])
    return py_trees.composites.Parallel("both", policy=ParallelPolicy.SuccessOnAll(),
                                        children=[paying, Slow("slow")])


STATE_SCHEMA = AgentState
'''


def test_a_run_that_timed_out_is_resumed(project: Project) -> None:
    """Exit 4 says "jianmu resume RUN_ID goes on": it does. Before, resume refused a run
    saved as timed out ("already finished (timeout)"), and with it a request it waits for."""
    project.write("timed.py", TIMED_OUT_SCRIPT)
    hold = project.write("hold", "")
    first = project.jianmu("run", "timed.py", "--timeout", "1", "--non-interactive")
    assert first.code == 4, first.text
    hold.unlink()
    found = re.search(r"^timeout run (\w+) ", first.out, re.M)
    assert found, first.text
    run_id = found.group(1)
    waiting = project.jianmu("resume", run_id, "--non-interactive")
    assert waiting.code == 3, waiting.text
    assert pending_of(waiting.out) == (run_id, ["pay_1"])
    done = project.jianmu("resume", run_id, "--approve", "pay_1")
    assert done.code == 0, done.text
    assert f"success run {run_id}" in done.out
    assert (project.root / "ledger.txt").read_text() == "paid 40\n"
    again = project.jianmu("resume", run_id, "--approve", "pay_1")
    assert_clean_error(again, 2, f"run {run_id!r} already finished (success)")


@pytest.mark.parametrize(("name", "source", "message"), [
    ("missing.py", None, "script 'missing.py' not found"),
    ("notree.py", "x = 1\n", "defines neither build_tree() nor a module-level 'tree'"),
    ("imp.py", "import no_such_module_here\n",
     "imp.py:1: importing the script failed: ModuleNotFoundError"),
    ("boom.py", "def build_tree():\n    raise ValueError('boom')\n",
     "boom.py:2: build_tree() raised ValueError: boom"),
    ("param.py", "def build_tree(size):\n    pass\n",
     "build_tree() has a required parameter 'size'"),
    ("int.py", "tree = 42\n", "must be a py_trees behaviour, got int"),
    # a script of an Agent alone (or given as the tree) is told how its tree and question go
    ("agent.py", "from jianmu import Agent, ScriptedLLM\nhelper = Agent(ScriptedLLM(['Hi.']))\n",
     "for the Agent 'helper': tree = helper.as_node(), and its question as --input 'messages:="),
    ("agent_tree.py", "from jianmu import Agent, ScriptedLLM\ntree = Agent(ScriptedLLM(['Hi.']))\n",
     "got Agent; for the Agent 'tree': tree = tree.as_node()"),
    ("strict.py", "from pydantic import BaseModel, ConfigDict\n"
                  "import py_trees\n"
                  "class STATE_SCHEMA(BaseModel):\n    model_config = ConfigDict(extra='forbid')\n"
                  "tree = py_trees.behaviours.Success('s')\n",
     "the state does not accept the inputs"),
])
def test_bad_scripts_exit_2_without_traceback(
    project: Project, name: str, source: str | None, message: str
) -> None:
    if source is not None:
        project.write(name, source)
    assert_clean_error(project.jianmu("run", name, "-i", "x=1"), 2, message)


def test_bad_input_and_unknown_skill_exit_2(project: Project) -> None:
    assert_clean_error(project.jianmu("run", "greet.py", "-i", "oops"), 2, "write key=value")
    assert_clean_error(project.jianmu("run", "no-such-skill", "--skills-dir", str(SHIPPED_SKILLS)),
                       2, "no skill named 'no-such-skill'", "workspace-report")


# -- approvals on standard input -------------------------------------------------------------


def test_approval_answered_yes_on_stdin(project: Project) -> None:
    done = project.jianmu("run", APPROVAL_FLOW, "-i", "note=buy milk", stdin="y\n")
    assert done.code == 0, done.text
    assert re.search(r'approval needed call_\w+: append_note\(\{"text": "buy milk"\}\)', done.out)
    assert "← append_note: added 'buy milk' to .jianmu/notes.txt" in done.out
    assert (project.root / ".jianmu" / "notes.txt").read_text() == "buy milk\n"


def test_approval_answered_no_with_a_reason(project: Project) -> None:
    done = project.jianmu("run", APPROVAL_FLOW, stdin="maybe\nn not today\n")
    assert done.code == 0, done.text
    assert "please answer y or n" in done.out
    assert "(not today)" in done.out  # the rejection event with the person's message
    assert "not today" in done.out.split("result:")[1]  # the model-facing observation
    assert not (project.root / ".jianmu" / "notes.txt").exists()


def test_end_of_input_leaves_the_run_suspended(project: Project) -> None:
    done = project.jianmu("run", APPROVAL_FLOW, stdin="")
    assert done.code == 3, done.text
    assert "no answer on standard input" in done.out
    pending_of(done.out)


HIDDEN_NOTE = "echo 'listing files for you'" + " " * 300 + "; echo PWNED > pwned.txt"


def test_the_prompt_shows_the_full_arguments_past_the_summary_cut(project: Project) -> None:
    done = project.jianmu("run", APPROVAL_FLOW, "-i", f"note={HIDDEN_NOTE}", stdin="n\n")
    assert done.code == 0, done.text
    asked = done.out.split("approval needed ", 1)[1].split("approve? [y/n", 1)[0]
    heading, details = asked.split("\n", 1)
    assert "PWNED" not in heading  # the summary is cut at 200 characters...
    assert "tool: append_note" in details  # ...but the person sees everything below it
    assert f'"text": {json.dumps(HIDDEN_NOTE)}' in details
    assert "reason: tool 'append_note' has permission 'user_confirm'" in details
    assert not (project.root / ".jianmu" / "notes.txt").exists()


def test_markup_and_escapes_in_arguments_are_shown_literally(project: Project) -> None:
    note = "[bold]harmless[/bold] [red]x \x1b[2K\x1b[1Ahidden :smile:"
    done = project.jianmu("run", APPROVAL_FLOW, "-i", f"note={note}", stdin="n\n")
    assert done.code == 0, done.text
    assert "\x1b" not in done.out
    asked = done.out.split("approval needed ", 1)[1].split("approve? [y/n", 1)[0]
    assert '"text": "[bold]harmless[/bold] [red]x \\u001b[2K\\u001b[1Ahidden :smile:"' in asked


def test_approve_all(project: Project) -> None:
    done = project.jianmu("run", APPROVAL_FLOW, "--approve-all")
    assert done.code == 0, done.text
    assert "(--approve-all)" in done.out
    assert (project.root / ".jianmu" / "notes.txt").read_text() == "hello from Jianmu\n"


# -- --non-interactive, then resume in another process ---------------------------------------


def test_non_interactive_then_resume_approve_runs_the_tool_once(project: Project) -> None:
    first = project.jianmu("run", APPROVAL_FLOW, "-i", "note=once", "--non-interactive")
    assert first.code == 3, first.text
    run_id, (request,) = pending_of(first.out)
    assert f"resume with: jianmu resume {run_id} --approve {request}" in first.out
    assert '    tool: append_note\n    arguments:\n      {\n        "text": "once"\n' in first.out
    assert not (project.root / ".jianmu" / "notes.txt").exists()

    wrong = project.jianmu("resume", run_id, "--approve", "call_nope")
    assert_clean_error(wrong, 2, "no approval request 'call_nope'", request)

    second = project.jianmu("resume", run_id, "--approve", request)
    assert second.code == 0, second.text
    assert f"resuming run {run_id}: script" in second.out
    assert f"✓ approved {request}" in second.out
    assert "result: added 'once' to .jianmu/notes.txt" in second.out
    assert (project.root / ".jianmu" / "notes.txt").read_text() == "once\n"

    again = project.jianmu("resume", run_id, "--approve", request)
    assert_clean_error(again, 2, f"run {run_id!r} already finished (success)")
    assert (project.root / ".jianmu" / "notes.txt").read_text() == "once\n"


def test_resume_can_suspend_again_and_reject(project: Project) -> None:
    first = project.jianmu("run", APPROVAL_FLOW, "--non-interactive")
    run_id, (request,) = pending_of(first.out)
    undecided = project.jianmu("resume", run_id, "--non-interactive")
    assert undecided.code == 3, undecided.text
    assert pending_of(undecided.out) == (run_id, [request])
    rejected = project.jianmu("resume", run_id, "--reject", request, "-m", "no notes")
    assert rejected.code == 0, rejected.text
    assert "no notes" in rejected.out.split("result:")[1]
    assert not (project.root / ".jianmu" / "notes.txt").exists()


def test_non_interactive_listing_shows_the_full_arguments(project: Project) -> None:
    first = project.jianmu("run", APPROVAL_FLOW, "-i", f"note={HIDDEN_NOTE}",
                           "--non-interactive")
    assert first.code == 3, first.text
    _, (request,) = pending_of(first.out)
    listing = first.out.split(f"  pending {request}", 1)[1].split("resume with:", 1)[0]
    assert "PWNED" not in listing.split("\n", 1)[0]  # the summary line
    assert f'        "text": {json.dumps(HIDDEN_NOTE)}\n' in listing


def test_resume_unknown_run_exits_2(project: Project) -> None:
    project.jianmu("run", APPROVAL_FLOW, "--non-interactive")
    assert_clean_error(project.jianmu("resume", "feedbeef"), 2, "no run 'feedbeef'",
                       "recent runs:")


# -- skills ----------------------------------------------------------------------------------


def _report_args(*extra: str) -> list[str]:
    return ["run", "workspace-report", "--skills-dir", str(SHIPPED_SKILLS), "-i", "folder=src",
            "-i", "report=out/report.md", *extra]


def test_bt_skill_runs_with_the_write_approved_on_stdin(project: Project) -> None:
    done = project.jianmu(*_report_args(), stdin="y\n")
    assert done.code == 0, done.text
    for tool in ("glob_search", "file_info", "grep_search", "write_file"):
        assert f"→ {tool}(" in done.out
    assert re.search(r"approval needed bt-\w+: write_file", done.out)
    result = json.loads(done.out.split("result:\n", 1)[1].split("\nsuccess run", 1)[0])
    assert result == {"report": "out/report.md", "files": 2, "matches": 2,
                      "total_bytes": 49, "total_lines": 5}
    report = (project.workspace / "out" / "report.md").read_text()
    assert "| src/app.py | 31 | 2 | ascii |" in report


def test_bt_skill_non_interactive_then_resume_in_another_process(project: Project) -> None:
    first = project.jianmu(*_report_args("--non-interactive"))
    assert first.code == 3, first.text
    run_id, (request,) = pending_of(first.out)
    assert request.startswith("bt-")
    assert not (project.workspace / "out").exists()
    second = project.jianmu("resume", run_id, "--approve", request)
    assert second.code == 0, second.text
    assert second.out.count("→ write_file(") == 1
    assert '"files": 2' in second.out
    assert (project.workspace / "out" / "report.md").is_file()


def test_bt_skill_rejected_write_fails_the_run(project: Project) -> None:
    first = project.jianmu(*_report_args("--non-interactive"))
    run_id, (request,) = pending_of(first.out)
    done = project.jianmu("resume", run_id, "--reject", request, "--message", "not now")
    assert done.code == 1, done.text
    assert "the guard denied write_file: rejected by a person: not now" in done.out
    assert not (project.workspace / "out").exists()


def test_bt_skill_bad_input_exits_2(project: Project) -> None:
    done = project.jianmu("run", "workspace-report", "--skills-dir", str(SHIPPED_SKILLS),
                          "-i", "max_files=many")
    assert_clean_error(done, 2, "invalid inputs", "max_files")


def test_prompt_skill_needs_a_configured_model(project: Project) -> None:
    done = project.jianmu("run", "code-review", "--skills-dir", str(SHIPPED_SKILLS),
                          "-i", "task=review src")
    assert_clean_error(done, 2, "needs a model", "llm.base_url", "JIANMU_LLM_BASE_URL")
    no_task = project.jianmu("run", "code-review", "--skills-dir", str(SHIPPED_SKILLS))
    assert_clean_error(no_task, 2, "give it a task", "--input task=")


def test_prompt_skill_runs_with_the_configured_model(project: Project) -> None:
    project.config.write_text(project.config.read_text() + (
        "llm:\n  provider: scripted\n  params:\n    responses:\n"
        "      - [{name: glob_search, arguments: {pattern: '*.py'}}]\n"
        "      - 'One Python file: src/app.py.'\n"
    ), encoding="utf-8")
    done = project.jianmu("run", "code-review", "--skills-dir", str(SHIPPED_SKILLS),
                          "-i", "task=review src")
    assert done.code == 0, done.text
    assert "→ glob_search(" in done.out and "← glob_search: src/app.py" in done.out
    assert "code-review [✓ success]" in done.out
    assert "result: One Python file: src/app.py." in done.out


def test_a_prompt_skill_takes_the_providers_own_key_variable(project: Project) -> None:
    """``llm.api_key`` left empty, the provider reads $OPENAI_API_KEY itself: the command does
    not refuse the run as having no model (here the server is down: the run fails instead)."""
    project.config.write_text(project.config.read_text() + (
        "llm:\n  provider: openai\n  model: m\n  api_key: ${JIANMU_LLM_API_KEY:-}\n"
        "  max_retries: 0\n"
    ), encoding="utf-8")
    done = project.jianmu("run", "code-review", "--skills-dir", str(SHIPPED_SKILLS),
                          "-i", "task=review src",
                          env={"OPENAI_API_KEY": "sk-test",
                               "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
    assert "needs a model" not in done.text and done.code == 1, done.text
