"""A durable app for the tests, run by real worker processes (`worker.py`, ``jianmu worker``).

Settings come from the environment, as a deployed app's would: ``JIANMU_TEST_DB`` (the
database URL), ``JIANMU_TEST_WORKER`` (the executor id), ``JIANMU_TEST_TAKEOVER`` (seconds),
``JIANMU_TEST_AGENT`` (the "lines" agent's name: a deployment that renamed it).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path
from typing import Any

import py_trees
from pydantic import BaseModel

from jianmu.config import AppConfig
from jianmu.durable import DurableEngine
from jianmu.llm.messages import Message
from jianmu.llm.scripted import ScriptedLLM
from jianmu.nodes import AgentState, ToolExecutorConfig, agent_tool, create_react_node
from jianmu.state import StateManager
from jianmu.tools import tool

_config = AppConfig.model_validate({
    "durable": {
        "takeover_after_s": float(os.environ.get("JIANMU_TEST_TAKEOVER", "600")),
        "worker_concurrency": int(os.environ.get("JIANMU_TEST_CONCURRENCY", "16")),
        "poll_interval_s": 0.05,
        "notify_poll_s": 0.05,  # a decision from another process reaches a worker on SQLite
    },
})
engine = DurableEngine(
    os.environ.get("JIANMU_TEST_DB"),
    name="testapp",
    config=_config,
    executor_id=os.environ.get("JIANMU_TEST_WORKER") or None,
)


def _append(path: str, text: str) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(text + "\n")
        f.flush()
        os.fsync(f.fileno())


def _block_forever() -> None:
    threading.Event().wait()


class LinesInputs(BaseModel):
    """Where the lines go, and where to stop and wait to be killed."""

    path: str
    asks: str
    hang_at: int | None = None
    marker: str | None = None
    go: str | None = None
    """With ``hang_at``: the first attempt waits for this file (not forever), then returns."""
    pause_before: int | None = None
    """The first attempt stops (touching ``marker``) before this call, until ``go`` exists."""
    release: str | None = None
    """With ``pause_before``: that call, once its line is written, waits for this file."""
    hang_async: bool = False
    """The tool is a coroutine, and its hang an await (a cancel reaches it at once)."""
    effectful: bool = False
    """The tool is a write that may not run twice (not idempotent), not the default read."""


def _wait_for_file(path: str) -> None:
    while not Path(path).exists():
        time.sleep(0.05)


@engine.tree("lines", inputs=LinesInputs)
def lines(inputs: dict[str, Any]) -> tuple[Any, StateManager]:
    """One model turn asking for three side-effecting calls (run one by one), then an answer."""
    path, asks = inputs["path"], inputs["asks"]
    kind = "write" if inputs.get("effectful") else "read"

    @tool(category=kind)
    def append_line(text: str) -> str:
        """Append one line to the run's file."""
        _append(path, text)
        hang = inputs.get("hang_at") is not None and text == f"line {inputs['hang_at']}"
        if hang and not Path(inputs["marker"]).exists():  # only the first attempt hangs
            Path(inputs["marker"]).touch()  # the test kills (or pauses) this worker now
            if inputs.get("go") is None:
                _block_forever()
            _wait_for_file(inputs["go"])  # a paused worker, woken: it goes on
        if inputs.get("release") and text == f"line {inputs['pause_before']}":
            _wait_for_file(inputs["release"])  # in flight until the test says
        return "written"

    if inputs.get("hang_async"):
        @tool(name="append_line", category=kind)
        async def append_line_async(text: str) -> str:
            """Append one line to the run's file."""
            _append(path, text)
            if text == f"line {inputs['hang_at']}" and not Path(inputs["marker"]).exists():
                Path(inputs["marker"]).touch()  # the test stops this worker now
                await asyncio.Event().wait()
            return "written"

        append_line = append_line_async  # the same call, awaited

    def turn(messages: list[Message]) -> Any:
        # decided by the conversation, as a real model's answer is: a replayed turn leaves
        # no trace in this process, so a script position would go out of step on recovery
        done = len([m for m in messages if m.role == "assistant"])
        _append(asks, f"turn {done}")
        if done == 0:
            return [{"id": f"call_{i}", "name": "append_line",
                     "arguments": {"text": f"line {i}"}} for i in (1, 2, 3)]
        return "three lines written"

    llm = ScriptedLLM([turn] * 4)
    node = create_react_node(llm, [append_line],
                             executor_config=ToolExecutorConfig(execution_mode="serial"),
                             name=os.environ.get("JIANMU_TEST_AGENT", "ReAct"))
    if inputs.get("pause_before") is not None:
        _pause_before_call(node, f"call_{inputs['pause_before']}", inputs)
    return node, StateManager(AgentState)


