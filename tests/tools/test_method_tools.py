"""``@tool`` on a method in a class body (tau-bench's and other frameworks' environments keep
their tools as methods of a class holding the data): the schema leaves ``self`` out, and every
call failed with "missing 1 required positional argument: 'self'". Read from an instance, the
tool is now the method bound to it; a tool of a method read from its class is refused when it
is registered, since no call could give its ``self``."""

from __future__ import annotations

import pytest

from jianmu import AgentState, ReactiveRunner, ScriptedLLM, StateManager, create_react_node
from jianmu.errors import ToolDefinitionError
from jianmu.tools import ToolSet, tool


class Shop:
    def __init__(self, stock: dict[str, int]) -> None:
        self.stock = stock

    @tool
    def count(self, sku: str) -> int:
        """How many of an item are in stock.

        Args:
            sku: the item.
        """
        return self.stock[sku]

    @tool(read_only=False)
    async def sell(self, sku: str, qty: int = 1) -> str:
        """Sell some of an item."""
        self.stock[sku] -= qty
        return f"{self.stock[sku]} left"


def test_a_method_tool_read_from_an_instance_runs_on_that_instance() -> None:
    a, b = Shop({"tea": 3}), Shop({"tea": 9})
    assert a.count is a.count and a.count is not b.count  # made once per instance
    assert a.count.parameters["required"] == ["sku"] and "self" not in str(a.count.parameters)
    assert a.count.parameters["properties"]["sku"]["description"] == "the item."
    assert a.sell.category == "write" and a.count.category == "read"
    calls = [{"id": "c1", "name": "count", "arguments": {"sku": "tea"}},
             {"id": "c2", "name": "sell", "arguments": {"sku": "tea", "qty": "2"}}]
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    assert ReactiveRunner(create_react_node(ScriptedLLM([calls, "Done."]),
                                            [a.count, a.sell]), state).run_sync().ok
    told = [m.content for m in state.get("messages") if m.role == "tool"]
    assert told == ["3", "1 left"]
    assert (a.stock, b.stock) == ({"tea": 1}, {"tea": 9})


def test_a_method_tool_read_from_its_class_is_refused_at_registration() -> None:
    with pytest.raises(ToolDefinitionError, match=r"Shop\.count is a method read from its "
                       r"class.*take the tool from an instance \(Shop\(\)\.count\)"):
        ToolSet([Shop.count])


def test_a_plain_function_tool_kept_on_a_class_is_not_bound() -> None:
    @tool
    def ping(host: str) -> str:
        """Ping a host."""
        return host

    class Tools:
        probe = ping

    assert Tools().probe is ping
    assert ToolSet([Tools().probe]).get("ping") is ping
