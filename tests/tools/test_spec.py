"""One tool model: every tool, however made, has one `ToolSpec`; export, validation and the
guard read it, and it follows any change to what the tool says of itself."""

from __future__ import annotations

from typing import Any

import pytest

from jianmu.guard import GuardEnforcer
from jianmu.tools import Tool, ToolCall, ToolSet, tool
from jianmu.tools.spec import ToolSpec

SCHEMA = {"type": "object", "properties": {"q": {"type": "string", "description": "The query."}},
          "required": ["q"]}


@tool(category="write", confirm=True, effect_tags=["file_write"], timeout=5)
def save(q: str) -> str:
    """Save it.

    Args:
        q: The query.
    """
    return q


class Lookup(Tool):
    """Look it up."""

    name = "lookup"
    input_schema = SCHEMA

    def run(self, q: str) -> str:
        return q


def _routes() -> list[Tool]:
    return [
        save,
        Lookup(),
        Tool.from_schema(lambda q: q, name="schema_tool", description="Echo.", input_schema=SCHEMA),
        Tool.from_openai({"type": "function", "function": {
            "name": "openai_tool", "description": "Echo.", "parameters": SCHEMA}}, lambda q: q),
    ]


@pytest.mark.parametrize("index", range(4))
def test_every_route_has_one_spec_that_exports_and_validates(index: int) -> None:
    t = _routes()[index]
    spec = t.tool_spec
    assert isinstance(spec, ToolSpec) and spec.name == t.name
    assert spec.parameters["properties"]["q"]["type"] == "string"
    assert t.to_openai() == spec.to_openai() and t.to_mcp() == spec.to_mcp()
    assert t.to_anthropic() == spec.to_anthropic() and t.spec() == spec.as_dict()
    assert isinstance(spec.parallel_safe, bool) and isinstance(spec.max_retries, int)


def test_the_spec_follows_the_tools_attributes() -> None:
    t = Lookup()
    first = t.tool_spec
    assert t.tool_spec is first  # made once
    t.permission = "user_confirm"
    assert t.tool_spec.permission == "user_confirm" and t.to_mcp()["name"] == "lookup"
    t.input_schema = {"type": "object", "properties": {"r": {"type": "integer"}}}
    assert list(t.tool_spec.parameters["properties"]) == ["r"]
    deprecated = ToolSet([t]).deprecate("lookup", "old").get("lookup")
    assert deprecated is not None and deprecated.tool_spec.deprecated
    assert not t.tool_spec.deprecated


def test_the_guard_reads_the_spec() -> None:
    seen: list[Any] = []

    class Spy:
        name = "spy"

        def check(self, context: Any, previous: Any) -> Any:
            seen.append(context.tool)
            return previous

    enforcer = GuardEnforcer([Spy()])
    enforcer.preflight([ToolCall(id="1", name="save", arguments={"q": "x"})], ToolSet([save]))
    assert seen == [save.tool_spec]
    assert seen[0].permission == "user_confirm" and seen[0].effect_tags == ("file_write",)


@pytest.mark.anyio
async def test_an_mcp_tool_has_a_spec() -> None:
    import os
    import sys

    pytest.importorskip("mcp")
    from jianmu.mcp import MCPToolProvider
    from tests.mcp.helpers import WEATHER

    script = os.path.join(os.path.dirname(WEATHER), "address_server.py")
    provider = MCPToolProvider("addr", command=sys.executable, args=[script], timeout=20,
                               trust="read_only")
    async with await ToolSet.from_providers([provider]) as tools:
        spec = tools["addr__set_address"].tool_spec
        assert spec.remote and spec.category == "read"
        assert set(spec.parameters["properties"]) == {"state", "ctx", "call_id", "context"}


def test_the_registry_is_the_one_index_and_a_toolset_is_its_view() -> None:
    from jianmu.tools import ToolRegistry

    registry = ToolRegistry([save])
    view = registry.toolset()
    registry.register(Lookup())
    assert view.names() == ["save"]  # a view of the registry as it was
    assert registry.toolset().names() == ["save", "lookup"]
    assert view.get("SAVE") is save and registry.get("SAVE") is save
    own = view.registry
    own.remove("save")
    assert view.names() == ["save"]  # the set's registry is a copy: the set stays as it is
