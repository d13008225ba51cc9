"""The peer of `bench_durable`: pydantic-ai's `DBOSAgent` doing the ``react`` run, own process.

DBOS is one per process, so `bench_durable` runs this as
``python -m benchmarks._dbos_peer URL RUNS MODEL_MS TOOL_MS`` and reads one JSON line from its
stdout: the median plain (`Agent.run`) and durable (`DBOSAgent.run`) seconds per run, or
``{"skip": reason}`` when pydantic-ai's DBOS integration cannot be imported.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
import warnings
from importlib import metadata
from typing import Any


async def measure(url: str, runs: int, model_ms: float, tool_ms: float) -> dict[str, Any]:
    """Median seconds per run of the plain agent and of the DBOS agent on ``url``."""
    from dbos import DBOS
    from pydantic_ai import Agent
    from pydantic_ai.durable_exec.dbos import DBOSAgent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    async def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        await asyncio.sleep(model_ms / 1000)
        if not any(isinstance(m, ModelResponse) for m in messages):
            return ModelResponse(parts=[
                ToolCallPart("lookup", {"key": f"k{i}"}, tool_call_id=f"call_{i}")
                for i in (1, 2, 3)])
        return ModelResponse(parts=[TextPart("done")])

    agent = Agent(FunctionModel(model), name="bench_peer")

    @agent.tool_plain
    async def lookup(key: str) -> str:
        """Look a key up."""
        await asyncio.sleep(tool_ms / 1000)
        return f"value of {key}"

    # one tool call at a time, as the Jianmu tree runs them
    with warnings.catch_warnings():  # deprecated for the DBOSDurability capability in 2.x
        warnings.simplefilter("ignore")
        durable = DBOSAgent(agent, parallel_execution_mode="sequential")
    DBOS(config={"name": "bench_peer", "system_database_url": url, "log_level": "WARNING"})
    DBOS.launch()
    try:
        async def timed(run: Any) -> float:
            start = time.perf_counter()
            result = await run("look up")
            assert result.output == "done", result.output
            return time.perf_counter() - start

        await timed(agent.run)
        await timed(durable.run)  # warm-up: first connections, first workflow
        plain = [await timed(agent.run) for _ in range(runs)]
        done = [await timed(durable.run) for _ in range(runs)]
    finally:
        DBOS.destroy(workflow_completion_timeout_sec=0)
    return {"plain": statistics.median(plain), "durable": statistics.median(done),
            "version": metadata.version("pydantic-ai-slim")}


def main() -> None:
    """Print the peer's figures (or why it cannot run) as one JSON line."""
    url, runs, model_ms, tool_ms = sys.argv[1], int(sys.argv[2]), *map(float, sys.argv[3:5])
    try:
        import pydantic_ai.durable_exec.dbos  # noqa: F401
    except ImportError as exc:
        print(json.dumps({"skip": f"pydantic-ai's DBOS integration is not installed: {exc}"}))
        return
    print(json.dumps(asyncio.run(measure(url, runs, model_ms, tool_ms))), flush=True)


if __name__ == "__main__":
    main()
