"""Red team, the guard's names, layers and counts across indirect routes.

- A rule written for a built-in covered a tool of the run's own named like one of its
  aliases: ``duckduckgo_search: allow`` ran a custom ``web_search`` (``confirm=True``) unasked.
- A ``load_skill`` earlier in a batch dropped the executor's guard, so a rate-limited call
  after it was counted without its time: ``rate_limits: {send: 1}`` let two sends through.
- ``jianmu mcp serve``: the tool steps of a served ``run_bt_skill`` counted in a fresh ledger
  per skill run, past the server's ``rate_limits`` and ``max_tool_calls``.
- Layers merged ``tool_policy`` by the key's text: a nearer layer repeating ``read_file:
  allow`` as ``Read_File: allow`` took the farther layer's ``default_policy: deny`` for it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jianmu import Constraints, ReactiveRunner, SkillNode, StateManager, tool
from jianmu.guard import ToolPolicyChecker
from jianmu.llm import ScriptedLLM
from jianmu.nodes import AgentState
from jianmu.skills import SkillCatalog
from jianmu.tools import ToolSet
from jianmu.tools.builtin.files import read_file
from jianmu.tools.calls import ToolCall

REPO = Path(__file__).resolve().parents[2]


@tool(confirm=True)
def web_search(query: str) -> str:
    """Search our own index (not the web).

    Args:
        query: what to look for.
    """
    return "found"


def test_a_rule_for_a_built_in_leaves_a_tool_named_like_its_alias_alone() -> None:
    checker = ToolPolicyChecker({"duckduckgo_search": "allow"}, default_policy="confirm")
    call = ToolCall(name="web_search", arguments={"query": "x"})
    assert checker.resolve(call, web_search.tool_spec)[0] == "confirm"


def test_a_rule_written_for_an_alias_still_covers_the_built_in() -> None:
    builtin = ToolSet.resolve(["web_search"]).get("duckduckgo_search")
    checker = ToolPolicyChecker({"web_search": "deny"})
    call = ToolCall(name="duckduckgo_search", arguments={"query": "x"})
    assert checker.resolve(call, builtin)[0] == "deny"
    assert checker.resolve(ToolCall(name="web_search", arguments={"query": "x"}),
                           web_search.tool_spec)[0] == "deny"


def test_a_load_skill_in_the_batch_does_not_lose_a_rate_limited_call(tmp_path: Path) -> None:
    sent: list[str] = []

    @tool(read_only=False)
    def send(to: str) -> str:
        """Send a message.

        Args:
            to: recipient.
        """
        sent.append(to)
        return "sent"

    for name in ("alpha", "beta"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: skill {name}.\ntools: [send]\n---\nSend.\n")

    def call(tool_name: str, **arguments: str) -> dict[str, object]:
        return {"name": tool_name, "arguments": arguments}

    llm = ScriptedLLM([
        [call("load_skill", name="alpha")],
        [call("load_skill", name="beta"), call("send", to="a")],
        [call("send", to="b")],
        "done",
    ])
    node = SkillNode("s", ["alpha", "beta"], llm,
                     catalog=SkillCatalog([tmp_path], custom_tools=[send]), tools=[send])
    limits = Constraints.model_validate(
        {"guard": {"tool_policy": {"send": "allow"}, "rate_limits": {"send": 1}}})
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    ReactiveRunner(node, state, constraints=limits).run_sync(timeout=60)
    assert sent == ["a"]  # the second send, in the next turn, is past 1 a minute


@pytest.mark.anyio
async def test_a_served_bt_skill_s_steps_count_in_the_server_s_limits(tmp_path: Path) -> None:
    from mcp import Client

    from jianmu.constraints import ExecutionConstraints, GuardConstraints
    from jianmu.mcp import build_mcp_server
    from jianmu.skills import RunBTSkillTool

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("x = 1  # TODO\n")
    skill = SkillCatalog([REPO / "skills"]).get("workspace-report")
    toolset = ToolSet.resolve(["read_file"]).with_tools([RunBTSkillTool([skill])])
    guard = GuardConstraints.model_validate(
        {"tool_policy": {"write_file": "allow"}, "rate_limits": {"write_file": 1}})
    server = build_mcp_server(toolset, guard=guard,
                              execution=ExecutionConstraints(workdir=str(tmp_path)))
    async with Client(server) as client:
        said = []
        for i in range(3):
            result = await client.call_tool("run_bt_skill", {"skill": "workspace-report",
                                                             "inputs": {"folder": "src",
                                                                        "report": f"r{i}.md"}})
            said.append((result.is_error, " ".join(b.text for b in result.content
                                                   if b.type == "text")))
    assert sorted(p.name for p in tmp_path.glob("r*.md")) == ["r0.md"]
    assert not said[0][0] and all(error and "rate limit" in text for error, text in said[1:])


@pytest.mark.parametrize("spelling", ["read_file", "Read_File", " READ_FILE ", "read_file(*)"])
def test_a_nearer_layer_repeating_an_allow_keeps_it(spelling: str) -> None:
    config = Constraints.model_validate(
        {"guard": {"default_policy": "deny", "tool_policy": {"read_file": "allow"}}})
    node = Constraints.model_validate({"guard": {"tool_policy": {spelling: "allow"}}})
    merged = Constraints.merge(config, node).guard
    checker = ToolPolicyChecker.from_guard_constraints(merged)
    call = ToolCall(name="read_file", arguments={"path": "a.txt"})
    assert checker.resolve(call, read_file)[0] == "allow"


def test_a_nearer_layer_s_deny_in_another_case_still_denies() -> None:
    config = Constraints.model_validate({"guard": {"tool_policy": {"read_file": "allow"}}})
    node = Constraints.model_validate({"guard": {"tool_policy": {"READ_FILE": "deny"}}})
    merged = Constraints.merge(config, node).guard
    checker = ToolPolicyChecker.from_guard_constraints(merged)
    call = ToolCall(name="read_file", arguments={"path": "a.txt"})
    assert checker.resolve(call, read_file)[0] == "deny"
