"""Budget bypass through skills (issue 14): a skill's model usage is the run's — it adds to
the root's ``usage`` and spends the run's budget and max_tool_calls."""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path
from typing import Any

import py_trees
import pytest

from jianmu import ReactiveRunner, RunStatus, StateManager, create_react_node
from jianmu.config import AppConfig, parse_config
from jianmu.llm import ScriptedLLM, Usage
from jianmu.nodes import AgentState
from jianmu.skills import SkillCatalog
from jianmu.skills.bt import RunBTSkillTool
from jianmu.skills.node import SkillNode
from jianmu.tools import tool

pytestmark = pytest.mark.anyio


@tool
def ping(host: str) -> str:
    """Ping a host.

    Args:
        host: the host name.
    """
    return f"pong from {host}"


def make_skill(root: Path, name: str, front: str, files: dict[str, str] | None = None) -> None:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: The {name} skill.\n{textwrap.dedent(front)}---\n"
        "Ping what you are asked to.\n"
    )
    for relative, text in (files or {}).items():
        (folder / relative).write_text(text)


def cfg(root: Path, text: str = "") -> AppConfig:
    return parse_config(f"runtime:\n  debug_dir: {root / 'debug'}\n{text}")


def state_with() -> StateManager:
    return StateManager(AgentState, {"messages": [{"role": "user", "content": "ping"}]})


PING_THEN_ANSWER: list[Any] = [[{"name": "ping", "arguments": {"host": "a"}}], "pinged"]


def skill_node(root: Path, name: str, script: list[Any], *skills: str) -> SkillNode:
    catalog = SkillCatalog([root], custom_tools=[ping])
    return SkillNode(name, list(skills or ["pinger"]), ScriptedLLM(script), catalog=catalog,
                     tools=[ping])


def in_sequence(*children: py_trees.behaviour.Behaviour) -> py_trees.composites.Sequence:
    return py_trees.composites.Sequence("Both", memory=True, children=list(children))


async def run_recording(tree: Any, config: AppConfig) -> tuple[Any, StateManager, Usage]:
    """Run ``tree``; return the result, the state and the sum of every model call's usage."""
    state = state_with()
    runner = ReactiveRunner(tree, state, config=config)
    calls: list[Usage] = []
    runner.ctx.events.subscribe("llm.call.completed", lambda e: calls.append(Usage(
        input_tokens=e.fields["input_tokens"], output_tokens=e.fields["output_tokens"],
        requests=1,
    )))
    result = await runner.run(timeout=30)
    return result, state, sum(calls, Usage())


async def tokens_of_one_skill_node(root: Path) -> int:
    _, state, _ = await run_recording(skill_node(root, "S0", PING_THEN_ANSWER), cfg(root))
    return int(state.get("usage").total_tokens)


async def test_usage_of_two_skill_nodes_adds_up_exactly_at_the_root(tmp_path: Path) -> None:
    make_skill(tmp_path, "pinger", "tools: [ping]\n")
    tree = in_sequence(skill_node(tmp_path, "S0", PING_THEN_ANSWER),
                       skill_node(tmp_path, "S1", PING_THEN_ANSWER))
    result, state, spent = await run_recording(tree, cfg(tmp_path))
    assert result.ok
    usage = state.get("usage")
    assert usage.total_tokens > 0
    assert (usage.input_tokens, usage.output_tokens) == (spent.input_tokens, spent.output_tokens)


async def test_the_second_skill_node_finds_the_budget_spent(tmp_path: Path) -> None:
    make_skill(tmp_path, "pinger", "tools: [ping]\n")
    one = await tokens_of_one_skill_node(tmp_path)
    tree = in_sequence(skill_node(tmp_path, "S0", PING_THEN_ANSWER),
                       second := skill_node(tmp_path, "S1", PING_THEN_ANSWER))
    config = cfg(tmp_path, f"guard:\n  budget:\n    total_tokens: {one + 1}\n")
    result, state, spent = await run_recording(tree, config)
    assert result.status is RunStatus.FAILURE
    assert "token budget exhausted" in second.feedback_message
    assert state.get("usage").total_tokens == spent.total_tokens > one


