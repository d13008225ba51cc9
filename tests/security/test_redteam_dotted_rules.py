"""Red team, a path rule written with a leading ``./`` (``read_file(./secrets/*): deny``, as
Claude Code's settings write ``Read(./.env)``): the paths a rule is matched against are
normalised (``./secrets/key`` is ``secrets/key``, so is ``/ws/secrets/key``), the pattern was
not, and no spelling of the path met it: the model read the key, whether it asked for
``secrets/key``, ``./secrets/key`` or the absolute path. So for ``bash(cat ./secrets/*)``, and
``bash(cat ~/.ssh/*)`` let ``cat /home/me/.ssh/id_rsa`` run, and a URL rule written without its
scheme (``http_request(url:evil.com/*)``) met no URL the client sends; and a search's path
rule (``grep_search(secrets/*)``) was read against what it looks for, its regular expression;
and ``read_file(secrets)``, a folder named alone, held for no file in it.

Fixed here: a deny or confirm rule's pattern also holds as its paths are normalised, word by
word (`posixpath.normpath`: ``./``, ``//``, ``a/..``), with ``~`` as the home folder, and a
host-first pattern as any scheme's URL, a search's path rule on the folder it searches, and a
pattern without a wildcard for what lies below it too; a grant stays as written.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jianmu import Constraints, ReactiveRunner, StateManager
from jianmu.constraints import GuardConstraints
from jianmu.guard import ToolPolicyChecker
from jianmu.nodes.state import AgentState
from jianmu.nodes.tool_executor import ToolExecutor
from jianmu.tools import ToolSet
from jianmu.tools.calls import ToolCall

pytestmark = pytest.mark.anyio


def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "secrets").mkdir(parents=True)
    (ws / "secrets" / "key").write_text("s3cr3t-value\n")
    return ws


@pytest.mark.parametrize("rule", ["read_file(./secrets/*)", "read_file(path:./secrets/**)",
                                  "read_file(.//secrets/./*)"])
@pytest.mark.parametrize("asked", ["secrets/key", "./secrets/key", "ABSOLUTE"])
async def test_a_dotted_deny_rule_holds_for_every_spelling(
    tmp_path: Path, rule: str, asked: str,
) -> None:
    ws = workspace(tmp_path)
    path = str(ws / "secrets" / "key") if asked == "ABSOLUTE" else asked
    constraints = Constraints.model_validate(
        {"guard": {"tool_policy": {rule: "deny"}}, "execution": {"workdir": str(ws)}})
    node = ToolExecutor(tools=ToolSet.resolve(["read_file"]), constraints=constraints)
    state = StateManager(AgentState, {"actions": [
        {"id": "c", "name": "read_file", "arguments": {"path": path}}]})
    await ReactiveRunner(node, state).run()
    said = state.get("messages")[-1].content
    assert "s3cr3t" not in said and "denied" in said, said


@pytest.mark.parametrize("command", ["cat secrets/key", "cat ./secrets/key",
                                     "cd secrets; cat key"])
def test_a_dotted_shell_rule_holds(tmp_path: Path, command: str) -> None:
    ws = workspace(tmp_path)
    guard = GuardConstraints.model_validate(
        {"tool_policy": {"bash(cat ./secrets/*)": "deny", "bash": "allow"}})
    policy = ToolPolicyChecker.from_guard_constraints(guard, workspace=ws)
    bash = ToolSet.resolve(["bash"]).get("bash")
    call = ToolCall(name="bash", arguments={"command": command})
    assert policy.resolve(call, bash, received=policy.received(call, bash))[0] == "deny"


def test_a_shell_rule_on_the_home_folder_holds_for_its_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # ``bash(cat ~/.ssh/*): deny`` let ``cat /home/me/.ssh/id_rsa`` run
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    guard = GuardConstraints.model_validate(
        {"tool_policy": {"bash(cat ~/.ssh/*)": "deny", "bash": "allow"}})
    policy = ToolPolicyChecker.from_guard_constraints(guard, workspace=workspace(tmp_path))
    bash = ToolSet.resolve(["bash"]).get("bash")
    for command in (f"cat {home}/.ssh/id_rsa", "cat ~/.ssh/id_rsa"):
        call = ToolCall(name="bash", arguments={"command": command})
        assert policy.resolve(call, bash, received=policy.received(call, bash))[0] == "deny"


@pytest.mark.parametrize("rule", ["http_request(url:evil.com/*)", "http_request(evil.com)",
                                  "http_request(EVIL.com/*)"])
@pytest.mark.parametrize("url", ["https://evil.com/x", "http://evil.com", "HTTPS://EVIL.COM./x"])
def test_a_url_rule_without_its_scheme_holds(tmp_path: Path, rule: str, url: str) -> None:
    # the client sends ``https://evil.com/x``: a rule written ``evil.com/*`` met no URL
    guard = GuardConstraints.model_validate(
        {"tool_policy": {rule: "deny", "http_request": "allow"}})
    policy = ToolPolicyChecker.from_guard_constraints(guard, workspace=workspace(tmp_path))
    fetch = ToolSet.resolve(["http_request"]).get("http_request")
    call = ToolCall(name="http_request", arguments={"url": url})
    assert policy.resolve(call, fetch, received=policy.received(call, fetch))[0] == "deny"


@pytest.mark.parametrize(("rule", "name", "arguments"), [
    ("grep_search(secrets/*)", "grep_search", {"pattern": "s3cr3t"}),
    ("grep_search(secrets/*)", "grep_search", {"pattern": "s3cr3t", "path": "."}),
    ("grep_search(./secrets/*)", "grep_search", {"pattern": ".", "path": "secrets"}),
    ("glob_search(secrets/*)", "glob_search", {"pattern": "**/*"}),
])
async def test_a_searchs_path_rule_holds_for_what_it_searches(
    tmp_path: Path, rule: str, name: str, arguments: dict[str, str],
) -> None:
    # the searches' main argument is what they look for: ``grep_search(secrets/*): deny``
    # was read against the regular expression, and a search of ``.`` returned the key
    ws = workspace(tmp_path)
    constraints = Constraints.model_validate(
        {"guard": {"tool_policy": {rule: "deny"}}, "execution": {"workdir": str(ws)}})
    node = ToolExecutor(tools=ToolSet.resolve([name]), constraints=constraints)
    state = StateManager(AgentState, {"actions": [
        {"id": "c", "name": name, "arguments": arguments}]})
    await ReactiveRunner(node, state).run()
    said = state.get("messages")[-1].content
    assert "s3cr3t" not in said and "secrets/key" not in said and "denied" in said, said


@pytest.mark.parametrize("rule", ["read_file(secrets)", "read_file(./secrets/)",
                                  "read_file(path:secrets)"])
async def test_a_deny_rule_naming_a_folder_holds_for_its_files(tmp_path: Path, rule: str) -> None:
    # a glob with no wildcard named the folder only: read_file(secrets) let secrets/key be read
    ws = workspace(tmp_path)
    constraints = Constraints.model_validate(
        {"guard": {"tool_policy": {rule: "deny"}}, "execution": {"workdir": str(ws)}})
    node = ToolExecutor(tools=ToolSet.resolve(["read_file"]), constraints=constraints)
    state = StateManager(AgentState, {"actions": [
        {"id": "c", "name": "read_file", "arguments": {"path": "secrets/key"}}]})
    await ReactiveRunner(node, state).run()
    said = state.get("messages")[-1].content
    assert "s3cr3t" not in said and "denied" in said, said
