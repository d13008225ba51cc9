"""Red team, a rule naming a tool as Claude Code names it. An MCP server's: ``mcp__gh__wipe``
(a deny list copied from Claude Code's settings, as its ``Bash(git:*)`` form is read here,
and as a skill's ``allowed-tools`` names MCP tools). Jianmu names that tool ``gh__wipe``,
and the rule named no tool: ``tool_policy: {mcp__gh__wipe: deny}`` let a server trusted with
``read_only`` run its ``readOnlyHint`` tool ``wipe`` for the model.

Fixed here: a restriction (a deny or confirm rule, a rate limit) written with Claude Code's
name of an MCP tool also holds for Jianmu's, and a deny or confirm rule for a whole server
(``mcp__gh``) for each of its tools; so does one naming a Claude Code tool (``Read(./.env)``
for read_file, ``WebFetch(domain:evil.com)`` for http_request's URLs of that host), which named
no tool either. A grant stays with the name it was written for.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jianmu import Constraints, ReactiveRunner, StateManager
from jianmu.constraints import GuardConstraints
from jianmu.guard import ToolPolicyChecker
from jianmu.nodes.state import AgentState
from jianmu.nodes.tool_executor import ToolExecutor
from jianmu.tools import ToolSet, tool
from jianmu.tools.calls import ToolCall

pytestmark = pytest.mark.anyio
RAN: list[str] = []


@tool(name="gh__wipe")
def wipe(repo: str) -> str:
    """Wipe a repository (standing in for an MCP server's tool).

    Args:
        repo: which.
    """
    RAN.append(repo)
    return "wiped"


async def run_calls(guard: dict[str, object], count: int = 1) -> list[str]:
    RAN.clear()
    node = ToolExecutor(tools=[wipe], constraints=Constraints.model_validate({"guard": guard}))
    actions = [{"id": f"c{i}", "name": "gh__wipe", "arguments": {"repo": f"r{i}"}}
               for i in range(count)]
    state = StateManager(AgentState, {"actions": actions})
    runner = ReactiveRunner(node, state)
    result = await runner.run()
    return [r.id for r in result.pending]


@pytest.mark.parametrize("rule", ["mcp__gh__wipe", "MCP__GH__WIPE", "mcp__gh__wipe(repo:r*)"])
async def test_a_deny_rule_in_claudes_spelling_holds(rule: str) -> None:
    assert await run_calls({"tool_policy": {rule: "deny"}}) == []
    assert RAN == []


async def test_a_confirm_rule_in_claudes_spelling_asks() -> None:
    assert await run_calls({"tool_policy": {"mcp__gh__wipe": "confirm"}}) == ["c0"]
    assert RAN == []


async def test_a_rate_limit_in_claudes_spelling_counts() -> None:
    await run_calls({"rate_limits": {"mcp__gh__wipe": 1}}, count=2)
    assert RAN == ["r0"]


async def test_a_grant_in_claudes_spelling_grants_nothing_more() -> None:
    guard = {"default_policy": "confirm", "tool_policy": {"mcp__gh__wipe": "allow"}}
    assert await run_calls(guard) == ["c0"] and RAN == []


@tool(name="ghx__wipe")
def other_wipe(repo: str) -> str:
    """Another server's tool of the same name.

    Args:
        repo: which.
    """
    RAN.append(f"ghx {repo}")
    return "wiped"


async def test_a_deny_rule_for_a_whole_server_in_claudes_spelling_holds() -> None:
    # Claude Code's ``mcp__gh`` names every tool of the server ``gh``
    RAN.clear()
    constraints = Constraints.model_validate({"guard": {"tool_policy": {"mcp__gh": "deny"}}})
    node = ToolExecutor(tools=[wipe, other_wipe], constraints=constraints)
    state = StateManager(AgentState, {"actions": [
        {"id": "a", "name": "gh__wipe", "arguments": {"repo": "r"}},
        {"id": "b", "name": "ghx__wipe", "arguments": {"repo": "r"}}]})
    await ReactiveRunner(node, state).run()
    assert RAN == ["ghx r"]


async def test_a_deny_rule_with_claudes_tool_names_holds(tmp_path: Path) -> None:
    # Claude Code's settings deny ``Read(./.env)``; Jianmu's tool is read_file
    (tmp_path / ".env").write_text("API_KEY=s3cr3t\n")
    constraints = Constraints.model_validate({
        "guard": {"tool_policy": {"Read(./.env)": "deny"}},
        "execution": {"workdir": str(tmp_path)}})
    node = ToolExecutor(tools=ToolSet.resolve(["read_file"]), constraints=constraints)
    state = StateManager(AgentState, {"actions": [
        {"id": "c", "name": "read_file", "arguments": {"path": ".env"}}]})
    await ReactiveRunner(node, state).run()
    said = state.get("messages")[-1].content
    assert "s3cr3t" not in said and "denied" in said, said


@pytest.mark.parametrize(("url", "verdict"), [("https://evil.com/x", "deny"),
                                              ("HTTP://EVIL.COM", "deny"),
                                              ("https://good.com/x", "allow")])
def test_claudes_web_fetch_domain_rule_holds_for_that_host(url: str, verdict: str) -> None:
    guard = GuardConstraints.model_validate(
        {"tool_policy": {"WebFetch(domain:evil.com)": "deny", "http_request": "allow"}})
    policy = ToolPolicyChecker.from_guard_constraints(guard)
    fetch = ToolSet.resolve(["http_request"]).get("http_request")
    call = ToolCall(name="http_request", arguments={"url": url})
    assert policy.resolve(call, fetch, received=policy.received(call, fetch))[0] == verdict


@tool(name="gh__list")
def gh_list(repo: str) -> str:
    """List a repository (another tool of the same server).

    Args:
        repo: which.
    """
    RAN.append(f"list {repo}")
    return "listed"


@pytest.mark.parametrize("key", ["mcp__gh", "MCP__GH"])
async def test_a_whole_servers_rate_limit_in_claudes_spelling_counts(key: str) -> None:
    # ``rate_limits: {mcp__gh: 1}`` named no tool: every call of the server's tools ran
    RAN.clear()
    limits = Constraints.model_validate({"guard": {"rate_limits": {key: 1}}})
    node = ToolExecutor(tools=[wipe, gh_list], constraints=limits)
    actions = [{"id": "c0", "name": "gh__wipe", "arguments": {"repo": "r0"}},
               {"id": "c1", "name": "gh__list", "arguments": {"repo": "r1"}},
               {"id": "c2", "name": "gh__wipe", "arguments": {"repo": "r2"}}]
    await ReactiveRunner(node, StateManager(AgentState, {"actions": actions})).run()
    assert RAN == ["r0"]
