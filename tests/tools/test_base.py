"""`Tool`, `FunctionTool` and `@tool`: defaults, exports, validation and execution."""

from __future__ import annotations

import sys
import threading
import types
from typing import Any

import anyio
import pytest

from jianmu.errors import ToolExecutionError, ToolInputError, ToolTimeoutError, ToolValidationError
from jianmu.runtime.context import RunContext
from jianmu.tools import Category, FunctionTool, Injected, Tool, tool


class Calculator(Tool):
    """Evaluates arithmetic."""

    name = "calculator"
    input_schema = {"type": "string", "description": "An expression such as '2+2'"}

    def run(self, input: str) -> str:
        a, _, b = input.partition("+")
        return str(int(a) + int(b))


class Writer(Tool):
    name = "writer"
    description = "Writes."
    category: Category = "write"
    input_schema = {
        "type": "object",
        "properties": {"path": {"type": "string"}, "count": {"type": "integer"}},
        "required": ["path"],
    }

    def run(self, path: str, count: int = 1, user: str = "nobody") -> str:
        return f"{path}:{count}:{user}"


def test_category_drives_the_derived_defaults() -> None:
    c = Calculator()
    assert (c.parallel_safe, c.idempotent, c.max_retries) == (True, True, 2)
    w = Writer()
    assert (w.parallel_safe, w.idempotent, w.max_retries) == (False, False, 0)

    class ParallelWriter(Writer):
        parallel_safe = True

    class Runner(ParallelWriter):
        category = "execute"

    assert ParallelWriter.parallel_safe is True and ParallelWriter.max_retries == 0
    assert Runner.parallel_safe is True  # explicit in a parent: inherited
    assert Runner.idempotent is False

    class ReadAgain(Writer):
        category = "read"

    assert (ReadAgain.parallel_safe, ReadAgain.idempotent, ReadAgain.max_retries) == (
        True, True, 2)


def test_function_tool_defaults_follow_the_category() -> None:
    def f(x: int) -> int:
        """Doc."""
        return x

    assert (tool(f).parallel_safe, tool(f).max_retries) == (True, 2)
    w = tool(category="write")(f)
    assert (w.parallel_safe, w.idempotent, w.max_retries) == (False, False, 0)
    e = tool(category="execute", parallel_safe=True, max_retries=1)(f)
    assert (e.parallel_safe, e.max_retries) == (True, 1)


def test_get_description_falls_back_to_the_docstring_then_empty() -> None:
    assert Calculator().get_description() == "Evaluates arithmetic."
    assert Writer().get_description() == "Writes."

    class Legacy(Calculator):
        """Legacy calculator."""

        description = "No description provided"

    assert Legacy().get_description() == "Legacy calculator."

    class Bare(Tool):
        def run(self, input: str) -> str:
            return input

    assert Bare().get_description() == ""


def test_a_tool_without_a_docstring_has_no_description_not_the_librarys() -> None:
    @tool
    def add(a: int, b: int) -> int:
        return a + b

    assert add.get_description() == ""
    assert add.to_openai()["function"]["description"] == ""
    made = Tool.from_schema(lambda **kw: kw, name="echo", description="",
                            input_schema={"type": "object", "properties": {}})
    assert made.get_description() == ""

    class Documented(FunctionTool):
        """A subclass that documents its own tool."""

    assert Documented(lambda: 1, name="documented").get_description() == (
        "A subclass that documents its own tool."
    )


def test_non_object_input_schema_is_wrapped() -> None:
    c = Calculator()
    assert c.wraps_input
    assert c.to_schema() == {
        "name": "calculator",
        "description": "Evaluates arithmetic.",
        "parameters": {
            "type": "object",
            "properties": {
                "input": {"type": "string", "description": "An expression such as '2+2'"}
            },
            "required": ["input"],
        },
    }


@pytest.mark.anyio
async def test_wrapped_tool_gets_the_single_value() -> None:
    c = Calculator()
    assert await c.execute("2+3") == "5"
    assert await c.execute({"input": "4+4"}) == "8"
    with pytest.raises(ToolInputError, match="input"):
        await c.execute({"expression": "1+1"})


