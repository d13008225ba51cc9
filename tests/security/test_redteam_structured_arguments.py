"""Red team, arguments that are not one string: rules read a list, an argv, a default, /proc.

- A path or URL rule on an argument holding a list (MCP filesystem's
  ``read_multiple_files(paths: string[])``) matched the list's JSON text, never each path:
  ``fs__read_multiple_files(paths:secrets/*): deny`` let ``["secrets/key"]``, a link into
  ``secrets`` and the absolute path through. Each string in a list (or an object) is now
  matched as its argument's value is, in every form.
- An ``execute`` tool taking an argv list: ``run_argv(rm *): deny`` (a rule on the main
  argument) auto-allowed ``["rm", "-rf", "/data"]``. A list given to a shell argument is now
  the command line it makes, quoted word by word and joined as a shell reads it unquoted.
- A rule on an argument the model leaves out (or sends as null) read only a string default:
  ``transfer(amount:10000): deny`` let ``{"to": "bob"}`` send the default 10000, and
  ``apply_migration(dry_run:false): confirm`` ran the real migration unasked.
- ``/proc/self/cwd/secrets/key`` was read as ``secrets/key``, but ``/proc//self/cwd/...``,
  ``/proc/./self/...``, ``//proc/self/...`` and ``/dev/fd/../cwd/...`` were not.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from jianmu import Constraints, ReactiveRunner, StateManager, Tool, tool
from jianmu.guard import ToolPolicyChecker
from jianmu.nodes.state import AgentState
from jianmu.nodes.tool_executor import ToolExecutor
from jianmu.tools.calls import ToolCall

_LIST_SCHEMA = {"type": "object", "required": ["paths"],
                "properties": {"paths": {"type": "array", "items": {"type": "string"}}}}


def _reader(workspace: Path) -> Tool:
    def read_multiple_files(paths: list[str]) -> str:
        return "\n".join((workspace / p).read_text() for p in paths)

    return Tool.from_schema(read_multiple_files, name="fs__read_multiple_files",
                            description="Read several files.", read_only=True,
                            input_schema=_LIST_SCHEMA)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "key").write_text("TOPSECRET")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a").write_text("fine")
    (tmp_path / "docs" / "notes").symlink_to(tmp_path / "secrets", target_is_directory=True)
    return tmp_path


@pytest.mark.parametrize("paths", [
    ["secrets/key"], ["docs/a", "secrets/key"], ["docs/notes/key"], ["./secrets//key"],
    ["{ws}/secrets/key"], [["secrets/key"]], [{"path": "secrets/key"}],
])
@pytest.mark.parametrize("rule", ["fs__read_multiple_files(paths:secrets/*)",
                                  "fs__read_multiple_files(secrets/*)"])
def test_a_deny_rule_reads_each_path_of_a_list(
    workspace: Path, paths: list[Any], rule: str
) -> None:
    checker = ToolPolicyChecker({"fs__read_multiple_files": "allow", rule: "deny"},
                                workspace=workspace)
    sent = json.loads(json.dumps(paths).replace("{ws}", str(workspace)))
    call = ToolCall(name="fs__read_multiple_files", arguments={"paths": sent})
    assert checker.resolve(call, _reader(workspace).tool_spec)[0] == "deny"


def test_a_list_outside_the_rule_is_allowed(workspace: Path) -> None:
    rule = "fs__read_multiple_files(paths:secrets/*)"
    checker = ToolPolicyChecker({"fs__read_multiple_files": "allow", rule: "deny"},
                                workspace=workspace)
    call = ToolCall(name="fs__read_multiple_files", arguments={"paths": ["docs/a", "x"]})
    assert checker.resolve(call, _reader(workspace).tool_spec)[0] == "allow"


@pytest.mark.parametrize(("paths", "granted"), [
    (["docs/a"], True), (["docs/a", "docs/b"], True), (["docs/a", "docs/../secrets/key"], False),
    (["docs/notes/key"], False), (["docs/a", "secrets/key"], False), ([], False),
    ([f"docs/{i}" for i in range(1500)], False),
])
def test_an_allow_rule_grants_a_list_only_when_every_path_is_covered(
    workspace: Path, paths: list[str], granted: bool
) -> None:
    checker = ToolPolicyChecker({"fs__read_multiple_files(paths:docs/*)": "allow"},
                                default_policy="deny", workspace=workspace)
    call = ToolCall(name="fs__read_multiple_files", arguments={"paths": paths})
    policy = checker.resolve(call, _reader(workspace).tool_spec)[0]
    assert policy == ("allow" if granted else "deny")


def test_a_url_rule_reads_each_url_of_a_list() -> None:
    fetch = Tool.from_schema(lambda urls: "ok", name="fetch_pages", description="Fetch pages.",
                             input_schema={"type": "object", "required": ["urls"], "properties": {
                                 "urls": {"type": "array", "items": {"type": "string"}}}})
    checker = ToolPolicyChecker({"fetch_pages": "allow",
                                 "fetch_pages(urls:https://evil.com/*)": "deny"})
    for urls in (["https://evil.com/x"], ["https://ok.org", "HTTPS://u@EVIL.COM.:443/x"]):
        call = ToolCall(name="fetch_pages", arguments={"urls": urls})
        assert checker.resolve(call, fetch.tool_spec)[0] == "deny", urls
    call = ToolCall(name="fetch_pages", arguments={"urls": ["https://ok.org/evil.com"]})
    assert checker.resolve(call, fetch.tool_spec)[0] == "allow"


def test_the_list_of_paths_is_refused_end_to_end(workspace: Path) -> None:
    c = Constraints.model_validate({
        "guard": {"tool_policy": {"fs__read_multiple_files(paths:secrets/*)": "deny"}},
        "execution": {"workdir": str(workspace)}})
    state = StateManager(AgentState, {"actions": [{
        "id": "c", "name": "fs__read_multiple_files",
        "arguments": {"paths": ["docs/a", "docs/notes/key"]}}]})
    runner = ReactiveRunner(ToolExecutor(tools=[_reader(workspace)], constraints=c), state,
                            interactive=False)
    runner.run_sync(timeout=60)
    said = state.get("messages")[0].content
    assert "TOPSECRET" not in said and "denies this call" in said


ran: list[list[str]] = []


@tool(category="execute")
def run_argv(argv: list[str]) -> str:
    """Run a program.

    Args:
        argv: the program and its arguments.
    """
    ran.append(argv)
    return "ran"


@pytest.mark.parametrize("rule", ["run_argv(rm *)", "run_argv(argv:rm *)"])
@pytest.mark.parametrize("argv", [
    ["rm", "-rf", "/data"], ["/bin/rm", "-rf", "/data"], ["sudo", "rm", "-rf", "/data"],
    ["echo", "hi; rm -rf /data"],  # as a tool that joins its words for a shell runs it
])
def test_an_argv_list_is_the_command_it_makes(rule: str, argv: list[str]) -> None:
    checker = ToolPolicyChecker({"run_argv": "allow", rule: "deny"})
    call = ToolCall(name="run_argv", arguments={"argv": argv})
    assert checker.resolve(call, run_argv.tool_spec)[0] == "deny"


def test_an_argv_list_is_granted_as_the_command_it_makes() -> None:
    checker = ToolPolicyChecker({"run_argv(argv:git status*)": "allow"}, default_policy="deny")
    for argv, granted in ((["git", "status", "-s"], True), (["git", "status;", "rm", "x"], False),
                          (["git", "push"], False)):
        call = ToolCall(name="run_argv", arguments={"argv": argv})
        assert (checker.resolve(call, run_argv.tool_spec)[0] == "allow") is granted, argv


def test_an_argv_past_the_rule_never_runs_end_to_end() -> None:
    ran.clear()
    c = Constraints.model_validate({"guard": {"tool_policy": {"run_argv": "allow",
                                                              "run_argv(rm *)": "deny"}}})
    state = StateManager(AgentState, {"actions": [
        {"id": "c", "name": "run_argv", "arguments": {"argv": ["rm", "-rf", "/data"]}}]})
    ReactiveRunner(ToolExecutor(tools=[run_argv], constraints=c), state,
                   interactive=False).run_sync(timeout=60)
    assert ran == [] and "denies this call" in state.get("messages")[0].content


@tool(read_only=False)
def transfer(to: str, amount: int = 10000, force: bool = True, dry_run: bool = False) -> str:
    """Send money.

    Args:
        to: who gets it.
        amount: how much.
        force: without checks.
        dry_run: only show what would happen.
    """
    return "sent"


@pytest.mark.parametrize("rule", ["transfer(amount:10000)", "transfer(force:true)",
                                  "transfer(dry_run:false)"])
@pytest.mark.parametrize("arguments", [{"to": "bob"}, {"to": "bob", "amount": None,
                                                       "force": None, "dry_run": None}])
@pytest.mark.parametrize("policy", ["deny", "confirm"])
def test_a_rule_reads_the_default_a_left_out_argument_takes(
    rule: str, arguments: dict[str, Any], policy: str
) -> None:
    checker = ToolPolicyChecker({"transfer": "allow", rule: policy})
    call = ToolCall(name="transfer", arguments=arguments)
    assert checker.resolve(call, transfer.tool_spec)[0] == policy


def test_a_default_the_call_overrides_is_not_read() -> None:
    checker = ToolPolicyChecker({"transfer": "allow", "transfer(dry_run:false)": "confirm"})
    call = ToolCall(name="transfer", arguments={"to": "bob", "dry_run": True})
    assert checker.resolve(call, transfer.tool_spec)[0] == "allow"


@pytest.mark.parametrize("command", [
    "cat /proc/self/cwd/secrets/key", "cat /proc//self/cwd/secrets/key",
    "cat /proc/./self/cwd/secrets/key", "cat //proc/self/cwd/secrets/key",
    "cat /proc/self/./cwd/secrets/key", "cd /proc//self/cwd/secrets; cat key",
    "cat /dev/fd/../cwd/secrets/key", "cat /dev//fd/../cwd/secrets/key",
    "cat /proc/self/task/7/../7/cwd/secrets/key", "cat /proc/thread-self/cwd/secrets/key",
    "cat /proc/net/../cwd/secrets/key", "cat /proc/self/root/proc/self/cwd/secrets/key",
    "cat /proc/../proc/self/cwd/secrets/key",
])
def test_every_spelling_of_the_command_s_own_folder_is_read(
    tmp_path: Path, command: str
) -> None:
    workspace = tmp_path / "ws"
    (workspace / "secrets").mkdir(parents=True)
    (workspace / "secrets" / "key").write_text("TOPSECRET")
    checker = ToolPolicyChecker({"bash": "allow", "bash(cat secrets/*)": "deny"},
                                workspace=workspace)
    call = ToolCall(name="bash", arguments={"command": command})
    assert checker.resolve(call, None)[0] == "deny"
