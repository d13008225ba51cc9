"""An MCP tool call through Jianmu's ``ToolSet.execute`` vs the ``mcp`` SDK's own
``ClientSession.call_tool``, against the same kind of stdio server, in the same run.

The target row calls one server process (``benchmarks/_mcp_echo_server.py``, the SDK's
``MCPServer``) both ways: through ``ToolSet.execute``, and with ``ClientSession.call_tool`` on
the session Jianmu holds. A second row gives each side a server process of its own. The two
sides' calls alternate one by one, so a load spike hits both alike; the figure is the median
time of one call.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path

import anyio

from benchmarks._util import table, verdict

__all__ = ("main",)

SERVER = str(Path(__file__).with_name("_mcp_echo_server.py"))
CALLS = 50
ROUNDS = 15
TARGET = 1.1


async def _alternating(
    first: Callable[[], Awaitable[object]], second: Callable[[], Awaitable[object]]
) -> tuple[float, float]:
    """Median seconds of one call of each over ``CALLS`` pairs, the two calls alternating."""
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(CALLS):
        for call, into in ((first, times[0]), (second, times[1])):
            start = time.perf_counter()
            await call()
            into.append(time.perf_counter() - start)
    return statistics.median(times[0]), statistics.median(times[1])


async def run() -> None:
    try:
        from mcp import ClientSession
        from mcp.client.stdio import StdioServerParameters, stdio_client
    except ImportError:
        print("mcp is not installed (pip install 'jianmu[mcp]')")
        return
    from jianmu.mcp import MCPToolProvider
    from jianmu.tools.registry import ToolSet

    async with AsyncExitStack() as stack:
        params = StdioServerParameters(command=sys.executable, args=[SERVER])
        read, write = await stack.enter_async_context(stdio_client(params))
        session = await stack.enter_async_context(ClientSession(read, write))
        await session.initialize()
        provider = MCPToolProvider("bench", command=sys.executable, args=[SERVER])
        stack.push_async_callback(provider.close)
        toolset = await ToolSet.from_providers([provider])

        async def sdk() -> object:
            result = await session.call_tool("echo", {"text": "hi"})
            assert not result.is_error
            return result

        async def ours() -> object:
            result = await toolset.execute("bench__echo", {"text": "hi"})
            assert result.ok, result
            return result

        tool = toolset.get("bench__echo")
        await ours()  # connected now
        # the SDK's own call on the very session Jianmu holds: one server process, one pipe,
        # so only the path differs (separate processes add their own scheduling noise)
        shared = getattr(tool, "client")._session  # noqa: B009

        async def sdk_shared() -> object:
            result = await shared.call_tool("echo", {"text": "hi"})
            assert not result.is_error
            return result

        for call in (sdk, ours, sdk_shared):  # warm up both processes and paths
            for _ in range(20):
                await call()
        rows: list[tuple[str, ...]] = []
        for label, peer, target in (("echo over stdio, same server process", sdk_shared, True),
                                    ("echo over stdio, a server each", sdk, False)):
            sdk_times, our_times = [], []
            for n in range(ROUNDS):
                # calls alternate one by one, and which side goes first alternates by round
                pair = (peer, ours) if n % 2 == 0 else (ours, peer)
                a, b = await _alternating(*pair)
                sdk_times.append(a if n % 2 == 0 else b)
                our_times.append(b if n % 2 == 0 else a)
            base, mine = statistics.median(sdk_times), statistics.median(our_times)
            rows.append((label, f"{mine * 1e6:.0f} µs", f"{base * 1e6:.0f} µs",
                         f"{mine / base:.2f}x", f"<= {TARGET}x" if target else "(printed)",
                         verdict(mine / base <= TARGET) if target else ""))
    table(rows, ("MCP tool call", "jianmu ToolSet.execute", "mcp ClientSession.call_tool",
                 "ratio", "target", ""))
    print(f"(median of {ROUNDS} rounds of {CALLS} calls each, the two sides' calls alternating)")


def main() -> None:
    """Print the MCP call figures."""
    anyio.run(run)


if __name__ == "__main__":
    main()
