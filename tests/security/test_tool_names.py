"""Issue 12, item 1: a tool call is canonicalised once; no look-alike name passes the guard.

A hostile model sends actions whose names look like a denied tool's (ligatures, long s,
fullwidth letters, zero-width joiners, whitespace, NUL, over-long names, aliases, ASCII case
variants). Each call either runs as exactly the registered tool the guard checked, under
that tool's own name, or is refused as an unknown tool; it never runs under a folded name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel

from jianmu import Constraints, ReactiveRunner, RunStatus, StateManager
from jianmu.constraints import ExecutionConstraints, GuardConstraints
from jianmu.errors import ConfigError, ToolValidationError
from jianmu.guard import GuardEnforcer
from jianmu.nodes.state import AgentState
from jianmu.nodes.tool_executor import ToolExecutor
from jianmu.nodes.tool_node import ToolNode
from jianmu.tools.base import Tool, tool
from jianmu.tools.calls import ToolCall, is_tool_name
from jianmu.tools.registry import ToolSet

pytestmark = pytest.mark.anyio

FILE_TOOLS = ["write_file", "read_file", "list_dir", "glob_search", "bash"]

# names a model might send for write_file / bash / list_dir / glob_search
LOOK_ALIKES = [
    "write_\ufb01le",  # "ﬁ" ligature
    "ba\u017fh",  # long s
    "li\u017ft_dir",
    "glob_\u017fearch",
    "\uff57\uff52\uff49\uff54\uff45_file",  # fullwidth "write"
    "write\u200d_file",  # zero-width joiner
    "write_fi\u200ble",  # zero-width space
    " write_file",
    "write_file ",
    "write_file\n",
    "write_file\x00",
    "\x00",
    "",
    "w" * 65,
    "WRITE_FIL\u212a",  # Kelvin sign: lower() gives "k"
    "wr\u0130te_file",  # dotted capital I: lower() gives "i" + a combining dot
]


def guard(**policy: Any) -> GuardConstraints:
    return GuardConstraints(**policy)


async def run_actions(
    tmp_path: Path,
    actions: list[dict[str, Any]],
    guard_constraints: GuardConstraints,
    *,
    state: StateManager | None = None,
    tracer_provider: TracerProvider | None = None,
) -> tuple[ReactiveRunner, dict[str, Any]]:
    """Run ``actions`` through a ToolExecutor with the file tools, the workspace ``tmp_path``."""
    tools = ToolSet.resolve(FILE_TOOLS)
    constraints = Constraints(
        guard=guard_constraints, execution=ExecutionConstraints(workdir=str(tmp_path))
    )
    executor = ToolExecutor(tools=tools, constraints=constraints)
    state = state or StateManager(AgentState, {})
    state.update({"actions": actions})
    runner = ReactiveRunner(executor, state, tracer_provider=tracer_provider)
    result = await runner.run(timeout=30)
    assert result.status is RunStatus.SUCCESS
    messages = {m.tool_call_id: m for m in state.get("messages")}
    return runner, messages


def write(name: str, path: str = "pwned.txt", call_id: str = "c1") -> dict[str, Any]:
    return {"id": call_id, "name": name, "arguments": {"path": path, "content": "x"}}


# -- through ToolExecutor and ReactiveRunner ---------------------------------------------------


@pytest.mark.parametrize("name", LOOK_ALIKES)
async def test_look_alike_of_a_denied_tool_is_unknown_and_never_runs(
    tmp_path: Path, name: str
) -> None:
    _, messages = await run_actions(
        tmp_path, [write(name)], guard(tool_policy={"write_file": "deny", "bash": "deny"})
    )
    assert not (tmp_path / "pwned.txt").exists()
    message = messages["c1"]
    assert message.content.startswith("Error: unknown tool")
    # the observation never echoes a control character or a non-ASCII look-alike back
    assert message.name is not None and message.name.isascii() and "\x00" not in message.name


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("ba\u017fh", {"command": "touch pwned.txt"}),
        ("li\u017ft_dir", {"path": "."}),
        ("glob_\u017fearch", {"pattern": "*"}),
    ],
)
async def test_long_s_names_are_unknown_even_when_the_real_tool_is_allowed(
    tmp_path: Path, name: str, arguments: dict[str, Any]
) -> None:
    (tmp_path / "secret.txt").write_text("s")
    _, messages = await run_actions(
        tmp_path, [{"id": "c1", "name": name, "arguments": arguments}],
        guard(tool_policy={"bash": "deny", "list_dir": "deny", "glob_search": "deny"}),
    )
    assert messages["c1"].content.startswith("Error: unknown tool")
    assert "secret.txt" not in messages["c1"].content
    assert not (tmp_path / "pwned.txt").exists()


@pytest.mark.parametrize("name", ["WRITE_FILE", "Write_File", "write_FILE"])
async def test_ascii_case_variant_resolves_to_the_tool_and_is_denied(
    tmp_path: Path, name: str
) -> None:
    _, messages = await run_actions(
        tmp_path, [write(name)], guard(tool_policy={"write_file": "deny"})
    )
    assert not (tmp_path / "pwned.txt").exists()
    assert messages["c1"].content.startswith("Error: the guard denied this call")
    assert messages["c1"].name == "write_file"


async def test_ascii_case_variant_runs_as_the_canonical_tool_when_allowed(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    runner, messages = await run_actions(
        tmp_path, [write("WRITE_FILE", "ok.txt")], guard(tool_policy={"write_file": "allow"}),
        tracer_provider=provider,
    )
    assert (tmp_path / "ok.txt").read_text() == "x"
    assert messages["c1"].name == "write_file"
    names = [s.name for s in exporter.get_finished_spans() if s.name.startswith("execute_tool")]
    assert names == ["execute_tool write_file"]
    span = next(s for s in exporter.get_finished_spans() if s.name == "execute_tool write_file")
    assert span.attributes["gen_ai.tool.name"] == "write_file"
    # the rate ledger is keyed by the canonical name too
    assert runner.state.get("messages")[0].name == "write_file"


async def test_path_rule_holds_for_a_case_variant_name(tmp_path: Path) -> None:
    (tmp_path / "secrets").mkdir()
    _, messages = await run_actions(
        tmp_path,
        [write("Write_File", "secrets/key.txt"), write("WRITE_FILE", "notes.txt", "c2")],
        guard(tool_policy={"write_file(path:secrets/*)": "deny", "write_file": "allow"}),
    )
    assert not (tmp_path / "secrets" / "key.txt").exists()
    assert messages["c1"].content.startswith("Error: the guard denied this call")
    assert (tmp_path / "notes.txt").exists()


@pytest.mark.parametrize("name", ["file_read", "FILE_READ", "File_Read"])
async def test_an_alias_of_a_denied_tool_is_denied(tmp_path: Path, name: str) -> None:
    (tmp_path / "secret.txt").write_text("top secret")
    _, messages = await run_actions(
        tmp_path, [{"id": "c1", "name": name, "arguments": {"path": "secret.txt"}}],
        guard(tool_policy={"read_file": "deny"}),
    )
    assert messages["c1"].content.startswith("Error: the guard denied this call")
    assert "top secret" not in messages["c1"].content
    assert messages["c1"].name == "read_file"


async def test_a_rule_written_for_an_alias_denies_the_tool(tmp_path: Path) -> None:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "k").write_text("top secret")
    _, messages = await run_actions(
        tmp_path,
        [{"id": "c1", "name": "READ_FILE", "arguments": {"path": "secrets/k"}}],
        guard(tool_policy={"file_read(path:secrets/*)": "deny"}),
    )
    assert messages["c1"].content.startswith("Error: the guard denied this call")


async def test_alias_rate_limit_holds_across_batches(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("A")
    state = StateManager(AgentState, {})
    rules = guard(rate_limits={"file_read": 1})
    _, first = await run_actions(
        tmp_path, [{"id": "c1", "name": "read_file", "arguments": {"path": "a.txt"}}], rules,
        state=state,
    )
    assert first["c1"].content == "A"
    # a second batch, a new executor and runner (a new tick of a new run over the same state)
    _, second = await run_actions(
        tmp_path, [{"id": "c2", "name": "file_read", "arguments": {"path": "a.txt"}}], rules,
        state=state,
    )
    assert second["c2"].content.startswith("Error: the guard denied this call")
    assert "rate limit" in second["c2"].content
    times = state.get("guard_ledger").call_times
    assert list(times) == ["read_file"]


async def test_alias_rate_limit_holds_across_ticks_of_one_executor(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("A")
    tools = ToolSet.resolve(["read_file"])
    executor = ToolExecutor(tools=tools, constraints=Constraints(
        guard=guard(rate_limits={"file_read": 1}),
        execution=ExecutionConstraints(workdir=str(tmp_path)),
    ))
    state = StateManager(AgentState, {})
    runner = ReactiveRunner(executor, state)
    outcomes = []
    for n, name in enumerate(["read_file", "READ_FILE", "file_read"]):
        state.update({"actions": [{"id": f"c{n}", "name": name, "arguments": {"path": "a.txt"}}]})
        await runner.run(timeout=30)
        outcomes.append(state.get("messages")[-1].content)
    assert outcomes[0] == "A"
    assert all(o.startswith("Error: the guard denied") for o in outcomes[1:])


# -- the other ways in: ToolSet.execute, ToolNode, GuardEnforcer -------------------------------


@tool(category="write")
async def drop_table(table: str) -> str:
    """Drop a table.

    Args:
        table: the table.
    """
    return f"dropped {table}"


@pytest.mark.parametrize(
    "name", ["drop_t\u0430ble", "drop_table\u200d", "DROP_TABLE\x00", "dr\u00f6p"]
)
async def test_toolset_execute_refuses_look_alikes(name: str) -> None:
    result = await ToolSet([drop_table]).execute(name, {"table": "t"})
    assert not result.ok and result.error is not None and "unknown tool" in result.error
    assert result.tool.isascii()


@tool(category="dangerous", permission="user_confirm")
async def kill_job(job: str) -> str:
    """Kill a job.

    Args:
        job: the job.
    """
    return f"killed {job}"


async def test_kelvin_sign_is_not_a_k() -> None:
    # "\u212a".lower() == "k": a lookup that lower-cases Unicode would run kill_job
    result = await ToolSet([kill_job]).execute("\u212aILL_JOB", {"job": "j"})
    assert not result.ok and result.error is not None and "unknown tool" in result.error


async def test_toolset_execute_reports_the_canonical_name() -> None:
    result = await ToolSet([drop_table]).execute("DROP_TABLE", {"table": "t"})
    assert result.ok and result.tool == "drop_table"


@pytest.mark.parametrize("name", ["drop_\ufb01le", "b\u0430sh", "x" * 65, " padded", "nul\x00"])
def test_a_tool_with_a_non_ascii_name_cannot_be_registered_or_placed(name: str) -> None:
    class Odd(Tool):
        description = "odd"
        input_schema = {"type": "object", "properties": {}}

        async def run(self) -> str:
            return "ran"

    odd = Odd()
    odd.name = name
    with pytest.raises(ToolValidationError):
        ToolSet([odd])
    with pytest.raises(ToolValidationError):
        ToolNode("odd", odd)


class PortState(BaseModel):
    args: dict[str, Any] = {}
    output: Any = None


async def test_tool_node_passes_the_guard_under_the_canonical_name(tmp_path: Path) -> None:
    (tmp_path / "secrets").mkdir()
    node = ToolNode("w", ToolSet.resolve(["write_file"])["WRITE_FILE"], input_key="args")
    state = StateManager(PortState, {"args": {"path": "secrets/x", "content": "y"}})
    runner = ReactiveRunner(node, state, constraints=Constraints(
        guard=guard(tool_policy={"Write_File(path:secrets/*)": "deny"}),
        execution=ExecutionConstraints(workdir=str(tmp_path)),
    ))
    result = await runner.run(timeout=30)
    assert result.status is RunStatus.FAILURE
    assert not (tmp_path / "secrets" / "x").exists()
    assert "denied write_file" in node.feedback_message


@pytest.mark.parametrize("name", ["write_\ufb01le", "WRITE_FILE", "file_read"])
def test_the_enforcer_checks_the_canonical_call(name: str) -> None:
    tools = ToolSet.resolve(["write_file", "read_file"])
    enforcer = GuardEnforcer.from_guard_constraints(
        guard(tool_policy={"write_file": "deny", "read_file": "deny"})
    )
    decision, = enforcer.preflight([ToolCall(name=name, arguments={"path": "x"})], tools)
    assert decision.denied
    # a mapping of lower-case names gets the same resolution, never a Unicode fold
    decision, = enforcer.preflight(
        [ToolCall(name=name, arguments={"path": "x"})],
        {t.name: t for t in tools},
    )
    assert decision.denied


def test_config_rules_naming_no_possible_tool_are_refused() -> None:
    with pytest.raises(ConfigError, match="not a tool name"):
        GuardEnforcer.from_guard_constraints(guard(tool_policy={"write_\ufb01le": "deny"}))
    with pytest.raises(ConfigError, match="not a tool name"):
        GuardEnforcer.from_guard_constraints(guard(rate_limits={"ba\u017fh": 1}))


# -- the property: executed as exactly the checked tool, or unknown ---------------------------


class Recorder(Tool):
    """A tool that records each run under its own name."""

    input_schema = {"type": "object", "properties": {}}
    description = "records"

    def __init__(self, name: str, log: list[str]) -> None:
        self.name = name
        self.log = log

    async def run(self) -> str:
        self.log.append(self.name)
        return self.name


NAMES = ["write_file", "read_file", "bash", "list_dir", "Get-Weather"]


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.one_of(
        st.text(max_size=70),
        st.sampled_from([*NAMES, "file_read", "FILE_READ", "get-weather", "BASH"]),
        st.builds(
            lambda base, pos, ch: base[:pos] + ch + base[pos:],
            st.sampled_from(NAMES),
            st.integers(0, 12),
            st.characters(blacklist_categories=("Cs",)),
        ),
    )
)
@pytest.mark.anyio
async def test_any_name_runs_as_the_checked_tool_or_is_unknown(name: str) -> None:
    log: list[str] = []
    tools = ToolSet([Recorder(n, log) for n in NAMES])
    checked: list[str] = []

    from jianmu.guard.enforcer import ToolPolicyChecker

    class Spy(ToolPolicyChecker):
        def check(self, context: Any, previous: Any) -> Any:
            checked.append(context.call.name)
            return super().check(context, previous)

    executor = ToolExecutor(tools=tools)
    executor._enforcer = GuardEnforcer([Spy()])
    state = StateManager(AgentState, {"actions": [{"id": "c", "name": name, "arguments": {}}]})
    await ReactiveRunner(executor, state).run(timeout=30)
    [message] = state.get("messages")
    if log:
        # it ran: exactly one registered tool, the one the guard checked, under its own name
        assert len(log) == 1 and log[0] in NAMES
        assert checked == [log[0]] and message.name == log[0]
        assert is_tool_name(name) and name.lower() in {log[0].lower(), "file_read"}
    else:
        assert message.content.startswith("Error: unknown tool")
        assert not is_tool_name(name) or name.lower() not in {n.lower() for n in NAMES}


# -- jianmu mcp serve -------------------------------------------------------------------------


@tool(category="read")
def list_files(folder: str) -> str:
    """List a folder.

    Args:
        folder: the folder.
    """
    return f"listed {folder}"


@pytest.mark.parametrize(
    "name", ["li\u017ft_files", "list_\ufb01les", "list_files\x00", "LIST_FILES "]
)
async def test_mcp_serve_refuses_look_alike_names(name: str) -> None:
    from mcp import Client

    from jianmu.mcp import build_mcp_server

    server = build_mcp_server(ToolSet([list_files]), guard=guard(rate_limits={"list_files": 5}))
    async with Client(server) as client:
        result = await client.call_tool(name, {"folder": "/"})
        assert result.is_error
        text = "\n".join(b.text for b in result.content if b.type == "text")
        assert "unknown tool" in text and "listed" not in text
        ok = await client.call_tool("LIST_FILES", {"folder": "x"})  # ASCII case: the tool
        assert not ok.is_error


@pytest.mark.parametrize("name", ["write_\ufb01le", "WRITE_FILE", "file_read"])
def test_a_resolved_tool_that_is_not_the_calls_own_is_resolved_again(name: str) -> None:
    """`preflight(resolved=...)` skips the look-up only for a call named by its tool's own
    name: a caller that passes a look-alike call with some tool is checked as if it had not."""
    tools = ToolSet.resolve(["write_file", "read_file"])
    enforcer = GuardEnforcer.from_guard_constraints(
        guard(tool_policy={"write_file": "deny", "read_file": "deny"})
    )
    call = ToolCall(name=name, arguments={"path": "x"})
    decision, = enforcer.preflight([call], tools, resolved=[tools.get("read_file")])
    assert decision.denied


def test_definitions_of_one_name_in_any_case_are_refused_not_one_dropped() -> None:
    # third-party definitions "Delete" and "delete" made one tool: the later replaced the
    # earlier, and a model's call to "Delete" ran delete's function
    from jianmu.errors import ToolDefinitionError
    from jianmu.tools import ToolSet

    empty = {"type": "object", "properties": {}}
    pair = [{"name": "Delete", "description": "Delete a draft.", "parameters": empty},
            {"name": "delete", "description": "Delete an account.", "parameters": empty}]
    with pytest.raises(ToolDefinitionError) as caught:
        ToolSet.from_openai(pair, {"Delete": lambda: "draft", "delete": lambda: "account"})
    assert caught.value.problems == [
        "definitions 'Delete' and 'delete' name one tool (names match without ASCII case); "
        "rename one",
        "definitions: Delete, delete",
    ]
    with pytest.raises(ToolDefinitionError, match="definition 'delete' is given twice"):
        ToolSet.from_openai([pair[1], pair[1]], {"delete": lambda: "account"})