def _pause_before_call(node: Any, call_id: str, inputs: dict[str, Any]) -> None:
    """Stop the first attempt between two steps: after the earlier calls were recorded, before
    ``call_id`` runs (until the ``go`` file exists), as a worker paused there would."""
    bind = node.bind

    def pause(event: Any) -> None:
        if event.fields.get("call_id") == call_id and not Path(inputs["marker"]).exists():
            Path(inputs["marker"]).touch()  # the test pauses (SIGSTOP) this worker now
            _wait_for_file(inputs["go"])

    def bound(state_manager: Any, ctx: Any, path: str) -> None:
        bind(state_manager, ctx, path)
        ctx.events.subscribe("tool.call.started", pause)

    node.bind = bound


@engine.tree("confirm")
def confirm(inputs: dict[str, Any]) -> tuple[Any, StateManager]:
    """A model turn calling a tool that asks a person first, then an answer."""
    path = inputs["path"]

    @tool(permission="user_confirm")
    def deploy(target: str) -> str:
        """Deploy to a target (asks first)."""
        _append(path, f"deployed {target}")
        return "deployed"

    def turn(messages: list[Message]) -> Any:
        if not any(m.role == "assistant" for m in messages):
            return [{"id": "deploy_1", "name": "deploy", "arguments": {"target": "prod"}}]
        return f"finished: {messages[-1].content}"

    llm = ScriptedLLM([turn] * 4)
    return create_react_node(llm, [deploy]), StateManager(AgentState)


@engine.tree("team")
def team(inputs: dict[str, Any]) -> tuple[Any, StateManager]:
    """Two agents in two namespaces whose models give their calls one id (``call_0``), each
    call asking a person first; ``right_id`` gives the right one's call another id."""
    import py_trees

    path = inputs["path"]
    ids = {"left": "call_0", "right": inputs.get("right_id", "call_0")}

    @tool(permission="user_confirm")
    def deploy(target: str) -> str:
        """Deploy to a target (asks first)."""
        _append(path, f"deployed {target}")
        return "deployed"

    def member(namespace: str, target: str) -> Any:
        def turn(messages: list[Message]) -> Any:
            if not any(m.role == "assistant" for m in messages):
                return [{"id": ids[namespace], "name": "deploy", "arguments": {"target": target}}]
            return f"{namespace}: {messages[-1].content}"

        node = create_react_node(ScriptedLLM([turn] * 4), [deploy], name=namespace)
        for part in node.iterate():
            part.namespace = namespace  # type: ignore[attr-defined]
        return node

    root = py_trees.composites.Parallel(
        "team", policy=py_trees.common.ParallelPolicy.SuccessOnAll(),
        children=[member("left", "eu"), member("right", "us")],
    )
    state = StateManager(AgentState)
    for namespace in ("left", "right"):
        state.scope(namespace).update({"messages": [Message.user("deploy")]})
    return root, state


@engine.tree("ask")
def ask(inputs: dict[str, Any]) -> tuple[Any, StateManager]:
    """A model turn asking the user a question (``ask_user``), then an answer with the reply."""
    from jianmu.tools import ToolSet

    def turn(messages: list[Message]) -> Any:
        if not any(m.role == "assistant" for m in messages):
            return [{"id": "q1", "name": "ask_user", "arguments": {"question": "Which city?"}}]
        return f"going to {messages[-1].content}"

    llm = ScriptedLLM([turn] * 4)
    return create_react_node(llm, ToolSet.resolve(["ask_user"])), StateManager(AgentState)