def test_exports() -> None:
    w = Writer()
    assert w.to_openai() == {
        "type": "function",
        "function": {"name": "writer", "description": "Writes.", "parameters": w.parameters},
    }
    assert w.to_anthropic() == {
        "name": "writer", "description": "Writes.", "input_schema": w.parameters,
    }
    mcp = w.to_mcp()
    assert mcp["inputSchema"] == w.parameters
    assert mcp["annotations"]["destructiveHint"] and not mcp["annotations"]["readOnlyHint"]
    assert "outputSchema" not in mcp  # a string output schema is not allowed by MCP

    @tool
    def info(x: int) -> dict[str, int]:
        """Doc."""
        return {"x": x}

    assert info.to_mcp()["outputSchema"]["type"] == "object"
    spec = w.spec()
    for key in ("input_schema", "output_schema", "category", "permission", "parallel_safe",
                "effect_tags", "timeout_seconds", "max_retries", "max_result_length", "tags",
                "version", "examples", "deprecated", "metadata", "sandboxed", "returns"):
        assert key in spec
    assert spec["category"] == "write"


def test_hand_written_schema_validation_is_lax_and_complete() -> None:
    class Typed(Tool):
        name = "typed"
        description = "d"
        input_schema = {
            "type": "object",
            "properties": {
                "n": {"type": "integer", "minimum": 1},
                "ratio": {"type": "number"},
                "on": {"type": "boolean"},
                "mode": {"type": "string", "enum": ["a", "b"]},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
                "point": {"$ref": "#/$defs/P"},
                "either": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
                "name": {"type": "string", "minLength": 2, "pattern": "^[a-z]+$"},
                "opt": {"type": "integer", "default": 3},
            },
            "required": ["n"],
            "$defs": {"P": {"type": "object", "properties": {"x": {"type": "integer"}},
                            "required": ["x"]}},
        }

        def run(self, **kwargs: Any) -> Any:
            return kwargs

    t = Typed()
    ok = t.validate_args({"n": "3", "ratio": "0.5", "on": "true", "mode": "a",
                          "tags": '["x"]', "point": {"x": "1"}, "either": None, "name": "ab",
                          "opt": None})
    assert ok == {"n": 3, "ratio": 0.5, "on": True, "mode": "a", "tags": ["x"],
                  "point": {"x": 1}, "either": None, "name": "ab"}
    with pytest.raises(ToolInputError) as info:
        t.validate_args({"n": 0, "mode": "c", "tags": ["a", "b", "c"], "point": {},
                         "either": "x", "name": "A", "zzz": 1, "on": "perhaps"})
    text = str(info.value)
    for expected in ("n: must be >= 1", "'c' is not one of 'a', 'b'", "at most 2 items",
                     "missing required argument 'point.x'", "either:",
                     "needs at least 2 characters", "does not match pattern",
                     "unknown argument 'zzz'", "on: expected boolean"):
        assert expected in text, expected
    assert "allowed arguments: n (required), ratio" in text
    with pytest.raises(ToolInputError, match="missing required argument 'n'"):
        t.validate_args({})


@pytest.mark.anyio
async def test_sync_run_goes_to_a_worker_thread_and_async_runs_in_the_loop() -> None:
    loop_thread = threading.get_ident()

    @tool
    def sync_tool() -> int:
        """Doc."""
        return threading.get_ident()

    @tool
    async def async_tool() -> int:
        """Doc."""
        return threading.get_ident()

    assert await sync_tool.execute({}) != loop_thread
    assert await async_tool.execute({}) == loop_thread
    assert async_tool.function_schema.is_async


@pytest.mark.anyio
async def test_invoke_uses_the_given_limiter() -> None:
    limiter = anyio.CapacityLimiter(1)
    seen: list[float] = []

    @tool
    def probe() -> str:
        """Doc."""
        seen.append(limiter.borrowed_tokens)
        return "ok"

    assert await probe.invoke({}, limiter=limiter) == "ok"
    assert seen == [1]


@pytest.mark.anyio
async def test_execute_times_out_async_tools() -> None:
    never = anyio.Event()

    @tool(timeout_seconds=0.05)
    async def stuck() -> str:
        """Doc."""
        await never.wait()
        return "never"

    with pytest.raises(ToolTimeoutError, match=r"'stuck' did not finish within 0\.05s"):
        await stuck.execute({})


@pytest.mark.anyio
async def test_a_tool_that_bounds_its_own_wait_gets_no_second_timer() -> None:
    class Patient(Tool):
        name = "patient"
        input_schema = {"type": "object", "properties": {}}
        timeout_seconds = 0.05

        async def run(self) -> str:
            await anyio.sleep(0.2)  # past timeout_seconds: only its own bound may stop it
            return "done"

    class OwnBound(Patient):
        bounds_own_wait = True

    with pytest.raises(ToolTimeoutError):
        await Patient().execute({})
    assert await OwnBound().execute({}) == "done"


