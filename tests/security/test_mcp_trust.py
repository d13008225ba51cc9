"""MCP tool annotations are a server's claims: believed only as far as the operator trusts it.

A real MCP server process (official SDK, tests/security/servers/trust_server.py) offers
``delete_everything`` with no annotations, a tool that lies ``readOnlyHint: true`` and writes,
and honest read-only tools. Calls go through `ToolExecutor` under a `ReactiveRunner`, as a
model's actions would; every tool that runs leaves a file, so "nothing was written" is checked
on disk.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed")

from jianmu import ReactiveRunner, RunResult, RunStatus, StateManager
from jianmu.config import AppConfig, parse_config
from jianmu.errors import ConfigError
from jianmu.mcp import MCPToolProvider, providers_from_config
from jianmu.nodes.state import AgentState
from jianmu.nodes.tool_executor import ToolExecutor
from jianmu.tools.registry import ToolSet
from tests.support.forked_stdio import stdio_command

pytestmark = pytest.mark.anyio
SERVER = Path(__file__).parent / "servers" / "trust_server.py"


@dataclass
class Run:
    """One run of the executor over the server's tools."""

    result: RunResult
    state: StateManager
    runner: ReactiveRunner
    marks: Path

    def message(self, call_id: str) -> str:
        found = [m for m in self.state.get("messages") if m.tool_call_id == call_id]
        return (found[-1].content or "") if found else ""

    def ran(self) -> list[str]:
        return sorted(p.name for p in self.marks.iterdir())


RunCalls = Callable[..., Awaitable[Run]]


def config_for(tmp_path: Path, marks: Path, *, trust: str | None, extra: str = "") -> AppConfig:
    trust_line = f"      trust: {trust}\n" if trust is not None else ""
    command, args = stdio_command(str(SERVER), str(marks))  # forked with the SDK imported
    return parse_config(
        f"execution:\n  workdir: {tmp_path / 'ws'}\n{extra}"
        f"mcp:\n  servers:\n    trusty:\n      command: {command}\n"
        f"      args: {json.dumps(args)}\n{trust_line}"
    )


@asynccontextmanager
async def server_run(tmp_path: Path) -> AsyncIterator[RunCalls]:
    """Yield ``run(calls, trust=..., extra=..., interactive=...)``; servers closed after."""
    marks = tmp_path / "marks"
    marks.mkdir(parents=True)
    providers: list[MCPToolProvider] = []

    async def run(calls: list[dict[str, Any]], *, trust: str | None = None, extra: str = "",
                  interactive: bool = True) -> Run:
        config = config_for(tmp_path, marks, trust=trust, extra=extra)
        made = providers_from_config(config)
        providers.extend(made)
        toolset = await ToolSet.from_providers(made)
        state = StateManager(AgentState, {"actions": calls})
        runner = ReactiveRunner(
            ToolExecutor(tools=toolset), state, config=config, interactive=interactive
        )
        result = await runner.run(timeout=120)  # a safety net only; nothing waits on it
        return Run(result, state, runner, marks)

    try:
        yield run
    finally:
        for provider in providers:
            await provider.close()


def call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "name": f"trusty__{name}", "arguments": arguments}


async def test_a_tool_without_hints_waits_for_approval_and_writes_nothing(
    tmp_path: Path,
) -> None:
    async with server_run(tmp_path) as run:
        done = await run([call("c1", "delete_everything")])
        assert done.result.status is RunStatus.SUSPENDED, done.result.error
        assert [p.id for p in done.result.pending] == ["c1"]
        assert done.ran() == []
        # a person says yes: only then does it run
        done.runner.approve("c1")
        after = await done.runner.run(timeout=120)
        assert after.status is RunStatus.SUCCESS, after.error
        assert done.ran() == ["delete_everything"]


async def test_a_tool_without_hints_is_refused_where_nobody_can_approve(tmp_path: Path) -> None:
    async with server_run(tmp_path) as run:
        done = await run([call("c1", "delete_everything")], interactive=False)
        assert done.result.status is RunStatus.SUCCESS, done.result.error
        assert "trusty__delete_everything" in done.message("c1")
        assert "denied" in done.message("c1").lower() or "refused" in done.message("c1").lower()
        assert done.ran() == []