async def test_a_plain_agent_then_a_skill_node_share_one_budget(tmp_path: Path) -> None:
    make_skill(tmp_path, "pinger", "tools: [ping]\n")
    one = await tokens_of_one_skill_node(tmp_path)
    agent = create_react_node(ScriptedLLM(["x" * 4 * one]), [ping], name="Agent")
    tree = in_sequence(agent, second := skill_node(tmp_path, "S1", PING_THEN_ANSWER))
    config = cfg(tmp_path, f"guard:\n  budget:\n    total_tokens: {one}\n")
    result, state, spent = await run_recording(tree, config)
    assert result.status is RunStatus.FAILURE
    assert "token budget exhausted" in second.feedback_message
    assert state.get("usage") == spent  # the skill stopped before its ping ran


async def test_a_skill_node_then_a_plain_agent_share_one_budget(tmp_path: Path) -> None:
    make_skill(tmp_path, "pinger", "tools: [ping]\n")
    one = await tokens_of_one_skill_node(tmp_path)
    agent = create_react_node(ScriptedLLM(PING_THEN_ANSWER), [ping], name="Agent")
    tree = in_sequence(skill_node(tmp_path, "S0", PING_THEN_ANSWER), agent)
    config = cfg(tmp_path, f"guard:\n  budget:\n    total_tokens: {one + 1}\n")
    result, _, _ = await run_recording(tree, config)
    assert result.status is RunStatus.FAILURE
    assert "token budget exhausted" in agent.feedback_message


async def test_a_bt_skills_model_inside_a_react_agent_spends_its_budget(tmp_path: Path) -> None:
    tree_py = (
        "from jianmu.llm import ScriptedLLM\nfrom jianmu.nodes import AgentLLMNode\n\n"
        "def build_tree(ctx):\n    return AgentLLMNode('think', ScriptedLLM(['x' * 4000]))\n"
    )
    make_skill(tmp_path, "thinker", "execution: bt\n", files={"tree.py": tree_py})
    bt_tool = RunBTSkillTool([SkillCatalog([tmp_path]).get("thinker")])
    llm = ScriptedLLM([[{"name": "run_bt_skill", "arguments": {"skill": "thinker"}}], "done"])
    agent = create_react_node(llm, [bt_tool], name="Agent")
    config = cfg(tmp_path, "guard:\n  budget:\n    total_tokens: 900\n")
    result, state, spent = await run_recording(agent, config)
    assert result.status is RunStatus.FAILURE  # the skill's 1000 output tokens count
    assert "token budget exhausted" in agent.feedback_message and llm.remaining == 1
    assert state.get("usage") == dataclasses.replace(spent, tool_calls=1)  # run_bt_skill
    assert spent.output_tokens > 1000


async def test_max_tool_calls_counts_over_two_progressive_skill_nodes(tmp_path: Path) -> None:
    make_skill(tmp_path, "pinger", "tools: [ping]\n")
    make_skill(tmp_path, "other", "tools: [ping]\n")
    script: list[Any] = [
        [{"name": "load_skill", "arguments": {"name": "pinger"}}],
        [{"name": "ping", "arguments": {"host": "a"}}],
        "done",
    ]
    tree = in_sequence(skill_node(tmp_path, "S0", script, "pinger", "other"),
                       skill_node(tmp_path, "S1", script, "pinger", "other"))
    state = state_with()
    runner = ReactiveRunner(tree, state, config=cfg(tmp_path, "guard:\n  max_tool_calls: 3\n"))
    seen: list[Any] = []
    runner.ctx.events.subscribe("tool.call.*", seen.append)
    assert (await runner.run(timeout=30)).ok
    outcomes = [(e.name.rsplit(".", 1)[-1], e.fields["tool"]) for e in seen
                if e.name != "tool.call.started"]
    assert outcomes == [
        ("completed", "load_skill"), ("completed", "ping"),  # S0
        ("completed", "load_skill"), ("failed", "ping"),  # S1: the run's fourth call
    ]
    assert "max_tool_calls" in seen[-1].fields["error"]
