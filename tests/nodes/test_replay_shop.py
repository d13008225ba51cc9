"""A tool-calling workload replayed through `create_react_node` ends with exactly the data that
calling the tools directly gives.

A small shop (users, addresses, orders, products) whose tools exist only as OpenAI function
definitions plus plain functions over the shop's data, as a ported agent brings them. Property
names include ``state`` (a US state), ``context``, ``call_id`` and ``ctx``, named like the
runtime's own values. Each of the 24 tasks is a script of ground-truth calls (some turns call two
tools at once) sent by a scripted model; the shop's data after the run is hashed and compared
with the hash after applying the same calls directly.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from benchmarks._shop import (
    DEFINITIONS,
    READ_ONLY,
    Call,
    digest,
    make_functions,
    make_shop,
    make_tasks,
)
from jianmu import ReactiveRunner, ScriptedLLM, StateManager
from jianmu.nodes import AgentState, create_react_node
from jianmu.tools import ToolSet


def replay_directly(tasks: list[list[list[Call]]]) -> tuple[str, list[str]]:
    data = make_shop()
    functions = make_functions(data)
    outputs = [functions[name](**copy.deepcopy(args))
               for task in tasks for turn in task for name, args in turn]
    return digest(data), outputs


def replay_through_jianmu(tasks: list[list[list[Call]]]) -> tuple[str, list[str]]:
    data = make_shop()
    toolset = ToolSet.from_openai(
        DEFINITIONS, make_functions(data),
        metadata={name: {"read_only": True} for name in READ_ONLY},
    )
    outputs: list[str] = []
    for t, task in enumerate(tasks):
        script: list[Any] = [
            [{"id": f"t{t}_{i}_{j}", "name": name, "arguments": copy.deepcopy(args)}
             for j, (name, args) in enumerate(turn)]
            for i, turn in enumerate(task)
        ]
        script.append("Done.")
        state = StateManager(AgentState, {"messages": [{"role": "user", "content": f"task {t}"}]})
        runner = ReactiveRunner(create_react_node(ScriptedLLM(script), toolset,
                                                  max_iterations=20), state)
        result = runner.run_sync(timeout=60)
        assert result.ok and state.get("final_answer") == "Done.", (t, result.error)
        outputs += [m.content or "" for m in state.get("messages") if m.role == "tool"]
    return digest(data), outputs


def test_the_shop_replay_ends_with_the_data_of_direct_calls() -> None:
    tasks = make_tasks(make_shop())
    assert len(tasks) >= 20 and sum(len(turn) for task in tasks for turn in task) >= 80
    expected, direct_outputs = replay_directly(tasks)
    got, outputs = replay_through_jianmu(tasks)
    assert outputs == direct_outputs  # every call ran, in order, with the model's arguments
    assert not any(o.startswith("Error") or "invalid arguments" in o for o in outputs)
    assert got == expected


@pytest.mark.parametrize(
    ("name", "args", "path"),
    [
        ("modify_user_address", {"user_id": "user_0", "address1": "1 A St", "address2": "",
                                 "city": "X", "state": 12, "country": "USA", "zip": "1"},
         "$.state"),
        ("cancel_pending_order", {"order_id": "#W00", "reason": "bored"}, "$.reason"),
        ("set_gift_options", {"order_id": "#W00", "ctx": {"wrap": "yes"}}, "$.ctx.wrap"),
        ("exchange_items", {"order_id": "#W01", "item_ids": "101",
                            "new_item_ids": ["103"], "payment_method_id": "card_0"},
         "$.item_ids"),
    ],
)
def test_a_call_the_schema_refuses_changes_nothing_and_says_where(
    name: str, args: dict[str, Any], path: str
) -> None:
    data = make_shop()
    before = digest(data)
    toolset = ToolSet.from_openai(DEFINITIONS, make_functions(data))
    llm = ScriptedLLM([[{"id": "c1", "name": name, "arguments": args}], "Sorry."])
    state = StateManager(AgentState)
    assert ReactiveRunner(create_react_node(llm, toolset), state).run_sync(timeout=60).ok
    (observation,) = [m for m in state.get("messages") if m.role == "tool"]
    assert path in (observation.content or "")
    assert digest(data) == before