@pytest.mark.anyio
async def test_execute_times_out_sync_tools_without_waiting_for_the_thread() -> None:
    release = threading.Event()

    @tool(timeout_seconds=0.05)
    def blocked() -> str:
        """Doc."""
        release.wait(30)
        return "late"

    try:
        with pytest.raises(ToolTimeoutError):
            await blocked.execute({})
    finally:
        release.set()


@pytest.mark.anyio
async def test_execute_delegates_validated_args_to_the_runner() -> None:
    calls: list[tuple[Tool, dict[str, Any]]] = []

    class FakeRunner:
        async def run(self, t: Tool, args: dict[str, Any]) -> Any:
            calls.append((t, args))
            return "from runner"

    w = Writer()
    assert await w.execute({"path": "a", "count": "2"}, runner=FakeRunner()) == "from runner"
    assert calls == [(w, {"path": "a", "count": 2})]
    with pytest.raises(ToolInputError):
        await w.execute({"count": 1}, runner=FakeRunner())
    assert len(calls) == 1


@pytest.mark.anyio
async def test_injected_values_reach_only_declared_parameters() -> None:
    w = Writer()
    # a schema property is the model's, whatever is injected under its name
    assert await w.execute({"path": "a"}, injected={"path": "b"}) == "a:1:nobody"
    # `user` is a parameter of run() but nothing declares it injected: not filled
    assert await w.execute({"path": "a"}, injected={"user": "ann", "session": "s1"}) == (
        "a:1:nobody")

    class DeclaringWriter(Writer):
        injected_params = ("user",)

    assert await DeclaringWriter().execute({"path": "a"}, injected={"user": "ann"}) == (
        "a:1:ann")


@pytest.mark.anyio
async def test_function_injected_parameters_are_filled_from_injected() -> None:
    @tool
    def greet(name: str, secret: Injected[str], ctx: RunContext | None = None) -> str:
        """Doc."""
        return f"{name}:{secret}:{ctx.run_id if ctx else None}"

    ctx = RunContext(run_id="r1")
    assert await greet.execute({"name": "a"}, injected={"secret": "s", "ctx": ctx}) == "a:s:r1"
    assert await greet.execute({"name": "a"}, injected={"secret": "s"}) == "a:s:None"
    with pytest.raises(ToolExecutionError, match="needs the injected value 'secret'"):
        await greet.execute({"name": "a"})
    with pytest.raises(ToolInputError) as info:
        await greet.execute({"name": "a", "secret": "model tries"}, injected={"secret": "s"})
    assert "allowed arguments: name (required)" in str(info.value)


@pytest.mark.anyio
async def test_run_context_found_under_its_usual_keys() -> None:
    @tool
    def where(run_context: RunContext) -> str:
        """Doc."""
        return run_context.run_id

    assert where.parameters["properties"] == {}
    assert await where.execute({}, injected={"context": RunContext(run_id="r2")}) == "r2"


@pytest.mark.anyio
async def test_positional_only_and_call_passthrough() -> None:
    @tool
    def add(a: int, b: int, /) -> int:
        """Doc."""
        return a + b

    assert await add.execute({"a": "1", "b": 2}) == 3
    assert add(2, 3) == 5  # the decorated function is still callable
    assert add.fn(1, 1) == 2


@pytest.mark.anyio
async def test_explicit_non_object_schema_maps_input_to_the_first_parameter() -> None:
    @tool(input_schema={"type": "string", "description": "expression"})
    def calc(expression: str) -> str:
        """Evaluate."""
        return expression.upper()

    assert calc.parameters["properties"] == {"input": {"type": "string",
                                                       "description": "expression"}}
    assert await calc.execute("abc") == "ABC"


def test_tool_options_and_structural_checks() -> None:
    def f(x: int) -> int:
        """Doc."""
        return x

    t = tool(name="my-tool", description="Custom.", tags=["a"], effect_tags=["file_write"],
             examples=["f(1)"], version="2.0", metadata={"k": 1}, timeout_seconds=5,
             max_result_length=10, permission="user_confirm", category="dangerous")(f)
    assert (t.name, t.description, t.tags, t.effect_tags, t.version) == (
        "my-tool", "Custom.", ("a",), ("file_write",), "2.0")
    assert t.metadata == {"k": 1} and t.timeout_seconds == 5 and t.max_result_length == 10
    with pytest.raises(ToolValidationError) as info:
        tool(name="bad name", category="dangerous")(f)
    assert any("bad name" in p for p in info.value.problems)
    assert any("dangerous tool cannot have permission 'auto'" in p for p in info.value.problems)
    with pytest.raises(ToolValidationError, match="category 'weird'"):
        tool(category="weird")(f)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="needs a function"):
        FunctionTool(3)  # type: ignore[arg-type]


