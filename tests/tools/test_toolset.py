"""`ToolSet`: immutability, lookup, selection, export and execution."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from jianmu.errors import ToolNotFoundError, ToolUnavailableWarning, ToolValidationError
from jianmu.tools import BaseToolProvider, BuiltinToolProvider, Category, Tool, ToolSet, tool


def _make(name: str, *, category: Category = "read", tags: tuple[str, ...] = (),
          max_len: int = 20000, result: Any = "ok") -> Tool:
    def fn(x: int = 0) -> Any:
        """Doc line one.

        Args:
            x: A number.
        """
        return result

    return tool(name=name, description=f"{name} does things.\nSecond line.", category=category,
                tags=tags, max_result_length=max_len)(fn)


@pytest.fixture
def fresh_default() -> Any:
    BuiltinToolProvider.reset_default()
    yield
    BuiltinToolProvider.reset_default()


def test_from_tools_keeps_order_and_resolves_names_without_case() -> None:
    a, b = _make("Alpha"), _make("beta")
    ts = ToolSet.from_tools([a, b, a])  # the same tool given twice is one tool
    assert ts.names() == ["Alpha", "beta"]
    assert ts.get("ALPHA") is a and ts.get("alpha") is a
    assert ts.get("missing") is None
    assert len(ts) == 2 and "BETA" in ts and "nope" not in ts and 3 not in ts
    assert list(ts) == [a, b] and ts.tools == (a, b)
    assert bool(ts) and not ToolSet()
    assert "beta" in repr(ts)


def test_two_tools_of_one_name_are_refused_not_one_dropped() -> None:
    # ToolSet([search, search_v2]) kept the last and dropped the first unseen, where an agent's
    # tools=[...] list, ToolSet.from_openai and from_providers refuse it (pydantic-ai too)
    first, second = _make("alpha"), _make("Alpha", result="second")
    for build in (ToolSet, ToolSet.from_tools):
        with pytest.raises(ToolValidationError, match="two tools are named 'Alpha'"):
            build([first, _make("beta"), second])
    # replacing stays what with_tools, merge and resolve(custom=) say they do
    assert ToolSet([first]).with_tools([second]).get("alpha") is second
    assert ToolSet([first]).merge([second]).tools == (second,)


def test_only_tools_are_accepted() -> None:
    with pytest.raises(TypeError, match="wrap functions with @tool"):
        ToolSet.from_tools([lambda: 1])  # type: ignore[list-item]


def test_resolve_takes_names_and_says_where_a_tool_goes() -> None:
    # a tool among the names was an AttributeError ('FunctionTool' has no 'strip'), and one
    # name given as a string was read letter by letter
    with pytest.raises(TypeError, match="got FunctionTool 'alpha'; give your own tools as custom="):
        ToolSet.resolve(["calculator", _make("alpha")])  # type: ignore[list-item]
    assert ToolSet.resolve("calculator").names() == ["calculator"]


def test_getitem_raises_with_the_known_names() -> None:
    ts = ToolSet([_make("alpha")])
    with pytest.raises(ToolNotFoundError, match="no tool named 'zeta'; known tools: alpha"):
        ts["zeta"]


def test_merge_and_with_tools_return_new_sets() -> None:
    a, b, c = _make("a"), _make("b"), _make("c")
    base = ToolSet([a])
    merged = base.merge(ToolSet([b]), [c])
    assert merged.names() == ["a", "b", "c"] and base.names() == ["a"]
    replaced = merged.with_tools([_make("b", result="new")])
    assert replaced.names() == ["a", "b", "c"] and replaced.get("b") is not b
    assert merged.get("b") is b


def test_describe_lists_first_lines() -> None:
    ts = ToolSet([_make("a"), _make("b")])
    assert ts.describe() == "- a: a does things.\n- b: b does things."


def test_is_parallel_safe() -> None:
    ts = ToolSet([_make("r1"), _make("r2"), _make("w", category="write")])
    assert ts.is_parallel_safe(["r1", "R2"])
    assert not ts.is_parallel_safe(["r1", "w"])
    assert not ts.is_parallel_safe(["unknown"])
    assert not ts.is_parallel_safe()
    assert ToolSet([_make("r")]).is_parallel_safe()


def test_deprecate_remove_active_and_selection() -> None:
    read = _make("read1", tags=("fs",))
    write = _make("write1", category="write", tags=("fs",))
    old = _make("old", tags=("fs",))
    ts = ToolSet([read, write, old])
    dep = ts.deprecate("OLD", "use read1")
    assert dep["old"].deprecated and not old.deprecated  # the original is untouched
    assert dep["old"].metadata["deprecation_reason"] == "use read1"
    assert dep.names() == ["read1", "write1", "old"]
    assert dep.active().names() == ["read1", "write1"]
    assert [s["name"] for s in dep.schemas()] == ["read1", "write1"]
    assert [s["name"] for s in dep.schemas(include_deprecated=True)] == [
        "read1", "write1", "old"]
    assert dep.by_category("read").names() == ["read1"]
    assert dep.by_category("write").names() == ["write1"]
    assert dep.by_tag("fs").names() == ["read1", "write1"]
    assert dep.remove("write1").names() == ["read1", "old"]
    assert ts.names() == ["read1", "write1", "old"]
    with pytest.raises(ToolNotFoundError):
        ts.remove("nope")
    with pytest.raises(ToolNotFoundError):
        ts.deprecate("nope")


def test_exports_are_cached_per_set() -> None:
    ts = ToolSet([_make("a"), _make("b")])
    first = ts.schemas()
    assert first == [t.to_schema() for t in ts]
    assert ts.schemas() == first and ts.schemas() is not first  # a copy of the cached list
    assert ts.schemas()[0] is first[0]  # the same dicts: computed once
    assert [s["name"] for s in ts.specs()] == ["a", "b"]
    assert ts.to_openai()[0]["type"] == "function"
    assert ts.to_openai(strict=True)[0]["function"]["strict"] is True
    assert ts.to_anthropic()[0]["input_schema"]["type"] == "object"
    assert ts.to_mcp()[0]["annotations"]["readOnlyHint"] is True


@pytest.mark.anyio
async def test_execute_returns_tool_results_for_everything() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    @tool
    def boom() -> None:
        """Fail."""
        raise RuntimeError("exploded")

    never = anyio.Event()

    @tool(timeout_seconds=0.05)
    async def slow() -> None:
        """Hang."""
        await never.wait()

    ts = ToolSet([add, boom, slow, _make("long", max_len=5, result="x" * 20)])
    ok = await ts.execute("ADD", {"a": "1", "b": 2}, call_id="c1")
    assert (ok.ok, ok.output, ok.call_id, ok.tool) == (True, 3, "c1", "add")
    assert ok.duration_ms is not None and ok.duration_ms >= 0
    bad_args = await ts.execute("add", {"a": 1})
    assert not bad_args.ok and "missing required argument 'b'" in (bad_args.error or "")
    raised = await ts.execute("boom")
    assert (raised.ok, raised.error) == (False, "RuntimeError: exploded")
    timed_out = await ts.execute("slow")
    assert not timed_out.ok and "did not finish within" in (timed_out.error or "")
    unknown = await ts.execute("nope", call_id="c9")
    assert not unknown.ok and unknown.call_id == "c9"
    assert "unknown tool 'nope'; known tools: add, boom, slow, long" == unknown.error
    cut = await ts.execute("long")
    assert cut.truncated and cut.output.startswith("xxxxx\n")


@pytest.mark.anyio
async def test_execute_passes_injected_and_runner() -> None:
    class Recorder:
        def __init__(self) -> None:
            self.seen: list[dict[str, Any]] = []

        async def run(self, t: Tool, args: dict[str, Any]) -> Any:
            self.seen.append(args)
            return "Error: refused by runner"

    @tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    runner = Recorder()
    ts = ToolSet([echo])
    result = await ts.execute("echo", {"text": "a"}, injected={"text": "b"}, runner=runner)
    assert runner.seen == [{"text": "a"}]  # an injected value never replaces the model's
    assert (result.ok, result.error) == (False, "refused by runner")


class _FakeProvider(BaseToolProvider):
    def __init__(self, tools: list[Tool]) -> None:
        self.tools = tools
        self.initialized = False

    async def initialize(self) -> None:
        self.initialized = True

    def get_tools(self, **kwargs: Any) -> list[Tool]:
        assert self.initialized, "get_tools before initialize"
        return [t for t in self.tools if kwargs.get("tag") in (None, *t.tags)]


@pytest.mark.anyio
async def test_from_providers_initialises_then_gathers() -> None:
    p1 = _FakeProvider([_make("a", tags=("x",)), _make("b")])
    p2 = _FakeProvider([_make("c", tags=("x",))])
    ts = await ToolSet.from_providers([p1, p2])
    assert ts.names() == ["a", "b", "c"]
    filtered = await ToolSet.from_providers([p1, p2], tag="x")
    assert filtered.names() == ["a", "c"]


def test_resolve_builtins_with_custom_winning(fresh_default: None) -> None:
    calc = _make("calculator", result="custom")
    extra = _make("extra")
    ts = ToolSet.resolve(["calculator", "read_file"], [calc, extra], strict=True)
    assert ts.get("calculator") is calc
    assert ts.names() == ["calculator", "read_file", "extra"]
    assert ts["read_file"].name == "read_file"
    assert "duckduckgo_search" in ToolSet.list_builtin_names()


def test_resolve_skips_unknown_with_a_warning_or_raises_when_strict(fresh_default: None) -> None:
    with pytest.warns(ToolUnavailableWarning, match="'no_such_tool' skipped"):
        ts = ToolSet.resolve(["no_such_tool", "calculator"])
    assert ts.names() == ["calculator"]
    with pytest.raises(ToolNotFoundError, match="no built-in tool named 'no_such_tool'"):
        ToolSet.resolve(["no_such_tool"], strict=True)


def test_resolve_uses_the_given_provider() -> None:
    provider = BuiltinToolProvider(builtins={"only": lambda: _make("only")}, aliases={})
    assert ToolSet.resolve(["only"], provider=provider).names() == ["only"]


@pytest.mark.anyio
async def test_execute_refuses_text_arguments_that_are_not_a_json_object() -> None:
    @tool
    def echo(text: str) -> str:
        """Echo the text.

        Args:
            text: What to echo.
        """
        return text

    ts = ToolSet([echo])
    for raw in ("{not json", "plain words", "[1, 2]", b"{not json"):
        result = await ts.execute("echo", raw, call_id="c1")
        assert not result.ok and result.call_id == "c1", raw
        assert "the arguments for tool 'echo' are not valid JSON" in (result.error or "")
        assert "send a JSON object with these keys: text" in (result.error or "")
    ok = await ts.execute("echo", '{"text": "hi"}')
    assert (ok.ok, ok.output) == (True, "hi")
    empty = await ts.execute("echo", "  ")  # no arguments at all: the schema speaks
    assert not empty.ok and "missing required argument 'text'" in (empty.error or "")


@pytest.mark.anyio
async def test_execute_gives_text_to_a_tool_that_takes_one_value() -> None:
    @tool(input_schema={"type": "string", "description": "An expression."})
    def shout(expression: str) -> str:
        """Shout the expression."""
        return expression.upper()

    result = await ToolSet([shout]).execute("shout", "{not json")
    assert (result.ok, result.output) == (True, "{NOT JSON")


def test_strict_export_of_a_tool_without_parameters() -> None:
    @tool
    def now() -> str:
        """The time now."""
        return "noon"

    expected = {"type": "object", "properties": {}, "required": [],
                "additionalProperties": False}
    function = now.to_openai(strict=True)["function"]
    assert function["parameters"] == expected and function["strict"] is True
    exported = ToolSet([now, _make("alpha")]).to_openai(strict=True)
    assert [t["function"]["name"] for t in exported] == ["now", "alpha"]
    assert exported[0]["function"]["parameters"] == expected


def test_strict_export_names_each_tool_it_cannot_export() -> None:
    def scores(table: dict[str, int]) -> int:
        """Sum the scores.

        Args:
            table: Scores by name.
        """
        return sum(table.values())

    def anything(value: Any) -> str:
        """Describe a value.

        Args:
            value: Any value.
        """
        return repr(value)

    good = _make("alpha")
    with pytest.raises(ToolValidationError, match="tool 'scores' is invalid") as one:
        ToolSet([good, tool(scores)]).to_openai(strict=True)
    assert one.value.tool == "scores"
    with pytest.raises(ToolValidationError) as both:
        ToolSet([tool(scores), good, tool(anything)]).to_openai(strict=True)
    text = str(both.value)
    assert "tool 'scores': parameter 'table' is a free-form object" in text
    assert "tool 'anything': parameter 'value' accepts Any" in text
    assert "alpha" not in text
    assert len(ToolSet([good, tool(scores)]).to_openai()) == 2  # non-strict export unharmed


def test_a_tool_given_by_name_is_refused_with_the_way_to_name_built_ins() -> None:
    # Agent(llm, tools=["calculator"]) said "wrap functions with @tool", which a name is not
    import pytest

    from jianmu import Agent, ScriptedLLM

    with pytest.raises(TypeError, match=r"got the name 'calculator'; .*"
                       r"ToolSet\.resolve\(\['calculator'\]\)"):
        Agent(ScriptedLLM(["hi"]), tools=["calculator"])


@pytest.mark.anyio
async def test_execute_reads_arguments_encoded_twice_as_a_models_call_is_read() -> None:
    """The executor reads ``"{\\"text\\": \\"hi\\"}"`` (the object as a JSON string) as the
    object; `ToolSet.execute` refused it as not valid JSON."""
    @tool
    def echo(text: str) -> str:
        """Echo the text.

        Args:
            text: What to echo.
        """
        return text

    result = await ToolSet([echo]).execute("echo", json.dumps(json.dumps({"text": "hi"})))
    assert (result.ok, result.output) == (True, "hi")
    refused = await ToolSet([echo]).execute("echo", json.dumps("hi"))
    assert not refused.ok and "send a JSON object with these keys: text" in (refused.error or "")
