"""`ToolRegistry`: seed 001/002 registry, validated at registration."""

from __future__ import annotations

import enum

import pytest
from pydantic import BaseModel

from jianmu.errors import ToolDefinitionWarning, ToolNotFoundError, ToolValidationError
from jianmu.tools import FunctionTool, Tool, ToolRegistry, ToolSet, tool


class Category(enum.Enum):
    READ = "read"
    COMMUNICATE = "communicate"


def _registry() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool(description="Look up the weather for a city.", tags=["weather", "query"],
                   examples=["get_weather(city='Beijing')"])
    def get_weather(city: str) -> str:
        """Weather.

        Args:
            city: City name, e.g. 'Beijing'.
        """
        return f"sunny in {city}"

    @registry.tool(category="communicate", permission="user_confirm", tags=["email"],
                   timeout_seconds=30, max_retries=1)
    def send_email(to: str, subject: str, body: str) -> str:
        """Send an email to someone.

        Args:
            to: Recipient address.
            subject: Subject line.
            body: Message text.
        """
        return f"sent to {to}"

    return registry


def test_decorator_registers_and_keeps_the_function_callable() -> None:
    registry = _registry()
    weather = registry.get("GET_WEATHER")
    assert isinstance(weather, FunctionTool)
    assert weather("Paris") == "sunny in Paris"
    assert weather.tags == ("weather", "query")
    email = registry.get("send_email")
    assert email is not None
    assert (email.category, email.permission, email.timeout_seconds, email.max_retries) == (
        "communicate", "user_confirm", 30, 1)
    assert registry.names() == ["get_weather", "send_email"]
    assert [t.name for t in registry.list_tools()] == ["get_weather", "send_email"]
    assert len(registry) == 2 and "Send_Email" in registry and 1 not in registry
    assert [t.name for t in registry] == ["get_weather", "send_email"]
    assert "get_weather" in repr(registry)
    assert registry.get("nope") is None


def test_registry_defaults_apply_to_decorated_tools() -> None:
    registry = ToolRegistry(timeout_seconds=10, max_result_length=2000)

    @registry.tool
    def ping(host: str) -> str:
        """Ping a host and report the latency.

        Args:
            host: The host name.
        """
        return host

    assert (ping.timeout_seconds, ping.max_result_length) == (10, 2000)


def test_definitions_and_schemas_are_openai_shaped() -> None:
    registry = _registry()
    defs = registry.get_tool_definitions()
    assert [d["function"]["name"] for d in defs] == ["get_weather", "send_email"]
    assert defs[0]["function"]["parameters"]["properties"]["city"]["description"] == (
        "City name, e.g. 'Beijing'.")
    assert registry.get_schemas() == defs


def test_register_replaces_a_tool_of_the_same_name() -> None:
    registry = _registry()

    @tool(name="get_weather")
    def other(city: str) -> str:
        """Another weather source.

        Args:
            city: The city.
        """
        return "rain"

    registry.register(other)
    assert registry.get("get_weather") is other and len(registry) == 2


def test_register_validates_and_reports_every_problem() -> None:
    class Broken(Tool):
        name = "broken tool"
        category = "dangerous"
        permission = "auto"
        input_schema = {"type": "object", "properties": {}, "required": ["x"]}

        def run(self) -> str:
            return ""

    registry = ToolRegistry()
    with pytest.raises(ToolValidationError) as info:
        registry.register(Broken())
    assert len(info.value.problems) == 4
    assert len(registry) == 0
    with pytest.raises(TypeError, match="takes a Tool"):
        registry.register(lambda: 1)  # type: ignore[arg-type]


def test_missing_parameter_descriptions_warn_or_fail() -> None:
    def undocumented(a: int) -> int:
        """Adds one to a number."""
        return a + 1

    with pytest.warns(ToolDefinitionWarning, match="parameter 'a' has no description"):
        ToolRegistry().register(tool(undocumented))
    strict = ToolRegistry(require_parameter_descriptions=True)
    with pytest.raises(ToolValidationError, match="parameter 'a' has no description"):
        strict.register(tool(undocumented))


def test_decorator_resolves_local_types() -> None:
    class Query(BaseModel):
        text: str

    registry = ToolRegistry()

    @registry.tool
    def find(query: Query) -> str:
        """Find things.

        Args:
            query: What to find.
        """
        return query.text

    assert find.validate_args({"query": {"text": "x"}})["query"].text == "x"


def test_lifecycle_and_selection() -> None:
    registry = _registry()
    original = registry.get("get_weather")
    registry.deprecate("get_weather", "use the new weather service")
    deprecated = registry.get("get_weather")
    assert deprecated is not None and original is not None
    assert deprecated.deprecated and not original.deprecated
    assert deprecated.metadata["deprecation_reason"] == "use the new weather service"
    assert [t.name for t in registry.get_active_tools()] == ["send_email"]
    assert [s["function"]["name"] for s in registry.get_schemas()] == ["send_email"]
    assert len(registry.get_schemas(only_active=False)) == 2
    assert registry.get_tools_by_category("communicate")[0].name == "send_email"
    assert registry.get_tools_by_category(Category.COMMUNICATE)[0].name == "send_email"
    assert registry.get_tools_by_category(Category.READ) == []  # deprecated tools are left out
    assert registry.get_tools_by_tag("email")[0].name == "send_email"
    assert registry.get_tools_by_tag("weather") == []
    removed = registry.remove("send_email")
    assert removed.name == "send_email" and registry.names() == ["get_weather"]
    with pytest.raises(ToolNotFoundError, match="no tool named 'send_email'"):
        registry.remove("send_email")
    with pytest.raises(ToolNotFoundError):
        registry.deprecate("nope")


def test_toolset_snapshot() -> None:
    registry = _registry()
    registry.deprecate("send_email")
    ts = registry.toolset()
    assert isinstance(ts, ToolSet)
    assert ts.names() == ["get_weather", "send_email"]
    assert ts.active().names() == ["get_weather"]
    registry.remove("get_weather")
    assert ts.names() == ["get_weather", "send_email"]  # the snapshot does not change


def test_constructor_registers_given_tools() -> None:
    @tool
    def hello(name: str) -> str:
        """Say hello to someone.

        Args:
            name: Who to greet.
        """
        return f"hello {name}"

    assert ToolRegistry([hello]).names() == ["hello"]
