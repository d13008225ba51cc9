"""Injection by declaration: the runtime's values (ctx, state, call_id) reach only parameters that
declare themselves injected, never a schema property of the same name, by any route."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jianmu import ReactiveRunner, ScriptedLLM, StateManager
from jianmu.errors import ToolDefinitionError, ToolExecutionError, ToolValidationError
from jianmu.nodes import AgentState, ToolNode, create_react_node
from jianmu.runtime.context import RunContext
from jianmu.state import StateView
from jianmu.tools import Injected, Tool, ToolRegistry, ToolSet, tool

NAMES = ("state", "ctx", "call_id", "context")
MODEL_ARGS = {"state": "NY", "ctx": "model-ctx", "call_id": "c-7", "context": "ctx text"}
RUNTIME = {"state": object(), "ctx": RunContext(run_id="r1"), "call_id": "call_9"}
OBJECT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {name: {"type": "string", "description": name} for name in NAMES},
    "required": list(NAMES),
}


@tool
def address(state: str, ctx: str, call_id: str, context: str) -> dict[str, str]:
    """Echo what the model sent.

    Args:
        state: a US state.
        ctx: some text.
        call_id: some id.
        context: more text.
    """
    return {"state": state, "ctx": ctx, "call_id": call_id, "context": context}


class AddressTool(Tool):
    """Echo what the model sent (a subclass with a hand-written schema)."""

    name = "address_tool"
    input_schema = OBJECT_SCHEMA

    def run(self, **kwargs: Any) -> dict[str, Any]:
        return dict(kwargs)


def _echo(**kwargs: Any) -> dict[str, Any]:
    return dict(kwargs)


def _routes() -> list[Tool]:
    return [
        address,
        AddressTool(),
        Tool.from_schema(
            _echo, name="from_schema", description="Echo.", input_schema=OBJECT_SCHEMA
        ),
        Tool.from_openai(
            {"type": "function", "function": {"name": "from_openai", "description": "Echo.",
                                              "parameters": OBJECT_SCHEMA}},
            _echo,
        ),
    ]


@pytest.mark.anyio
@pytest.mark.parametrize("route", range(4), ids=["tool", "subclass", "from_schema", "openai"])
async def test_schema_properties_named_like_injected_values_get_the_models_values(
    route: int,
) -> None:
    t = _routes()[route]
    assert await t.execute(dict(MODEL_ARGS), injected=RUNTIME) == MODEL_ARGS
    result = await ToolSet([t]).execute(t.name, dict(MODEL_ARGS), injected=RUNTIME)
    assert result.ok and result.output == MODEL_ARGS


@pytest.mark.anyio
async def test_an_undeclared_injected_value_never_reaches_kwargs() -> None:
    seen: list[dict[str, Any]] = []

    class Loose(Tool):
        """Takes anything."""

        name = "loose"
        input_schema = {"type": "object", "properties": {"q": {"type": "string"}}}

        def run(self, **kwargs: Any) -> str:
            seen.append(kwargs)
            return "ok"

    await Loose().execute({"q": "x"}, injected=RUNTIME)
    assert seen == [{"q": "x"}]


@pytest.mark.anyio
async def test_declared_injected_parameters_are_filled() -> None:
    @tool(injected=["state"])
    def where(q: str, state: Any = None, run: RunContext | None = None,
              call_id: Injected[str | None] = None) -> str:
        """Say where.

        Args:
            q: the question.
        """
        return f"{q}:{state is RUNTIME['state']}:{run.run_id if run else None}:{call_id}"

    assert set(where.parameters["properties"]) == {"q"}
    assert await where.execute({"q": "a"}, injected=RUNTIME) == "a:True:r1:call_9"

    class Sub(Tool):
        """A subclass naming its injected parameters."""

        name = "sub"
        input_schema = {"type": "object", "properties": {"q": {"type": "string"}}}
        injected_params = ("state", "call_id")

        def run(self, q: str, state: Any = None, call_id: str | None = None,
                ctx: RunContext | None = None) -> str:
            return f"{q}:{state is RUNTIME['state']}:{call_id}:{ctx.run_id if ctx else None}"

    assert await Sub().execute({"q": "b"}, injected=RUNTIME) == "b:True:call_9:r1"


@pytest.mark.anyio
async def test_a_model_cannot_set_an_injected_parameter() -> None:
    @tool
    def f(q: str, secret: Injected[str]) -> str:
        """Doc.

        Args:
            q: the question.
        """
        return f"{q}:{secret}"

    result = await ToolSet([f]).execute("f", {"q": "a", "secret": "mine"}, injected={"secret": "s"})
    assert not result.ok and "unknown argument 'secret'" in (result.error or "")
    with pytest.raises(ToolExecutionError, match="needs the injected value 'secret'"):
        await f.execute({"q": "a"})


def test_an_injected_parameter_named_like_a_schema_property_is_a_definition_error() -> None:
    with pytest.raises(ToolDefinitionError, match="'state'"):
        tool(injected=["state"], input_schema=OBJECT_SCHEMA)(_echo_state)

    class Clash(Tool):
        """Clashes."""

        name = "clash"
        input_schema = OBJECT_SCHEMA
        injected_params = ("state",)

        def run(self, **kwargs: Any) -> Any:
            return kwargs

    with pytest.raises(ToolDefinitionError, match="'state'"):
        ToolRegistry().register(Clash())
    with pytest.raises(ToolDefinitionError, match="'state'"):
        ToolSet([Clash()])
    assert issubclass(ToolDefinitionError, ToolValidationError)


def _echo_state(state: str, ctx: str = "", call_id: str = "", context: str = "") -> str:
    return state


def test_injected_names_the_function_does_not_take_are_refused() -> None:
    def f(q: str) -> str:
        """Doc."""
        return q

    with pytest.raises(ToolDefinitionError, match="'nope'"):
        tool(injected=["nope"])(f)


# -- through a run -----------------------------------------------------------------------------


def _scripted_call(name: str) -> ScriptedLLM:
    return ScriptedLLM([
        [{"id": "c1", "name": name, "arguments": dict(MODEL_ARGS)}],
        "done",
    ])


@pytest.mark.parametrize("route", range(4), ids=["tool", "subclass", "from_schema", "openai"])
def test_a_react_run_gives_the_tool_the_models_values(route: int) -> None:
    t = _routes()[route]
    node = create_react_node(_scripted_call(t.name), [t])
    runner = ReactiveRunner(node, StateManager(AgentState))
    result = runner.run_sync(timeout=30)
    assert result.ok, result.error
    (observation,) = [m for m in runner.state.get("messages") if m.role == "tool"]
    assert json.loads(observation.content) == MODEL_ARGS


def test_a_workflow_tool_node_gives_the_tool_the_models_values() -> None:
    node = ToolNode("step", address, input_key="args", output_key="out")
    state = StateManager()
    state.update({"args": dict(MODEL_ARGS)})
    result = ReactiveRunner(node, state).run_sync(timeout=30)
    assert result.ok, result.error
    assert state.get("out") == MODEL_ARGS
    assert not isinstance(state.get("out")["state"], StateView)


def test_a_skill_tool_gets_the_models_values(tmp_path: Any) -> None:
    """A tool offered by a skill (SkillNode, the skill's own namespace) gets the model's
    values for properties named like the runtime's."""
    from jianmu.skills import SkillCatalog
    from jianmu.skills.node import SkillNode

    received: list[dict[str, Any]] = []

    @tool(name="set_address")
    def set_address(state: str, ctx: str, call_id: str, context: str) -> str:
        """Store an address.

        Args:
            state: a US state.
            ctx: some text.
            call_id: some id.
            context: more text.
        """
        received.append({"state": state, "ctx": ctx, "call_id": call_id, "context": context})
        return "stored"

    folder = tmp_path / "addresses"
    folder.mkdir()
    (folder / "SKILL.md").write_text(
        "---\nname: addresses\ndescription: Keep addresses.\ntools: [set_address]\n---\n"
        "Store the address you are given.\n"
    )
    catalog = SkillCatalog([tmp_path], custom_tools=[set_address])
    node = SkillNode("Addresses", ["addresses"], _scripted_call("set_address"), catalog=catalog,
                     tools=[set_address])
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "store it"}]})
    result = ReactiveRunner(node, state).run_sync(timeout=30)
    assert result.ok, result.error
    assert received == [MODEL_ARGS]
