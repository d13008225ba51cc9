"""Red team, MCP over HTTP: a server whose answer has no end.

A stdio server's line is read to 64 MiB at most (`WholeLines`); an HTTP server's answer was
read whole, however long: a server answering ``tools/call`` with JSON whitespace without end
filled the client's memory at the network's speed (1 GB in 3 s on a laptop), and the SDK went
on reading after the call had timed out. A compressed answer could do the same from a few
kilobytes, decoded before anything saw it. Now an answer is read to
`MAX_ANSWER_BYTES` at most, and the client asks for it uncompressed (``Accept-Encoding:
identity``) and refuses one compressed all the same: the call fails at once, saying why, and
the connection is closed. The same bound holds for an answer sent as an event stream, which
the SDK read for as long as the server sent notifications before it (each within its bound of
an event), and such a stream of a call that timed out is closed then, not read on until the
client closes.

The server is tests/security/servers/answers_http_server.py; the bound is made 1 MiB here, so
that a test reads little.
"""

from __future__ import annotations

import anyio
import pytest

from jianmu.errors import MCPError
from tests.security.servers.answers_http_server import PADDING, answering

pytest.importorskip("mcp", reason="the mcp extra is not installed")
pytestmark = pytest.mark.anyio
BOUND = 1 << 20


@pytest.fixture(autouse=True)
def small_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    from jianmu.mcp import _transport

    # raising=False: the same test run against code without the bound shows the attack
    monkeypatch.setattr(_transport, "MAX_ANSWER_BYTES", BOUND, raising=False)


async def call(mode: str) -> tuple[str, list[str | None], bool]:
    """Call ``flood`` on a server answering as ``mode`` says: the result's text (or the
    error), the Accept-Encoding each call sent, and whether the server saw us hang up."""
    from jianmu.mcp import MCPClient

    with answering(mode) as server:
        host, port = server.server_address[:2]
        client = MCPClient(url=f"http://{host!s}:{port}/mcp", timeout=60)
        try:
            try:
                text = (await client.call_tool("flood", {})).text()
            except MCPError as exc:
                text = f"refused: {exc}"
            if mode in ("endless", "events"):  # bounded: whatever the outcome, the server is told
                await anyio.to_thread.run_sync(server.hung_up.wait, 30)
        finally:
            await client.close()
        return text, list(server.encodings), server.hung_up.is_set()


async def test_an_answer_past_the_bound_fails_the_call_naming_the_bound() -> None:
    assert PADDING > BOUND
    text, _, _ = await call("padded")
    assert text.startswith("refused") and f"longer than {BOUND:,} bytes" in text, text


async def test_an_endless_answer_is_not_read_on() -> None:
    text, _, hung_up = await call("endless")
    assert hung_up and f"longer than {BOUND:,} bytes" in text, text


async def test_a_compressed_answer_is_refused_and_none_is_asked_for() -> None:
    text, encodings, _ = await call("gzip")
    assert encodings == ["identity"]
    assert text.startswith("refused") and "compressed (gzip)" in text, text


async def test_an_answer_within_the_bound_still_arrives() -> None:
    text, encodings, _ = await call("plain")
    assert text == "answered" and encodings == ["identity"]


async def test_an_endless_event_stream_fails_the_call_at_the_bound() -> None:
    text, _, hung_up = await call("events")
    assert hung_up and f"longer than {BOUND:,} bytes" in text, text


async def test_the_event_stream_of_a_call_that_timed_out_is_closed() -> None:
    from jianmu.errors import ToolTimeoutError
    from jianmu.mcp import MCPClient

    with answering("trickle") as server:
        host, port = server.server_address[:2]
        client = MCPClient(url=f"http://{host!s}:{port}/mcp", timeout=60)
        try:
            with pytest.raises(ToolTimeoutError):  # a trickle never reaches the bound
                await client.call_tool("flood", {}, timeout=0.5)
            # while the client stays open: nothing reads the given-up answer any more
            await anyio.to_thread.run_sync(server.hung_up.wait, 30)
            assert server.hung_up.is_set()
        finally:
            await client.close()