@engine.tree("agents")
def agents(inputs: dict[str, Any]) -> tuple[Any, StateManager]:
    """A lead that asks a helper agent, whose deploy asks a person first, then answers."""
    path = inputs["path"]

    @tool(permission="user_confirm")
    def deploy(target: str) -> str:
        """Deploy to a target (asks first)."""
        _append(path, f"deployed {target}")
        return "deployed"

    def helper_turn(messages: list[Message]) -> Any:
        if not any(m.role == "assistant" for m in messages):
            return [{"id": "deploy_1", "name": "deploy", "arguments": {"target": "prod"}}]
        return f"helper: {messages[-1].content}"

    def helper() -> Any:
        return create_react_node(ScriptedLLM([helper_turn] * 4), [deploy], name="helper")

    def turn(messages: list[Message]) -> Any:
        if not any(m.role == "assistant" for m in messages):
            return [{"id": "ask_1", "name": "helper", "arguments": {"input": "deploy"}}]
        return f"finished: {messages[-1].content}"

    lead = create_react_node(ScriptedLLM([turn] * 4), [
        agent_tool(helper, name="helper", description="Deploys."), deploy])
    return lead, StateManager(AgentState)


@engine.tree("quick")
def quick(inputs: dict[str, Any]) -> tuple[Any, StateManager]:
    """One tool call that records which worker ran which run, then an answer."""
    path = inputs["path"]
    worker = engine.executor_id

    @tool
    def record(run: str) -> str:
        """Record that this worker ran this run."""
        _append(path, f"{run} {worker}")
        if inputs.get("slow"):
            time.sleep(float(inputs["slow"]))
        return "recorded"

    def turn(messages: list[Message]) -> Any:
        if not any(m.role == "assistant" for m in messages):
            return [{"id": "record_1", "name": "record", "arguments": {"run": inputs["run"]}}]
        return "ok"

    llm = ScriptedLLM([turn] * 4)
    return create_react_node(llm, [record]), StateManager(AgentState)


@engine.tree("parallel", inputs=LinesInputs)
def parallel(inputs: dict[str, Any]) -> tuple[Any, StateManager]:
    """One model turn asking for three parallel-safe calls (run at once by default), then an
    answer. The call at ``hang_at`` hangs on its first attempt while the others finish."""
    path, asks = inputs["path"], inputs["asks"]

    @tool(parallel_safe=True)
    def append_line(text: str) -> str:
        """Append one line to the run's file."""
        hang = inputs.get("hang_at") is not None and text == f"line {inputs['hang_at']}"
        if hang and not Path(inputs["marker"]).exists():  # only the first attempt hangs
            _append(path, text)
            Path(inputs["marker"]).touch()  # the test kills this worker once the others end
            _block_forever()
        _append(path, text)
        return "written"

    def turn(messages: list[Message]) -> Any:
        done = len([m for m in messages if m.role == "assistant"])
        _append(asks, f"turn {done}")
        if done == 0:
            return [{"id": f"call_{i}", "name": "append_line",
                     "arguments": {"text": f"line {i}"}} for i in (1, 2, 3)]
        return "three lines written"

    llm = ScriptedLLM([turn] * 4)
    return create_react_node(llm, [append_line]), StateManager(AgentState)


@engine.tree("broken")
def broken(inputs: dict[str, Any]) -> tuple[Any, StateManager]:
    """A tree whose factory fails in the worker (a missing setting, a bad file)."""
    why = inputs.get("why", "no reason")
    if why == "its database":  # an app's error that quotes its settings
        why = f"cannot reach {engine.database_url}"
    raise RuntimeError(f"cannot build this tree: {why}")


@engine.tree("plain_def")
def plain_def(inputs: dict[str, Any]) -> tuple[Any, StateManager]:
    """A node whose ``update_async`` is written as a plain ``def`` (a py_trees ``update``)."""
    from py_trees.common import Status

    from jianmu.runtime import AsyncNode

    class Plain(AsyncNode):
        def update_async(self) -> Status:  # type: ignore[override]
            return Status.SUCCESS

    return Plain("plain"), StateManager()


SECRET = "API_KEY=sk-live-durable-4242"


