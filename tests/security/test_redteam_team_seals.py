"""Red team, agent teams as sealed units: hand-offs and agent tools that a model or an author
can make reach the wrong agent, or tie up the run.

Fixed here:

- two hand-offs offered under one tool name (``Billing`` and ``billing``; any two agents named
  in letters a tool name cannot hold, both ``transfer_to_agent``; two long names cut to one
  prefix) were both offered, and the model's call went to whichever came last, though it
  chose by the other's description. Now such hand-offs are refused when the agent is built.
- an agent tool over a tree its caller is running (an agent that is its own tool, given its
  tree rather than a function that builds one, or a function that hands back that tree)
  bound the caller's own nodes to the call's run: the run hung until its time limit, then
  cancelling it overflowed the stack; so did an agent both handed off to and used as a tool
  (its round is in the team). Now the call fails at once, and the model is told why.
- a `SkillNode` as an agent tool took its namespace from its place in the call's tree, the
  same in every call: two calls at once shared it, so one call's skill read the other's
  question (and the first lost its own). Now a skill's namespace is nested in the run's own,
  the call's.
- a sub-agent's tree of agents kept apart in namespaces of their own (``left``, ``right``) was
  flattened into the call's namespace: the two agents shared one conversation and one list of
  calls, and the call that one agent's guard had a person confirm was never asked nor run.
  Now each such namespace is nested in the call's, as the tree runs on its own.
- a sub-agent that failed gave its caller's model its run's error as it was: a database URL's
  password or an ``api_key=...`` that a node's exception quoted went into the caller's
  conversation (and to its provider). Now they are masked, as the CLI shows a run's error.
- an agent whose calls ask nobody (``ToolExecutorConfig(interactive=False)``: a confirm rule
  denies) handed the conversation to an agent whose calls asked a person, and the run waited
  for one; a sub-agent called from it already asked nobody. Now nobody is asked for any agent
  of its team.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import py_trees
import pytest

from jianmu import Constraints, ReactiveRunner, RunStatus, StateManager
from jianmu.config import parse_config
from jianmu.errors import HandoffError
from jianmu.llm import ScriptedLLM
from jianmu.nodes import AgentState, agent_tool, create_react_node, handoff
from jianmu.nodes.executor_config import ToolExecutorConfig
from jianmu.skills import SkillCatalog, SkillNode
from jianmu.tools import tool

pytestmark = pytest.mark.anyio


def start() -> StateManager:
    return StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})


def transfer(name: str) -> list[dict[str, Any]]:
    return [{"name": name, "arguments": {}}]


@pytest.mark.parametrize("names", [("Billing", "billing"), ("账单", "管理"),
                                   ("x" * 60 + "_refunds", "x" * 60 + "_admin")])
def test_two_hand_offs_under_one_tool_name_are_refused(names: tuple[str, str]) -> None:
    first, second = (create_react_node(ScriptedLLM([f"{n} answers"]), [], name=n)
                     for n in names)
    with pytest.raises(HandoffError, match="give one a tool name of its own"):
        create_react_node(ScriptedLLM([transfer("transfer_to_agent")]),
                          [handoff(first), handoff(second)], name="triage")


async def test_hand_offs_named_apart_reach_the_agent_the_model_chose() -> None:
    refunds = create_react_node(ScriptedLLM(["refunds answers"]), [], name="账单")
    admin = create_react_node(ScriptedLLM(["admin answers"]), [], name="管理")
    triage = create_react_node(ScriptedLLM([transfer("transfer_to_refunds")]),
                               [handoff(refunds, name="refunds"), handoff(admin, name="admin")],
                               name="triage")
    state = start()
    assert (await ReactiveRunner(triage, state).run()).ok
    assert state.get("active_agent") == "账单"
    assert state.get("final_answer") == "refunds answers"


@pytest.mark.parametrize("given", ["tree", "function"])
async def test_an_agent_tool_over_the_tree_that_calls_it_fails_the_call(given: str) -> None:
    team = py_trees.composites.Sequence("team", memory=True, children=[])
    itself = agent_tool(team if given == "tree" else (lambda: team), name="me",
                        description="Ask yourself.")
    llm = ScriptedLLM([[{"name": "me", "arguments": {"input": "again"}}], "done"])
    team.add_child(create_react_node(llm, [itself], name="lead"))
    state = start()
    result = await ReactiveRunner(team, state).run(timeout=60)
    assert result.ok, result
    said = [m.content for m in state.get("messages") if m.role == "tool"]
    assert len(said) == 1 and "its tree is part of the run that calls it" in said[0]
    assert state.get("final_answer") == "done" and state.namespaces() == []


async def test_parallel_calls_of_a_skill_agent_never_share_its_conversation(
    tmp_path: Path,
) -> None:
    both = asyncio.Event()
    asked: list[str] = []

    @tool
    async def search(query: str) -> str:
        """Search, once both calls are in flight.

        Args:
            query: the topic.
        """
        asked.append(query)
        if len(asked) == 2:
            both.set()
        await asyncio.wait_for(both.wait(), 30)
        return f"found {query}"

    folder = tmp_path / "skills" / "research"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: research\ndescription: Research a topic.\ntools: [search]\n---\n"
        "Search before you answer.\n")

    def reply(messages: list[Any]) -> Any:
        if messages[-1].role == "user":
            return [{"name": "search", "arguments": {"query": messages[-1].content}}]
        return "saw " + ", ".join(m.content for m in messages if m.role == "user")

    def researcher() -> Any:
        return SkillNode("Research", ["research"], ScriptedLLM([reply, reply]), tools=[search],
                         catalog=SkillCatalog([tmp_path / "skills"], custom_tools=[search]))

    team = agent_tool(researcher, name="researcher", description="Researches.")
    lead = create_react_node(ScriptedLLM([[
        {"name": "researcher", "arguments": {"input": "private A"}},
        {"name": "researcher", "arguments": {"input": "B"}}], "done"]), [team], name="lead")
    state = start()
    config = parse_config(f"runtime:\n  debug_dir: {tmp_path / 'debug'}\n")
    assert (await ReactiveRunner(lead, state, config=config).run(timeout=60)).ok
    answers = [m.content for m in state.get("messages") if m.role == "tool"]
    assert answers == ["saw private A", "saw B"]
    assert sorted(state.namespaces()) == ["researcher/call_1", "researcher/call_2"]


DEPLOYED: list[str] = []


@tool(read_only=False)
def deploy(target: str) -> str:
    """Deploy.

    Args:
        target: where.
    """
    DEPLOYED.append(target)
    return "deployed"


def two_agents() -> Any:
    """Two agents in namespaces of their own; the left one's guard has a person confirm."""
    confirm = Constraints.model_validate({"guard": {"tool_policy": {"deploy": "confirm"}}})
    left = create_react_node(ScriptedLLM([[{"name": "deploy", "arguments": {"target": "prod"}}],
                                          "left done"]), [deploy], name="left",
                             constraints=confirm)
    right = create_react_node(ScriptedLLM(["right done"]), [deploy], name="right")
    for branch, namespace in ((left, "left"), (right, "right")):
        for node in branch.iterate():
            node.namespace = namespace
    return py_trees.composites.Parallel(
        "both", policy=py_trees.common.ParallelPolicy.SuccessOnAll(), children=[left, right])


