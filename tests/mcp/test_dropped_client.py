"""An MCP client dropped without ``close()``: a ResourceWarning, and its server stopped.

Each test drops its last reference to a client, collects, and waits (a bounded poll of
short waits, never a time limit asserted) until the server's process is gone (reaped: no
``/proc/<pid>`` entry at all).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import sys
import time
import warnings
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from jianmu import ReactiveRunner, RunStatus, StateManager
from jianmu.config import parse_config
from jianmu.errors import MCPError
from jianmu.llm import ScriptedLLM
from jianmu.mcp import MCPClient
from jianmu.nodes import AgentState
from jianmu.skills import SkillCatalog
from jianmu.skills.node import SkillNode
from tests.mcp.helpers import WEATHER, HttpServer, free_port

pytestmark = pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs /proc")

# the weather server, ignoring SIGTERM: only SIGKILL stops it
DEAF = (
    "import runpy, signal, sys; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    f"sys.argv = [{WEATHER!r}, 'stdio']; runpy.run_path({WEATHER!r}, run_name='__main__')"
)
POLLS = 1200  # 0.05 s each: a bound for a busy machine, not a speed asserted


def weather(**kwargs: Any) -> MCPClient:
    kwargs.setdefault("args", [WEATHER, "stdio"])
    return MCPClient(command=sys.executable, name="weather", timeout=30, **kwargs)


def exists(pid: int) -> bool:
    """Whether ``pid`` is a process at all (running, or exited and not reaped yet)."""
    return Path(f"/proc/{pid}").exists()


def children() -> set[int]:
    """Our own child processes' ids."""
    found: set[int] = set()
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        with open(task / "children") as listed:
            found.update(int(pid) for pid in listed.read().split())
    return found


async def gone(pid: int) -> bool:
    for _ in range(POLLS):
        if not exists(pid):
            return True
        await asyncio.sleep(0.05)
    return False


async def tasks_end(name: str) -> bool:
    """Whether the tasks of the client ``name`` on this loop end."""
    for _ in range(POLLS):
        if not [t for t in asyncio.all_tasks() if t.get_name() == f"jianmu-mcp-{name}"]:
            return True
        await asyncio.sleep(0.05)
    return False


def gone_sync(pid: int) -> bool:
    for _ in range(POLLS):
        if not exists(pid):
            return True
        time.sleep(0.05)
    return False


async def connected(client: MCPClient) -> int:
    """Connect ``client`` and return its server's pid."""
    await client.connect()
    return int((await client.call_tool("server_pid")).text())


@pytest.fixture
def loop_errors() -> Iterator[list[logging.LogRecord]]:
    """What asyncio reports (a task's exception never retrieved, a task destroyed pending)."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler, log = Keep(logging.WARNING), logging.getLogger("asyncio")
    log.addHandler(handler)
    try:
        yield records
    finally:
        log.removeHandler(handler)


def dropped(holder: list[Any]) -> list[warnings.WarningMessage]:
    """Drop the only reference (in ``holder``) and collect; the warnings that came of it."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        holder.clear()
        gc.collect()
    return [w for w in caught if issubclass(w.category, ResourceWarning)]


def said_unclosed(caught: list[warnings.WarningMessage]) -> None:
    assert len(caught) == 1, [str(w.message) for w in caught]
    text = str(caught[0].message)
    assert "unclosed MCP client 'weather'" in text
    assert "await client.close()" in text and "async with" in text


@pytest.mark.anyio
async def test_dropped_in_a_running_loop_warns_and_stops_its_server(
    loop_errors: list[logging.LogRecord],
) -> None:
    holder = [weather()]
    pid = await connected(holder[0])
    said_unclosed(dropped(holder))
    assert await gone(pid)
    assert await tasks_end("weather")  # the client's task on this loop
    assert loop_errors == []


def test_dropped_after_asyncio_run_ended_warns_and_leaves_no_server(
    loop_errors: list[logging.LogRecord],
) -> None:
    async def open_() -> tuple[list[Any], int]:
        client = weather()
        return [client], await connected(client)

    holder, pid = asyncio.run(open_())
    said_unclosed(dropped(holder))
    assert gone_sync(pid)
    assert loop_errors == []


@pytest.mark.parametrize("args", [[WEATHER, "stdio"], ["-c", DEAF]], ids=["plain", "deaf"])
def test_dropped_while_its_loop_is_stopped_stops_the_server(
    args: list[str], loop_errors: list[logging.LogRecord], monkeypatch: pytest.MonkeyPatch,
) -> None:
    if args[0] == "-c":  # it ignores SIGTERM for good: the grace before SIGKILL waits for nothing
        monkeypatch.setattr("jianmu.mcp._dropped._TERM_SECONDS", 0.05)
    # run_sync()'s loop between two runs: stopped, not closed; nothing runs on it now
    loop = asyncio.new_event_loop()
    try:
        holder = [weather(args=args)]
        pid = loop.run_until_complete(connected(holder[0]))
        said_unclosed(dropped(holder))
        assert gone_sync(pid)  # a server deaf to SIGTERM is killed
    finally:  # as asyncio.run ends a loop: what is left on it is cancelled, then closed
        left = asyncio.all_tasks(loop)
        for task in left:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
        loop.close()
    assert loop_errors == []