def test_output_schema_can_be_overridden() -> None:
    @tool(output_schema={"type": "string", "description": "text"})
    def f() -> int:
        """Doc."""
        return 1

    assert f.output_schema == {"type": "string", "description": "text"}
    f.output_schema = {"type": "integer"}
    assert f.spec()["output_schema"] == {"type": "integer"}


def test_as_node_imports_tool_node_lazily(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[dict[str, Any]] = []

    class FakeToolNode:
        def __init__(self, **kwargs: Any) -> None:
            made.append(kwargs)

    fake = types.ModuleType("jianmu.nodes.tool_node")
    fake.ToolNode = FakeToolNode  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "jianmu.nodes.tool_node", fake)
    c = Calculator()
    node = c.as_node(input_key="expr", output_key="answer")
    assert isinstance(node, FakeToolNode)
    assert made == [{"name": "calculator", "tool": c, "input_key": "expr",
                     "output_key": "answer"}]
    c.as_node(name="Step")
    assert made[-1] == {"name": "Step", "tool": c}


@pytest.mark.anyio
async def test_run_sandboxed_must_be_implemented_by_sandboxed_tools() -> None:
    class Shell(Tool):
        name = "shell"
        sandboxed = True

        def run(self, input: str) -> str:
            return input

    with pytest.raises(NotImplementedError, match="does not implement run_sandboxed"):
        await Shell().run_sandboxed(object())  # type: ignore[arg-type]


def test_tool_repr_names_the_tool() -> None:
    assert "calculator" in repr(Calculator())

    @tool
    def f() -> int:
        """Doc."""
        return 1

    assert "'f'" in repr(f)


def test_a_subclass_property_still_takes_what_a_tool_is_built_with() -> None:
    from jianmu.tools import FunctionTool

    seen: list[tuple[str, object]] = []

    class Audited(FunctionTool):
        @property  # type: ignore[override]
        def version(self) -> str:
            return self._version

        @version.setter
        def version(self, value: str) -> None:
            seen.append(("version", value))
            self._version = value

    def lookup(q: str) -> str:
        """Look up ``q``."""
        return q

    made = Audited(lookup, version="2.0.0")
    assert seen == [("version", "2.0.0")] and made.version == "2.0.0"
    assert made.tool_spec.version == "2.0.0"
    made.version = "2.1.0"  # the spec follows, as for any tool
    assert made.tool_spec.version == "2.1.0"


def test_a_schema_tools_schema_is_its_own_copy_and_keeps_what_json_would_change() -> None:
    def pick(x: str) -> str:
        return x

    schema: dict[str, Any] = {"type": "object", "required": ["x"],
                              "properties": {"x": {"type": "string", "enum": ["a", "b"]}}}
    made = Tool.from_openai({"name": "pick", "parameters": schema}, pick)
    schema["properties"]["x"]["enum"].append("c")  # the caller's dict, changed later
    assert made.input_schema["properties"]["x"]["enum"] == ["a", "b"]
    assert list(made.input_schema["properties"]) == ["x"]  # key order kept
    with pytest.raises(ToolInputError):
        made.bind_args({"x": "c"})
    # a tuple is not what JSON gives back: copied as given, not turned into a list
    odd: dict[str, Any] = {"type": "object", "properties": {"x": {"enum": ("a", "b")}}}
    kept = Tool.from_openai({"name": "pick", "parameters": odd}, pick)
    assert kept.input_schema["properties"]["x"]["enum"] == ("a", "b")
    assert kept.input_schema["properties"]["x"] is not odd["properties"]["x"]


@pytest.mark.anyio
async def test_a_tools_arguments_are_converted_as_the_readme_says() -> None:
    """README: pydantic's lax mode converts ``"3"``/``3.0`` for an int and ``"true"`` for a
    bool; a value that does not convert is refused, naming it."""
    @tool
    def count(n: int, loud: bool) -> str:
        """Count."""
        return f"{n!r} {loud!r}"

    assert await count.execute({"n": "3", "loud": "true"}) == "3 True"
    assert await count.execute({"n": 3.0, "loud": True}) == "3 True"
    for bad, said in (("three", "'three'"), (3.5, "3.5")):
        with pytest.raises(ToolInputError, match=rf"- n: .*{said}"):
            await count.execute({"n": bad, "loud": True})
