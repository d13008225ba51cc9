"""An MCP tool call through Jianmu's ``ToolSet.execute`` vs the ``mcp`` SDK's own
``ClientSession.call_tool``, against the same kind of stdio server, in the same run.

Each side starts its own server process (``benchmarks/_mcp_echo_server.py``, the SDK's
``MCPServer``) and calls its ``echo`` tool; rounds alternate between the two so a load spike
hits both alike. The figure is the median time of one call.
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


async def _timed(call: Callable[[], Awaitable[object]]) -> float:
    """Median seconds of one call over ``CALLS`` calls."""
    times = []
    for _ in range(CALLS):
        start = time.perf_counter()
        await call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


async def run() -> None:
    try:
        from mcp import ClientSession
        from mcp.client.stdio import StdioServerParameters, stdio_client
    except ImportError:
        print("mcp is not installed (pip install 'jianmu[mcp]')")
        return
    from jianmu.mcp import MCPToolProvider
    from jianmu.tools.toolset import ToolSet

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

        for call in (sdk, ours):  # warm up both processes and paths
            for _ in range(20):
                await call()
        sdk_times, our_times = [], []
        for _ in range(ROUNDS):
            sdk_times.append(await _timed(sdk))
            our_times.append(await _timed(ours))
    base, mine = statistics.median(sdk_times), statistics.median(our_times)
    table(
        [("echo over stdio", f"{mine * 1e6:.0f} µs", f"{base * 1e6:.0f} µs",
          f"{mine / base:.2f}x", f"<= {TARGET}x", verdict(mine / base <= TARGET))],
        ("MCP tool call", "jianmu ToolSet.execute", "mcp ClientSession.call_tool", "ratio",
         "target", ""),
    )
    print(f"(median of {ROUNDS} rounds of {CALLS} calls each, the two sides interleaved)")


def main() -> None:
    """Print the MCP call figures."""
    anyio.run(run)


if __name__ == "__main__":
    main()
