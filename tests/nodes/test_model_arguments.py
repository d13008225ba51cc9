"""A model's arguments as models and proxies really send them, through `create_react_node`:
each call either runs with what the model meant or is answered with what is wrong, and the
run goes on."""

from __future__ import annotations

import json
from typing import Any

from jianmu import AgentState, ReactiveRunner, ScriptedLLM, StateManager, create_react_node, tool
from jianmu.tools import ToolCall

received: list[dict[str, Any]] = []


@tool
def refund(order_id: str, amount: float = 0.0) -> str:
    """Refund an order."""
    received.append({"order_id": order_id, "amount": amount})
    return f"refunded {order_id}"


def _run(calls: list[dict[str, Any]]) -> dict[str, str]:
    received.clear()
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "refund"}]})
    assert ReactiveRunner(create_react_node(ScriptedLLM([calls, "Done."]), [refund]),
                          state).run_sync().ok
    return {m.tool_call_id or "": m.content or "" for m in state.get("messages")
            if m.role == "tool"}


def test_arguments_encoded_twice_run_with_the_object_they_hold() -> None:
    """``"{\\"order_id\\": \\"A1\\"}"``: the object as a JSON string. It was kept as the inner
    text, so the model read that '{"order_id": "A1"}' was not valid JSON, and its call went
    into the conversation as an object it never ran."""
    twice = json.dumps(json.dumps({"order_id": "A1", "amount": 5}))
    assert ToolCall.from_dict({"name": "refund", "arguments": twice}).arguments == {
        "order_id": "A1", "amount": 5}
    told = _run([{"id": "c1", "name": "refund", "arguments": twice}])
    assert told == {"c1": "refunded A1"}
    assert received == [{"order_id": "A1", "amount": 5.0}]


def test_a_json_string_that_is_not_an_object_is_still_refused() -> None:
    for inner in ("{oops", "A1", ""):
        raw = json.dumps(inner)
        told = _run([{"id": "c1", "name": "refund", "arguments": raw},
                     {"id": "c2", "name": "refund", "arguments": {"order_id": "B2"}}])
        assert "send a JSON object with these keys: order_id, amount" in told["c1"], (raw, told)
        assert told["c2"] == "refunded B2"
        assert received == [{"order_id": "B2", "amount": 0.0}]
