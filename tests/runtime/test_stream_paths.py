"""The cheap paths of a streamed run: a provider without a stream of its own has its whole reply
cut into deltas without a generator in between (the same events as its replayed stream), and
events made without the dataclass constructor are still the frozen `Event`s it makes."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import py_trees
import pytest

from jianmu import ReactiveRunner, StateManager
from jianmu.llm import BaseLLMProvider, ChatRequest, LLMResponse, Message, replays_stream
from jianmu.llm.provider import StreamDone, TextDelta
from jianmu.nodes import AgentState, create_react_node
from jianmu.runtime.events import Event, EventBus, NodeEvents

pytestmark = pytest.mark.anyio

ANSWER = "Oslo is sunny today."


def start() -> StateManager:
    return StateManager(AgentState, {"messages": [{"role": "user", "content": "Oslo?"}]})


class Sends(BaseLLMProvider):
    """A provider that only sends: its stream is the base one, the reply replayed."""

    model = "sends"

    def __init__(self) -> None:
        self.sent = 0

    async def send(self, request: ChatRequest) -> LLMResponse:
        self.sent += 1
        return LLMResponse(message=Message.assistant(ANSWER))

    def text_pieces(self, text: str) -> list[str]:
        return [text[:5], text[5:]]


class Completes(BaseLLMProvider):
    """A provider that overrides `complete` rather than `send`."""

    model = "completes"

    async def complete(self, messages: Any, **kwargs: Any) -> LLMResponse:
        return LLMResponse(message=Message.assistant(ANSWER))

    def text_pieces(self, text: str) -> list[str]:
        return [word + " " for word in text.split(" ")[:-1]] + text.split(" ")[-1:]


class Streams(Sends):
    async def send_stream(self, request: ChatRequest) -> Any:
        yield TextDelta(text="own ")
        yield TextDelta(text="stream")
        yield StreamDone(response=LLMResponse(message=Message.assistant("own stream")))


def test_replays_stream_tells_a_base_stream_from_an_own_one() -> None:
    assert replays_stream(Sends()) and replays_stream(Completes())
    assert not replays_stream(Streams())
    patched = Sends()
    patched.send_stream = Streams().send_stream  # type: ignore[method-assign]
    assert not replays_stream(patched)


async def _streamed(llm: BaseLLMProvider) -> tuple[list[Event], Any]:
    runner = ReactiveRunner(create_react_node(llm, []), start())
    events = [e async for e in runner.stream(timeout=30)]
    return events, runner.state.get("final_answer")


@pytest.mark.parametrize("llm", [Sends(), Completes()], ids=["send", "complete"])
async def test_a_replayed_reply_streams_the_pieces_its_stream_would_yield(
    llm: BaseLLMProvider,
) -> None:
    request = ChatRequest(messages=(Message.user("Oslo?"),))
    replayed = [e.text async for e in llm.send_stream(request) if isinstance(e, TextDelta)]
    events, answer = await _streamed(llm)
    names = [e.name for e in events]
    deltas = [e for e in events if e.name == "llm.call.delta"]
    assert [d.fields["text"] for d in deltas] == replayed and len(replayed) > 1
    assert "".join(replayed) == answer == ANSWER
    started, completed = names.index("llm.call.started"), names.index("llm.call.completed")
    assert all(started < events.index(d) < completed for d in deltas)
    assert all(d.node == "ReAct/ReAct.round/ReAct.llm" for d in deltas)
    assert names.count("run.finished") == 1 and names[-1] == "run.finished"


async def test_a_reply_is_asked_once_when_streamed() -> None:
    llm = Sends()
    await _streamed(llm)
    assert llm.sent == 1


async def test_a_provider_with_its_own_stream_is_still_streamed_through_it() -> None:
    events, answer = await _streamed(Streams())
    assert [e.fields["text"] for e in events if e.name == "llm.call.delta"] == ["own ", "stream"]
    assert answer == "own stream"


def test_made_events_are_the_frozen_events_the_constructor_makes() -> None:
    bus = EventBus("run-1")
    bus.subscribe("*", lambda _: None)
    made = NodeEvents(bus, "a/b").emit("tool.call.started", tool="t")
    assert type(made) is Event
    assert made == Event(name="tool.call.started", run_id="run-1", node="a/b",
                         timestamp=made.timestamp, fields={"tool": "t"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.name = "other"  # type: ignore[misc]
    assert not hasattr(made, "__dict__")
    assert dataclasses.replace(made, node=None).node is None


def test_node_events_reach_a_bus_that_emits_its_own_way() -> None:
    seen: list[Event] = []

    class Renaming(EventBus):
        def emit(self, name: str, *, node: str | None = None, **fields: Any) -> Event | None:
            return super().emit("renamed." + name, node=node, **fields)

    bus = Renaming("run-1")
    bus.subscribe("*", seen.append)
    NodeEvents(bus, "a/b").emit("x", value=1)
    plain = EventBus("run-2")
    plain.subscribe("x", seen.append)
    assert NodeEvents(plain, "c").emit("x", value=2) is seen[-1]
    assert [(e.name, e.node, e.fields) for e in seen] == [
        ("renamed.x", "a/b", {"value": 1}), ("x", "c", {"value": 2})]


def test_emit_each_makes_the_events_that_as_many_emits_make() -> None:
    """One event per value, each handed over before the next is made; a handler that leaves
    midway gets no more, as with `emit`; a bus with an emit of its own gets each through it."""
    bus = EventBus("run-1")
    seen: list[Event] = []
    later: list[Event] = []
    leave = bus.subscribe("llm.*", lambda e: (seen.append(e), len(seen) == 2 and leave()))
    bus.subscribe("*", later.append)
    NodeEvents(bus, "a/b").emit_each("llm.call.delta", "text", iter(["x", "y", "z"]))
    assert [(e.name, e.node, e.fields) for e in later] == [
        ("llm.call.delta", "a/b", {"text": t}) for t in "xyz"]
    assert seen == later[:2]
    assert all(type(e) is Event for e in later)

    class Renaming(EventBus):
        def emit(self, name: str, *, node: str | None = None, **fields: Any) -> Event | None:
            return super().emit("renamed." + name, node=node, **fields)

    renaming = Renaming("run-2")
    renaming.subscribe("*", later.append)
    NodeEvents(renaming, "c").emit_each("d", "text", ["1", "2"])
    assert [(e.name, e.node, e.fields) for e in later[3:]] == [
        ("renamed.d", "c", {"text": "1"}), ("renamed.d", "c", {"text": "2"})]
    NodeEvents(EventBus("run-3"), "e").emit_each("d", "text", ["1"])  # nobody listens: nothing


async def test_the_runs_first_events_are_read_before_the_loop_turns() -> None:
    """The run's first step is taken as the stream starts (as its task): its first tick's
    event is read before anything the loop had waiting runs."""
    turned: list[bool] = []
    asyncio.get_running_loop().call_soon(turned.append, True)
    stream = ReactiveRunner(create_react_node(Sends(), []), start()).stream()
    try:
        first = await stream.__anext__()
        assert (first.name, turned) == ("run.ticked", [])
        assert [e.name async for e in stream][-1] == "run.finished"
    finally:
        await stream.aclose()


async def test_a_run_that_raises_in_its_first_step_raises_from_the_stream() -> None:
    class Broken(py_trees.behaviour.Behaviour):
        def setup(self, **kwargs: Any) -> None:
            raise RuntimeError("no setup")

        def update(self) -> py_trees.common.Status:
            return py_trees.common.Status.SUCCESS

    runner = ReactiveRunner(Broken("broken"))
    with pytest.raises(RuntimeError, match="no setup"):
        async for _ in runner.stream():
            pass
    assert not runner._running  # the runner may run again
