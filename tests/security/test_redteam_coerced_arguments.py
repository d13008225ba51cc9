"""Red team, arguments as the tool receives them: a tool made from a function validates the
model's arguments as pydantic does in its lax mode (README: ``"3"`` or ``3.0`` for an ``int``
is 3, ``"true"`` for a ``bool`` is True), so one value has many spellings on the wire. A rule
on that argument must hold for each of them, also in the arguments a person edited a call to.

Fixed here: the rules were matched against the spelling the model sent only, so
``transfer(amount:10000)`` (deny) let ``10000.0``, ``"10000.0"``, ``"+10000"`` and
``"10_000"`` through, each of which the tool received as 10000; ``wipe(force:true)`` let
``"yes"``, ``"on"`` and ``1`` through; and a confirm rule let them run without asking. Now the
policy is decided for the call as sent and as the tool receives it, and the stricter holds.

Also fixed by it: ``"path": null`` is "not given" to a tool, which then searches its default
folder (``.``), but the rule read the text ``null``: ``grep_search`` and ``list_dir`` with a
null path went past ``grep_search(path:secrets/*)``, which holds for a search of ``.``
(README), and read ``secrets/key``. And a tool whose input is not an object takes a bare
value as its ``input``, but a rule on ``input`` read nothing of a bare value:
``search(input:*payroll*)`` let the call whose arguments were just ``"payroll"`` run. A tool
made from a JSON Schema (an MCP server's) coerces nothing, but ``10000.0`` is the integer
10000 to JSON Schema and to the server: ``pay(amount:10000)`` let it through. The same
held for a client of ``jianmu mcp serve``, whose guard decided on the sent spelling alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import AfterValidator

from jianmu import Constraints, ReactiveRunner, StateManager
from jianmu.llm import ScriptedLLM
from jianmu.nodes import AgentState, create_react_node
from jianmu.tools import Tool, ToolSet, tool

pytestmark = pytest.mark.anyio
RAN: list[tuple[str, Any]] = []


@tool(read_only=False)
def transfer(to: str, amount: int) -> str:
    """Send money.

    Args:
        to: who gets it.
        amount: how much.
    """
    RAN.append((to, amount))
    return "sent"


@tool(read_only=False)
def wipe(disk: str, force: bool = False) -> str:
    """Wipe a disk.

    Args:
        disk: which.
        force: even when mounted.
    """
    RAN.append((disk, force))
    return "wiped"


@tool(read_only=False)
def mail(to: Annotated[str, AfterValidator(str.lower)]) -> str:
    """Send a mail.

    Args:
        to: the address (any case).
    """
    RAN.append(("mail", to))
    return "mailed"


async def _run(name: str, arguments: dict[str, Any], policy: dict[str, str],
               ) -> tuple[ReactiveRunner, StateManager]:
    RAN.clear()
    constraints = Constraints.model_validate({"guard": {"tool_policy": policy}})
    llm = ScriptedLLM([[{"id": "c1", "name": name, "arguments": arguments}], "done"])
    node = create_react_node(llm, [transfer, wipe, mail], constraints=constraints)
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    runner = ReactiveRunner(node, state)
    await runner.run()
    return runner, state


@pytest.mark.parametrize("amount", [10000, "10000", 10000.0, "10000.0", "+10000", "10_000"])
async def test_a_deny_rule_on_a_number_holds_for_every_spelling_of_it(amount: Any) -> None:
    await _run("transfer", {"to": "bob", "amount": amount}, {"transfer(amount:10000)": "deny"})
    assert RAN == []


@pytest.mark.parametrize("force", [True, "true", "yes", "on", "1", 1, "t", "Y"])
async def test_a_deny_rule_on_a_flag_holds_for_every_spelling_of_it(force: Any) -> None:
    await _run("wipe", {"disk": "sda", "force": force}, {"wipe(force:true)": "deny"})
    assert RAN == []


async def test_a_deny_rule_holds_for_the_value_a_validator_makes() -> None:
    await _run("mail", {"to": "Mallory@Evil.example"}, {"mail(to:*@evil.example)": "deny"})
    assert RAN == []


@pytest.mark.parametrize("amount", [10000.0, "+10000", "10_000"])
async def test_a_confirm_rule_on_a_number_asks_for_every_spelling_of_it(amount: Any) -> None:
    runner, _ = await _run("transfer", {"to": "bob", "amount": amount},
                           {"transfer(amount:10000)": "confirm"})
    assert RAN == []
    assert [r.id for r in runner.interaction.pending] == ["c1"]


@pytest.mark.parametrize("amount", [10000.0, 10000])
async def test_an_edited_approval_into_a_denied_amount_does_not_run(amount: Any) -> None:
    runner, state = await _run("transfer", {"to": "bob", "amount": 5},
                               {"transfer": "confirm", "transfer(amount:10000)": "deny"})
    assert RAN == []
    runner.approve("c1", arguments={"to": "bob", "amount": amount})
    await runner.run()
    assert RAN == []
    assert "denied" in state.get("messages")[2].content


async def test_a_spelling_that_is_the_same_value_still_runs() -> None:
    await _run("transfer", {"to": "bob", "amount": "+10"}, {"transfer(amount:10000)": "deny"})
    assert RAN == [("bob", 10)]


@pytest.mark.parametrize(("name", "arguments"), [
    ("grep_search", {"pattern": "KEY", "path": None}),
    ("list_dir", {"path": None}),
])
async def test_a_null_folder_is_the_default_folder_a_walking_rule_holds_for(
    tmp_path: Path, name: str, arguments: dict[str, Any]
) -> None:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "key").write_text("KEY=hunter2\n")
    constraints = Constraints.model_validate({
        "guard": {"tool_policy": {f"{name}(path:secrets/*)": "deny"}},
        "execution": {"workdir": str(tmp_path)},
    })
    llm = ScriptedLLM([[{"name": name, "arguments": arguments}], "done"])
    node = create_react_node(llm, ToolSet.resolve([name]), constraints=constraints)
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    await ReactiveRunner(node, state).run()
    seen = state.get("messages")[2].content
    assert seen.startswith("Error: the guard denied this call") and "hunter2" not in seen


def _search(query: str) -> str:
    RAN.append(("search", query))
    return "found"


@pytest.mark.parametrize("arguments", [{"input": "payroll"}, "payroll", '"payroll"'])
async def test_a_rule_on_the_input_of_a_tool_that_takes_a_bare_value_holds_for_it(
    arguments: Any,
) -> None:
    RAN.clear()
    search = Tool.from_schema(_search, name="search", description="Search.",
                              input_schema={"type": "string"})
    constraints = Constraints.model_validate(
        {"guard": {"tool_policy": {"search(input:*payroll*)": "deny"}}})
    llm = ScriptedLLM([[{"name": "search", "arguments": arguments}], "done"])
    node = create_react_node(llm, [search], constraints=constraints)
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    await ReactiveRunner(node, state).run()
    assert RAN == []


def _pay(**arguments: Any) -> str:
    RAN.append(("pay", arguments["amount"]))
    return "paid"


@pytest.mark.parametrize("amount", [10000, 10000.0, 1e4])
async def test_a_deny_rule_on_a_schema_tools_integer_holds_for_it_written_as_a_float(
    amount: Any,
) -> None:
    RAN.clear()
    pay = Tool.from_schema(_pay, name="pay", description="Pay.", input_schema={
        "type": "object", "properties": {"amount": {"type": "integer"}}, "required": ["amount"]})
    constraints = Constraints.model_validate(
        {"guard": {"tool_policy": {"pay(amount:10000)": "deny"}}})
    llm = ScriptedLLM([[{"name": "pay", "arguments": {"amount": amount}}], "done"])
    node = create_react_node(llm, [pay], constraints=constraints)
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    await ReactiveRunner(node, state).run()
    assert RAN == []


async def test_a_served_tool_holds_a_rule_for_every_spelling_of_a_value() -> None:
    pytest.importorskip("mcp")
    from mcp import Client

    from jianmu.constraints import GuardConstraints
    from jianmu.mcp import build_mcp_server

    RAN.clear()
    guard = GuardConstraints(tool_policy={"transfer(amount:10000)": "deny",
                                          "wipe(force:true)": "confirm"})
    server = build_mcp_server(ToolSet.from_tools([transfer, wipe]), guard=guard)
    async with Client(server) as client:
        denied = await client.call_tool("transfer", {"to": "bob", "amount": "+10000"})
        asked = await client.call_tool("wipe", {"disk": "sda", "force": "yes"})
        done = await client.call_tool("transfer", {"to": "bob", "amount": "+10"})
    assert denied.is_error and asked.is_error and not done.is_error
    assert RAN == [("bob", 10)]