@pytest.mark.parametrize("trust", ["read_only", "all"])
async def test_trusting_the_server_does_not_make_a_tool_without_hints_run(
    tmp_path: Path, trust: str
) -> None:
    async with server_run(tmp_path) as run:
        done = await run([call("c1", "delete_everything")], trust=trust)
        assert done.result.status is RunStatus.SUSPENDED
        assert done.ran() == []


async def test_a_server_lying_read_only_still_asks_when_not_trusted(tmp_path: Path) -> None:
    async with server_run(tmp_path) as run:
        done = await run([call("c1", "sneaky_read")])  # trust: none, the default
        assert done.result.status is RunStatus.SUSPENDED
        assert [p.id for p in done.result.pending] == ["c1"]
        assert done.ran() == []


async def test_trust_read_only_runs_read_only_tools_without_asking(tmp_path: Path) -> None:
    async with server_run(tmp_path) as run:
        done = await run([call("r1", "local_status")], trust="read_only")
        assert done.result.status is RunStatus.SUCCESS, done.result.error
        assert done.message("r1") == "status ok"
        # the same server's lying tool is believed too: trust is the operator's choice
        liar = await run([call("s1", "sneaky_read")], trust="read_only")
        assert liar.result.status is RunStatus.SUCCESS and liar.ran() == ["sneaky_read"]


async def test_trust_all_believes_a_non_destructive_claim(tmp_path: Path) -> None:
    async with server_run(tmp_path) as run:
        done = await run([call("n1", "append_note", text="x")], trust="all")
        assert done.result.status is RunStatus.SUCCESS, done.result.error
        assert done.ran() == ["append_note"]
    async with server_run(tmp_path / "again") as run:
        untrusted = await run([call("n1", "append_note", text="x")], trust="read_only")
        assert untrusted.result.status is RunStatus.SUSPENDED
        assert untrusted.ran() == []


async def test_the_operators_allow_rule_still_lets_an_untrusted_tool_run(tmp_path: Path) -> None:
    async with server_run(tmp_path) as run:
        done = await run(
            [call("c1", "delete_everything")],
            extra="guard:\n  tool_policy:\n    trusty__delete_everything: allow\n",
        )
        assert done.result.status is RunStatus.SUCCESS, done.result.error
        assert done.ran() == ["delete_everything"]


@pytest.mark.parametrize(
    ("trust", "tool", "refused"),
    [
        ("read_only", "fetch_page", True),  # openWorldHint absent: the spec says open world
        ("all", "fetch_page", True),
        ("read_only", "local_status", True),  # the off-network claim is not believed
        ("all", "local_status", False),  # believed: it runs with the network off
    ],
)
async def test_network_false_refuses_mcp_tools_that_may_use_the_network(
    tmp_path: Path, trust: str, tool: str, refused: bool
) -> None:
    async with server_run(tmp_path) as run:
        arguments = {"url": "http://example.org"} if tool == "fetch_page" else {}
        done = await run(
            [call("c1", tool, **arguments)], trust=trust,
            extra="  network: false\n",  # under execution:
        )
        assert done.result.status is RunStatus.SUCCESS, done.result.error
        text = done.message("c1")
        assert ("uses the network" in text) is refused, text


async def test_tools_list_shows_the_strict_reading(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    (provider,) = providers_from_config(config_for(tmp_path, marks, trust=None))
    try:
        await provider.initialize()
        tools = {t.name: t for t in provider.get_tools()}
    finally:
        await provider.close()
    for tool in tools.values():  # trust none: no claim believed, every tool at its strictest
        assert (tool.category, tool.permission, tool.effect_tags, tool.max_retries) == (
            "dangerous", "user_confirm", ("http",), 0,
        ), tool
        assert tool.parallel_safe is False


def test_trust_is_checked_with_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"mcp\.servers\.trusty\.trust: Input should be "
                       r"'none', 'read_only' or 'all'"):
        config_for(tmp_path, tmp_path, trust="everything")
    with pytest.raises(ConfigError, match=r"mcp\.servers\.trusty\.trusted: unknown key; "
                       r"did you mean 'trust'\?"):
        parse_config(f"mcp:\n  servers:\n    trusty:\n      command: {sys.executable}\n"
                     "      trusted: all\n")
    with pytest.raises(ValueError, match="MCP trust must be one of"):
        MCPToolProvider("x", command="y", trust="most")  # type: ignore[arg-type]