@engine.tree("withheld")
def withheld(inputs: dict[str, Any]) -> tuple[Any, StateManager]:
    """One call whose result a tool-output guardrail withholds (it holds a key), then an
    answer."""
    from jianmu.guard.guardrails import Tripwire

    @tool
    def read_env() -> str:
        """Read the environment."""
        return SECRET

    def no_keys(ctx: Any, result: Any) -> Tripwire | None:
        return Tripwire("holds a key") if "sk-live" in result.text else None

    def turn(messages: list[Message]) -> Any:
        if not any(m.role == "assistant" for m in messages):
            return [{"id": "env_1", "name": "read_env", "arguments": {}}]
        return f"told: {messages[-1].content}"

    llm = ScriptedLLM([turn] * 4)
    tree = create_react_node(llm, [read_env], tool_output_guardrails=[no_keys])
    return tree, StateManager(AgentState)


@engine.tree("cut_off", inputs=LinesInputs)
def cut_off(inputs: dict[str, Any]) -> tuple[Any, StateManager]:
    """An answer the token limit cuts off, then its continuation; the first attempt's
    continuation hangs (the test kills the worker there)."""
    from jianmu.llm.provider import LLMResponse
    from jianmu.nodes.cut_off import CONTINUE_NOTE

    asks = inputs["asks"]

    def turn(messages: list[Message]) -> Any:
        if messages[-1].content != CONTINUE_NOTE:
            _append(asks, "answer")
            return LLMResponse(message=Message.assistant("It is sunny in"),
                               finish_reason="length")
        _append(asks, "continue")
        if not Path(inputs["marker"]).exists():  # only the first attempt hangs
            Path(inputs["marker"]).touch()  # the test kills this worker now
            _block_forever()
        return " Oslo."

    return create_react_node(ScriptedLLM([turn] * 4), []), StateManager(AgentState)


LEAK = "sk-live-refused-73194"
"""A key that models leak in their answers: guardrails refuse it, no record may hold it."""


def _no_keys(ctx: Any, value: Any) -> Any:
    from jianmu.guard.guardrails import Tripwire

    text = getattr(value, "text", value)  # a tool result, or an answer
    return Tripwire("holds a key") if "sk-live" in str(text) else None


class _HangOnce(py_trees.behaviour.Behaviour):
    """Hangs on the first attempt (the test kills the worker there), then fails."""

    def __init__(self, marker: str) -> None:
        super().__init__("hang_once")
        self.marker = marker

    def update(self) -> py_trees.common.Status:
        if not Path(self.marker).exists():
            Path(self.marker).touch()
            _block_forever()
        return py_trees.common.Status.FAILURE


@engine.tree("refused", inputs=LinesInputs)
def refused(inputs: dict[str, Any]) -> tuple[Any, StateManager]:
    """An answer that leaks a key, which an output guardrail refuses; with ``marker`` set, a
    node after the refusal hangs on the first attempt."""
    asks = inputs["asks"]

    def turn(messages: list[Message]) -> Any:
        _append(asks, "answer")
        return f"the key is {LEAK}"

    node = create_react_node(ScriptedLLM([turn] * 4), [], output_guardrails=[_no_keys])
    if inputs.get("marker") is None:
        return node, StateManager(AgentState)
    tree = py_trees.composites.Selector("then", memory=True,
                                        children=[node, _HangOnce(inputs["marker"])])
    return tree, StateManager(AgentState)


@engine.tree("withheld_agent", inputs=LinesInputs)
def withheld_agent(inputs: dict[str, Any]) -> tuple[Any, StateManager]:
    """A lead asks a helper agent, whose answer leaks a key: the lead's tool-output guardrail
    withholds it. With ``marker`` set, the lead's next turn hangs on the first attempt."""
    asks = inputs["asks"]

    def helper_turn(messages: list[Message]) -> Any:
        _append(asks, "helper")
        return f"the key is {LEAK}"

    def helper() -> Any:
        return create_react_node(ScriptedLLM([helper_turn] * 4), [], name="helper")

    def turn(messages: list[Message]) -> Any:
        if not any(m.role == "assistant" for m in messages):
            _append(asks, "lead asks")
            return [{"id": "ask_1", "name": "helper", "arguments": {"input": "the key?"}}]
        _append(asks, "lead answers")
        if inputs.get("marker") is not None and not Path(inputs["marker"]).exists():
            Path(inputs["marker"]).touch()  # the test kills this worker now
            _block_forever()
        return f"told: {messages[-1].content}"

    lead = create_react_node(ScriptedLLM([turn] * 4), [
        agent_tool(helper, name="helper", description="Knows keys.")],
        tool_output_guardrails=[_no_keys])
    return lead, StateManager(AgentState)