async def test_namespaced_agents_of_a_sub_agent_stay_apart_under_their_own_guard() -> None:
    DEPLOYED.clear()
    helper = agent_tool(two_agents, name="helper", description="Helps.")
    lead = create_react_node(ScriptedLLM([[{"name": "helper", "arguments": {"input": "go"}}],
                                          "lead done"]), [helper], name="lead")
    state = start()
    runner = ReactiveRunner(lead, state)
    first = await runner.run(timeout=60)
    assert first.status is RunStatus.SUSPENDED and DEPLOYED == []
    assert [r.id for r in first.pending] == ["helper/call_1/left/call_1"]
    assert state.scope("helper/call_1.right").get("final_answer") == "right done"
    runner.approve("helper/call_1/left/call_1")
    assert (await runner.run(timeout=60)).ok and DEPLOYED == ["prod"]
    assert state.namespaces() == ["helper/call_1"]  # the call's answer, its agents' gone


async def test_an_agent_handed_off_to_is_not_also_run_as_a_tool_of_its_team() -> None:
    billing = create_react_node(ScriptedLLM(["billing answers"]), [], name="billing")
    ask = agent_tool(billing, name="ask_billing", description="Ask billing.")
    triage = create_react_node(
        ScriptedLLM([[{"name": "ask_billing", "arguments": {"input": "q"}}],
                     transfer("transfer_to_billing")]),
        [handoff(billing), ask], name="triage")
    state = start()
    assert (await ReactiveRunner(triage, state).run(timeout=60)).ok
    said = state.get("messages")[2].content or ""
    assert "its tree is part of the run that calls it" in said
    assert state.get("active_agent") == "billing"
    assert state.get("final_answer") == "billing answers"


async def test_a_failed_sub_agents_error_reaches_the_caller_without_its_secrets() -> None:
    def down(_messages: list[Any]) -> Any:
        raise RuntimeError("cannot reach postgresql://app:hunter2-pw@db/x (api_key=sk-live-999)")

    helper = agent_tool(create_react_node(ScriptedLLM([down]), [], name="helper"),
                        name="helper", description="Helps.")
    lead_llm = ScriptedLLM([[{"name": "helper", "arguments": {"input": "x"}}], "lead done"])
    lead = create_react_node(lead_llm, [helper], name="lead")
    state = start()
    assert (await ReactiveRunner(lead, state).run(timeout=60)).ok
    said = state.get("messages")[2].content or ""
    assert said.startswith("Error: agent 'helper' failed:") and "postgresql://app:" in said
    sent = str([m.content for m in lead_llm.requests[-1].messages])
    assert "hunter2-pw" not in said + sent and "sk-live-999" not in said + sent


async def test_a_team_whose_first_agent_asks_nobody_asks_nobody() -> None:
    DEPLOYED.clear()
    confirm = Constraints.model_validate({"guard": {"tool_policy": {"deploy": "confirm"}}})
    billing = create_react_node(
        ScriptedLLM([[{"name": "deploy", "arguments": {"target": "prod"}}], "billing done"]),
        [deploy], name="billing")
    triage = create_react_node(ScriptedLLM([transfer("transfer_to_billing")]),
                               [handoff(billing), deploy], name="triage", constraints=confirm,
                               executor_config=ToolExecutorConfig(interactive=False))
    state = start()
    result = await ReactiveRunner(triage, state).run(timeout=60)
    assert result.ok and result.pending == () and DEPLOYED == []
    assert "no interaction channel to ask" in (state.get("messages")[-2].content or "")
    assert state.get("final_answer") == "billing done"
