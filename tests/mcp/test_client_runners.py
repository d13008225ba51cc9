"""`ClientRunners`: which runner each MCP request's tool call runs on, and when runners close."""

from __future__ import annotations

from typing import Any

import pytest

import jianmu.mcp._client_runners as client_runners
from jianmu.mcp._client_runners import ClientRunners

pytestmark = pytest.mark.anyio


class FakeRunner:
    def __init__(self, name: str) -> None:
        self.name, self.closed = name, 0

    async def close(self) -> None:
        self.closed += 1


class Request:
    def __init__(self, session: str | None) -> None:
        self.headers = {} if session is None else {"mcp-session-id": session}


def _runners() -> tuple[ClientRunners, FakeRunner, list[FakeRunner]]:
    shared, made = FakeRunner("shared"), []

    def make() -> Any:
        made.append(FakeRunner(f"client{len(made)}"))
        return made[-1]

    return ClientRunners(shared, make), shared, made  # type: ignore[arg-type]


async def test_stdio_uses_the_shared_runner_and_each_http_session_its_own() -> None:
    runners, shared, made = _runners()
    async with runners.runner_for(None) as got:
        assert got is shared
    for session in ("s1", "s2", "s1"):
        async with runners.runner_for(Request(session)) as got:
            assert got.name == {"s1": "client0", "s2": "client1"}[session]  # type: ignore[attr-defined]
    async with runners.runner_for(Request(None)) as got:  # no session: this call's own
        assert got is made[2]
    assert made[2].closed == 1 and made[0].closed == 0
    await runners.close()
    assert [r.closed for r in (shared, *made)] == [1, 1, 1, 1]


async def test_a_runner_passed_in_serves_every_client() -> None:
    shared = FakeRunner("given")
    runners = ClientRunners(shared, None)  # type: ignore[arg-type]
    async with runners.runner_for(Request("s1")) as got:
        assert got is shared


async def test_idle_clients_close_and_the_busy_are_never_evicted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(client_runners, "MAX_CLIENTS", 2)
    runners, _shared, made = _runners()
    async with runners.runner_for(Request("busy")):
        async with runners.runner_for(Request("idle")):
            pass
        async with runners.runner_for(Request("new")) as got:  # room: the idle one goes
            assert got is made[2] and made[1].closed == 1 and made[0].closed == 0
            async with runners.runner_for(Request("more")) as extra:  # all busy: its own
                assert extra is made[3]
            assert made[3].closed == 1
    monkeypatch.setattr(client_runners, "IDLE_S", -1.0)
    async with runners.runner_for(Request("later")):
        assert made[0].closed == 1 and made[2].closed == 1  # idle past IDLE_S: closed
