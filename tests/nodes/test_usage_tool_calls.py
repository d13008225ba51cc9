"""``Usage.tool_calls`` counts executed calls only: a call that ran (also one that raised) counts;
an unknown tool, arguments that fail validation, a guard's denial never ran and do not count.
The same holds in a sub-agent, across a checkpoint and for ``max_tool_calls``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from jianmu import Agent, Constraints, ReactiveRunner, ScriptedLLM, StateManager, tool
from jianmu.nodes import AgentState, agent_tool, create_react_node
from jianmu.runtime.checkpoint import SQLiteCheckpointer

pytestmark = pytest.mark.anyio

ran: list[str] = []


@tool
def lookup(city: str) -> str:
    """The weather of a city.

    Args:
        city: the city.
    """
    ran.append(city)
    return f"sunny in {city}"


@tool
def broken(city: str) -> str:
    """Fails.

    Args:
        city: the city.
    """
    ran.append(city)
    raise RuntimeError("the forecast service is down")


def start() -> StateManager:
    return StateManager(AgentState, {"messages": [{"role": "user", "content": "Weather?"}]})


INVALID = [
    {"id": "a", "name": "lookup", "arguments": {}},  # a required argument missing
    {"id": "b", "name": "lookup", "arguments": {"city": 3}},  # of the wrong type
    {"id": "c", "name": "lookup", "arguments": {"city": "Oslo", "town": "x"}},  # unknown name
    {"id": "d", "name": "lookup", "arguments": "{not json"},  # not JSON at all
    {"id": "e", "name": "nowcast", "arguments": {"city": "Oslo"}},  # no such tool
    {"id": "f", "name": "denied", "arguments": {"city": "Oslo"}},  # the guard denies it
]


async def test_only_executed_calls_count_and_a_call_that_raised_is_executed() -> None:
    ran.clear()
    denied = tool(lambda city: city, name="denied", description="Denied.")
    llm = ScriptedLLM([
        [*INVALID, {"id": "g", "name": "lookup", "arguments": {"city": "Bergen"}},
         {"id": "h", "name": "broken", "arguments": {"city": "Tromsø"}}],
        "done",
    ])
    deny = Constraints.model_validate({"guard": {"tool_policy": {"denied": "deny"}}})
    state = start()
    result = await ReactiveRunner(
        create_react_node(llm, [lookup, broken, denied], constraints=deny), state).run()
    assert result.ok and ran == ["Bergen", "Tromsø"]
    assert result.usage.tool_calls == 2
    errors = [m.content or "" for m in state.get("messages") if m.role == "tool"]
    assert len(errors) == 8 and sum(t.startswith("Error:") for t in errors) == 7


async def test_invalid_calls_do_not_spend_max_tool_calls() -> None:
    ran.clear()
    llm = ScriptedLLM([
        [INVALID[0], INVALID[1]],
        [{"name": "lookup", "arguments": {"city": "Oslo"}}],
        "done",
    ])
    once = Constraints.model_validate({"guard": {"max_tool_calls": 1}})
    result = await ReactiveRunner(
        create_react_node(llm, [lookup], constraints=once), start()).run()
    assert result.ok and ran == ["Oslo"] and result.usage.tool_calls == 1


@pytest.mark.parametrize("limit", [{"max_tool_calls": 1}, {"rate_limits": {"lookup": 1}}])
async def test_an_invalid_call_takes_no_place_from_a_later_call_of_its_batch(
    limit: dict[str, Any],
) -> None:
    """The guard counted a call it let through before its arguments were checked: a batch of
    an invalid call then a valid one denied the valid one ("1 admitted earlier in this
    batch"), though the invalid one never ran."""
    ran.clear()
    llm = ScriptedLLM([
        [INVALID[1], INVALID[0], {"id": "g", "name": "lookup", "arguments": {"city": "Oslo"}}],
        "done",
    ])
    once = Constraints.model_validate({"guard": limit})
    state = start()
    result = await ReactiveRunner(
        create_react_node(llm, [lookup], constraints=once), state).run()
    assert result.ok and ran == ["Oslo"] and result.usage.tool_calls == 1
    answers = [m.content or "" for m in state.get("messages") if m.role == "tool"]
    assert answers[-1] == "sunny in Oslo", answers


async def test_a_sub_agents_invalid_calls_do_not_count_in_the_runs_usage() -> None:
    ran.clear()

    def researcher() -> Any:
        return create_react_node(ScriptedLLM([
            [INVALID[0], {"name": "lookup", "arguments": {"city": "Oslo"}}], "sunny",
        ]), [lookup], name="researcher")

    ask = agent_tool(researcher, name="research", description="Ask the researcher.")
    lead = ScriptedLLM([
        [{"id": "bad", "name": "research", "arguments": {"question": 3}}],  # not its input
        [{"id": "good", "name": "research", "arguments": {"input": "Oslo?"}}],
        "sunny.",
    ])
    result = await ReactiveRunner(create_react_node(lead, [ask], name="lead"), start()).run()
    assert result.ok and ran == ["Oslo"]
    # the lead's one research call that ran, the researcher's one lookup that ran
    assert result.usage.tool_calls == 2


def test_a_confirm_call_with_invalid_arguments_is_not_counted_nor_asked(
    tmp_path: Path,
) -> None:
    """Once asked and approved, then refused by its validation (and not counted); now refused
    before a person is asked (a call that cannot run needs no decision), and still not
    counted, in the run and after a restore."""
    ran.clear()

    @tool(confirm=True)
    def deploy(target: str) -> str:
        """Deploy.

        Args:
            target: where.
        """
        ran.append(target)
        return f"deployed to {target}"

    def agent(*script: Any) -> Agent:
        return Agent(ScriptedLLM(list(script)), tools=[deploy, lookup],
                     checkpointer=SQLiteCheckpointer(tmp_path / "runs.db"))

    done = agent([{"name": "lookup", "arguments": {"city": "Oslo"}},
                  {"name": "deploy", "arguments": {"where": "prod"}}],
                 "Could not deploy.").run_sync("Ship it.")
    assert done.ok and not done.pending and ran == ["Oslo"] and done.usage.tool_calls == 1
    refusal = [m.content or "" for m in done.messages if m.role == "tool"][1]
    assert "target" in refusal, refusal
    assert agent().restore(done.run_id).usage.tool_calls == 1