def test_dropped_by_a_trio_caller_stops_its_private_loop_and_server() -> None:
    pytest.importorskip("trio")

    async def open_() -> tuple[list[Any], int]:
        client = weather()
        return [client], await connected(client)

    holder, pid = anyio.run(open_, backend="trio")
    thread = holder[0]._thread
    said_unclosed(dropped(holder))
    assert gone_sync(pid)
    thread.join(POLLS * 0.05)
    assert not thread.is_alive()


@pytest.mark.anyio
async def test_dropped_http_client_ends_its_session(
    http_server: HttpServer, loop_errors: list[logging.LogRecord],
) -> None:
    port = free_port()
    http_server([WEATHER], port)
    holder = [MCPClient(url=f"http://127.0.0.1:{port}/mcp", name="weather", timeout=30)]
    await holder[0].connect()
    said_unclosed(dropped(holder))
    assert await tasks_end("weather")  # the client's task on this loop
    assert loop_errors == []


@pytest.mark.anyio
async def test_a_closed_client_warns_nothing_when_dropped() -> None:
    holder = [weather()]
    pid = await connected(holder[0])
    await holder[0].close()
    assert not exists(pid)  # close() waited for it
    async with weather() as client:
        other = int((await client.call_tool("server_pid")).text())
    holder.append(client)
    del client
    assert dropped(holder) == []
    assert not exists(other)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("command", "args"),
    [("/nonexistent/jianmu-mcp-server", []), (sys.executable, ["-c", "pass"])],
    ids=["bad-command", "exits-at-once"],
)
async def test_a_client_whose_connect_failed_leaves_nothing_when_dropped(
    command: str, args: list[str], loop_errors: list[logging.LogRecord],
) -> None:
    before = children()
    holder = [MCPClient(command=command, args=args, name="broken", connect_timeout=30)]
    with pytest.raises(MCPError, match="could not connect"):
        await holder[0].connect()
    ref = weakref.ref(holder[0])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        holder.clear()
        for _ in range(POLLS):  # the loop's callbacks of the failure hold it a moment longer
            gc.collect()
            if ref() is None:
                break
            await asyncio.sleep(0.05)
    assert ref() is None
    assert [str(w.message) for w in caught] == []  # no session was ever open: no warning
    assert await tasks_end("broken")  # the client's task on this loop
    assert children() <= before
    assert loop_errors == []


def test_a_run_from_config_closes_the_servers_it_started(tmp_path: Path) -> None:
    # the client is the run's own (a skill names a configured server): the user never sees it
    skill = tmp_path / "pids"
    skill.mkdir()
    (skill / "SKILL.md").write_text(
        "---\nname: pids\ndescription: A test skill.\ntools: [weather__server_pid]\n---\n"
        "Tell the pid.\n"
    )
    cfg = parse_config(
        f"runtime:\n  debug_dir: {tmp_path / 'debug'}\n"
        f"mcp:\n  servers:\n    weather:\n      command: {sys.executable}\n"
        f"      args: [{WEATHER}]\n      trust: read_only\n"
    )
    llm = ScriptedLLM([
        [{"name": "weather__server_pid", "arguments": {}}],
        lambda messages: [m.content for m in messages if m.role == "tool"][-1] or "",
    ])
    node = SkillNode("Pids", ["pids"], llm, catalog=SkillCatalog([tmp_path], config=cfg))
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "pid?"}]})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = ReactiveRunner(node, state, config=cfg).run_sync(timeout=60)
        assert result.status is RunStatus.SUCCESS, result.error
        pid = int(state.get("final_answer") or "0")
        assert pid > 0 and not exists(pid)  # the run's end closed it
        gc.collect()
    assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []


@pytest.mark.parametrize("closed", [True, False], ids=["aclose", "dropped"])
def test_a_suspended_run_from_config_closes_or_stops_its_server(
    tmp_path: Path, closed: bool, loop_errors: list[logging.LogRecord],
) -> None:
    # a runner built per request: its run suspends (the tool asks first), keeping the server
    # for the next turn; aclose() closes it, and dropping the runner stops it (with a warning)
    skill = tmp_path / "pids"
    skill.mkdir()
    (skill / "SKILL.md").write_text(
        "---\nname: pids\ndescription: A test skill.\ntools: [weather__server_pid]\n---\n"
        "Tell the pid.\n"
    )
    cfg = parse_config(
        f"runtime:\n  debug_dir: {tmp_path / 'debug'}\n"
        f"mcp:\n  servers:\n    weather:\n      command: {sys.executable}\n"
        f"      args: [{WEATHER}]\n"
    )
    llm = ScriptedLLM([[{"id": "p1", "name": "weather__server_pid", "arguments": {}}]])
    node = SkillNode("Pids", ["pids"], llm, catalog=SkillCatalog([tmp_path], config=cfg))
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "pid?"}]})
    before = children()
    holder = [ReactiveRunner(node, state, config=cfg)]
    assert holder[0].run_sync(timeout=60).status is RunStatus.SUSPENDED
    [pid] = children() - before
    if closed:
        asyncio.run(holder[0].aclose())
        assert not exists(pid)
        assert dropped(holder) == []
    else:
        del node, llm, state  # the state knows its runner
        said_unclosed(dropped(holder))
        assert gone_sync(pid)
    assert loop_errors == []
