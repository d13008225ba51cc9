"""Red team, arguments encoded twice: a JSON string holding the object's JSON
(``"{\\"to\\": \\"bob\\", ...}"``), as some models and proxies send them, is now decoded to
the object when the call is read, so it runs. The guard must decide on that object: a deny
rule on an argument holds, and a confirm rule asks, exactly as for the object sent once."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jianmu import Constraints, ReactiveRunner, StateManager
from jianmu.llm import ScriptedLLM
from jianmu.nodes import AgentState, create_react_node
from jianmu.tools import tool

pytestmark = pytest.mark.anyio
RAN: list[tuple[str, int]] = []


@tool(read_only=False)
def transfer(to: str, amount: int) -> str:
    """Send money.

    Args:
        to: who gets it.
        amount: how much.
    """
    RAN.append((to, amount))
    return "sent"


async def _run(arguments: Any, policy: dict[str, str]) -> ReactiveRunner:
    RAN.clear()
    constraints = Constraints.model_validate({"guard": {"tool_policy": policy}})
    llm = ScriptedLLM([[{"id": "c1", "name": "transfer", "arguments": arguments}], "done"])
    node = create_react_node(llm, [transfer], constraints=constraints)
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    runner = ReactiveRunner(node, state)
    await runner.run()
    return runner


TWICE = json.dumps(json.dumps({"to": "bob", "amount": 10000}))


async def test_a_deny_rule_holds_for_arguments_encoded_twice() -> None:
    await _run(TWICE, {"transfer(amount:10000)": "deny"})
    assert RAN == []
    await _run(TWICE, {"transfer(to:bob)": "deny"})
    assert RAN == []


async def test_a_confirm_rule_asks_for_arguments_encoded_twice() -> None:
    runner = await _run(TWICE, {"transfer(amount:10000)": "confirm"})
    assert RAN == []
    assert [r.id for r in runner.interaction.pending] == ["c1"]


async def test_arguments_encoded_twice_that_no_rule_names_run() -> None:
    await _run(TWICE, {"transfer(amount:5)": "deny"})
    assert RAN == [("bob", 10000)]
