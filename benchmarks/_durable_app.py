"""The durable app that `bench_durable` measures; ``python -m benchmarks._durable_app`` is a worker.

Trees: ``react`` (one model turn asking for three tool calls, run one by one, then an answer;
the model and the tools take ``model_ms`` / ``tool_ms`` of simulated latency) and ``park``
(one call of a tool with permission ``user_confirm``: the run waits for a person).

A worker reads its settings from the environment: ``BENCH_DB`` (database URL), ``BENCH_POLL``
(``durable.poll_interval_s``), ``BENCH_CONCURRENCY`` (``durable.worker_concurrency``).
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from typing import Any

from jianmu.config import AppConfig
from jianmu.durable import DurableEngine
from jianmu.llm.messages import Message
from jianmu.llm.provider import ChatRequest, LLMResponse
from jianmu.llm.scripted import ScriptedLLM
from jianmu.nodes import AgentState, ToolExecutorConfig, create_react_node
from jianmu.state import StateManager
from jianmu.tools import tool

APP = "bench"
CALLS = 3
STEPS = 2 + CALLS
"""Durable steps of one ``react`` run: two model turns and three tool calls."""


class SlowLLM(ScriptedLLM):
    """A scripted model that takes ``latency`` seconds per reply, as a remote model would."""

    def __init__(self, responses: list[Any], latency: float) -> None:
        super().__init__(responses)
        self.latency = latency

    async def send(self, request: ChatRequest) -> LLMResponse:
        if self.latency:
            await asyncio.sleep(self.latency)
        return await super().send(request)


def react_turn(messages: list[Message]) -> Any:
    """Three tool calls first, then an answer: chosen from the conversation (replay-safe)."""
    if not any(m.role == "assistant" for m in messages):
        return [{"id": f"call_{i}", "name": "lookup", "arguments": {"key": f"k{i}"}}
                for i in range(1, CALLS + 1)]
    return f"done: {messages[-1].content}"


def build_react(inputs: dict[str, Any]) -> tuple[Any, StateManager]:
    """The ``react`` tree: a ReAct node, one model turn with three serial tool calls."""
    tool_s = float(inputs.get("tool_ms", 0)) / 1000

    @tool
    async def lookup(key: str) -> str:
        """Look a key up."""
        if tool_s:
            await asyncio.sleep(tool_s)
        return f"value of {key}"

    llm = SlowLLM([react_turn] * 4, float(inputs.get("model_ms", 0)) / 1000)
    node = create_react_node(llm, [lookup],
                             executor_config=ToolExecutorConfig(execution_mode="serial"))
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "look up"}]})
    return node, state


def build_park(inputs: dict[str, Any]) -> tuple[Any, StateManager]:
    """The ``park`` tree: a tool that asks a person first, so the run waits."""

    @tool(permission="user_confirm")
    def deploy(target: str) -> str:
        """Deploy to a target (asks first)."""
        return f"deployed {target}"

    def turn(messages: list[Message]) -> Any:
        if not any(m.role == "assistant" for m in messages):
            return [{"id": "deploy_1", "name": "deploy", "arguments": {"target": "prod"}}]
        return "finished"

    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "deploy"}]})
    return create_react_node(ScriptedLLM([turn] * 4), [deploy]), state


def make_engine(url: str, *, poll: float | None = None, concurrency: int | None = None,
                executor_id: str | None = None) -> DurableEngine:
    """The bench app's engine on ``url``; ``None`` settings keep the config's defaults."""
    durable: dict[str, Any] = {}
    if poll is not None:
        durable["poll_interval_s"] = poll
    if concurrency is not None:
        durable["worker_concurrency"] = concurrency
    config = AppConfig.model_validate({"durable": durable})
    engine = DurableEngine(url, name=APP, config=config, executor_id=executor_id)
    engine.tree("react")(build_react)
    engine.tree("park")(build_park)
    return engine


def _optional(name: str, kind: type) -> Any:
    value = os.environ.get(name)
    return kind(value) if value else None


def serve() -> None:
    """Be a worker until SIGTERM: launch, say ``ready``, wait."""
    engine = make_engine(os.environ["BENCH_DB"], poll=_optional("BENCH_POLL", float),
                         concurrency=_optional("BENCH_CONCURRENCY", int))
    engine.launch()
    print(f"ready {engine.executor_id}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    engine.shutdown()


if __name__ == "__main__":
    serve()
