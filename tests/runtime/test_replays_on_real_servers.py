"""Benchmark workloads replayed through real model servers end exactly as replayed in process.

The tau-bench-like shop (`benchmarks._shop`) and a sample of BFCL's multi-turn tasks
(``tests/fixtures/bfcl_multi_turn``) are replayed twice: with `ScriptedLLM`, and through
`OpenAIProvider` / `AnthropicProvider` against `StrictServer` (uvicorn on 127.0.0.1, keep-alive,
every request checked against the real API's rules), whole and streamed, the same replies
written as servers write them (`tests.support.wire_replies`: parallel calls interleaved by
``index``, usage only in the last chunk or never). The tool calls, their arguments, the tool
results, the answers, the final data and every request's conversation must be the same both
ways, across many turns on one kept-alive connection.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks._shop import DEFINITIONS, READ_ONLY, digest, make_functions, make_shop, make_tasks
from jianmu import ReactiveRunner, ScriptedLLM, StateManager
from jianmu.llm import AnthropicProvider, OpenAIProvider
from jianmu.llm.provider import BaseLLMProvider
from jianmu.nodes import AgentState, create_react_node
from jianmu.runtime import RunStatus, SQLiteCheckpointer
from jianmu.tools import ToolSet
from tests.nodes import test_replay_bfcl_multi_turn as bfcl
from tests.support.model_server import MODES, Drop, Raw
from tests.support.strict_api import StrictServer
from tests.support.wire_replies import (
    Step,
    anthropic_raw,
    neutral_anthropic,
    neutral_messages,
    neutral_openai,
    openai_raw,
    results_in_call_order,
    same_values,
    scripted,
)


@pytest.fixture(scope="module")
def server() -> Iterator[StrictServer]:
    with StrictServer() as running:
        yield running


@pytest.fixture(autouse=True)
def _clean(server: StrictServer) -> Iterator[None]:
    server.reset()
    yield
    assert not server.refused, [problems for _, problems in server.refused]
    assert not server.problems, server.problems


class Wire:
    """One API spoken one way (whole or streamed) through one provider, kept for the test."""

    def __init__(self, server: StrictServer, api: str, stream: bool) -> None:
        self.server, self.api, self.stream = server, api, stream
        self.provider: BaseLLMProvider
        if api == "openai":
            self.provider = OpenAIProvider("test-model", base_url=server.openai_url,
                                           max_retries=1)
        else:
            self.provider = AnthropicProvider("test-model", base_url=server.anthropic_url,
                                              max_retries=1)

    def add(self, steps: list[Step], usage: str = "last") -> None:
        raw = openai_raw if self.api == "openai" else anthropic_raw
        self.server.add(*(raw(step, usage=usage) for step in steps))

    def conversations(self) -> list[list[tuple[Any, ...]]]:
        """Each answered request's conversation (a request the server dropped unanswered is
        the next one, sent again)."""
        neutral = neutral_openai if self.api == "openai" else neutral_anthropic
        asked = self.server.requests
        return [neutral(r.body) for i, r in enumerate(asked)
                if i + 1 == len(asked) or asked[i + 1].body["messages"] != r.body["messages"]]


def transcript(state: StateManager) -> list[tuple[Any, ...]]:
    return [(m.role, m.content, [(c.id, c.name, c.arguments) for c in m.tool_calls],
             m.tool_call_id) for m in state.get("messages")]


def agree(wire: Wire, llm: ScriptedLLM,
          states: list[tuple[StateManager, StateManager]]) -> None:
    """Both replays hold the same messages, and each request the server answered carried the
    conversation the in-process model was asked."""
    for ours, theirs in states:
        assert same_values(transcript(theirs), transcript(ours))
    asked = [neutral_messages(r.messages) for r in llm.requests]
    got = wire.conversations()
    assert len(got) == len(asked)
    for k, (sent, expected) in enumerate(zip(got, asked, strict=True)):
        assert not results_in_call_order(sent), (k, results_in_call_order(sent))
        assert len(sent) == len(expected), (k, sent[len(expected):], expected[len(sent):])
        for sent_one, expected_one in zip(sent, expected, strict=True):
            assert same_values(sent_one, expected_one), (k, sent_one, expected_one)


# -- the shop --------------------------------------------------------------------------------


def shop_steps(task: list[list[tuple[str, dict[str, Any]]]], t: int) -> list[Step]:
    steps = [Step(calls=tuple((f"t{t}_{i}_{j}", name, json.dumps(args, ensure_ascii=False))
                              for j, (name, args) in enumerate(turn)))
             for i, turn in enumerate(task)]
    return [*steps, Step(text=f"Task {t} done.")]


def shop_run(llm: BaseLLMProvider, tasks: list[Any], stream: bool,
             steps_of: Callable[[int], list[Step]] | None = None,
             ) -> tuple[str, list[StateManager]]:
    data = make_shop()
    toolset = ToolSet.from_openai(DEFINITIONS, make_functions(data),
                                  metadata={n: {"read_only": True} for n in READ_ONLY})
    states = []
    for t in range(len(tasks)):
        if steps_of is not None:
            steps_of(t)
        state = StateManager(AgentState, {"messages": [{"role": "user", "content": f"task {t}"}]})
        runner = ReactiveRunner(create_react_node(llm, toolset, max_iterations=20,
                                                  stream=stream), state)
        result = runner.run_sync(timeout=60)
        assert result.ok and state.get("final_answer") == f"Task {t} done.", (t, result.error)
        states.append(state)
    return digest(data), states


SHOP_TASKS = make_tasks(make_shop())


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_the_shop_replayed_through_a_real_server(
    server: StrictServer, api: str, stream: bool,
) -> None:
    tasks = SHOP_TASKS[::5] if api == "anthropic" else SHOP_TASKS[2::5]
    steps = [shop_steps(task, t) for t, task in enumerate(tasks)]
    llm = ScriptedLLM([scripted(s) for task in steps for s in task])
    expected, ours = shop_run(llm, tasks, stream)
    wire = Wire(server, api, stream)
    if api == "openai" and stream:  # a server that refuses stream_options (older Azure)
        server.add(Raw(status=400, body={"error": {
            "message": "Unrecognized request argument supplied: stream_options",
            "type": "invalid_request_error"}}))
    got, theirs = shop_run(wire.provider, tasks, stream,
                           lambda t: wire.add(steps[t], "none" if t % 3 == 2 else "last"))
    assert got == expected
    agree(wire, llm, list(zip(ours, theirs, strict=True)))
    assert len(server.connections) == 1  # every turn of every task on one kept connection
    if api == "openai" and stream:  # asked again without it, and never again with it
        assert ["stream_options" in r.body for r in server.requests[:3]] == [True, False, False]
        assert not any("stream_options" in r.body for r in server.requests[1:])


# -- BFCL multi-turn -------------------------------------------------------------------------

BFCL_SAMPLE = bfcl.TASKS[::10]  # one task of each category


def bfcl_steps(task: dict[str, Any], way: str, bound: dict[str, Any]) -> list[list[Step]]:
    """Each user turn's replies: its ground-truth calls (one batch, or one call a reply),
    then its answer."""
    turns = []
    for turn, calls in enumerate(task["ground_truth"]):
        made = []
        for i, call in enumerate(calls):
            name, args, kwargs = bfcl.parsed(call)
            params = list(inspect.signature(bound[name]).parameters)
            arguments = {**dict(zip(params, args, strict=False)), **kwargs}
            made.append((f"t{turn}c{i}", name, json.dumps(arguments, ensure_ascii=False)))
        batches = [tuple(made)] if way == "openai_definitions" else [(c,) for c in made]
        turns.append([*(Step(calls=b) for b in batches if b), Step(text=f"Turn {turn} done.")])
    return turns


def bfcl_run(task: dict[str, Any], way: str, llm: BaseLLMProvider, stream: bool,
             each_turn: Callable[[int, dict[str, Any]], None]) -> tuple[Any, StateManager]:
    ours = bfcl.instances(task)
    bound = bfcl.methods(ours)
    names = list(bound)
    state = StateManager(AgentState, {"messages": task["question"][0]})
    agent = create_react_node(llm, bfcl.tools_for(way, task, bound, bfcl.offered(task, names, 0)),
                              max_iterations=1000, stream=stream)
    runner = ReactiveRunner(agent, state)
    for turn in range(len(task["ground_truth"])):
        each_turn(turn, bound)
        if turn:
            new = [n for n in bfcl.offered(task, names, turn)
                   if n not in bfcl.offered(task, names, turn - 1)]
            for made in bfcl.tools_for(way, task, bound, new):
                agent.executor.register_tool(made)
            (message,) = task["question"][turn] or [bfcl.MORE_FUNCTIONS]
            runner.send(message)
        result = runner.run_sync(timeout=60)
        assert result.ok and state.get("final_answer") == f"Turn {turn} done.", (
            task["id"], turn, result.error)
    return bfcl.public_state(ours), state


@pytest.mark.parametrize("way", ["methods", "openai_definitions"])
@pytest.mark.parametrize(("api", "stream"), MODES)
def test_bfcl_multi_turn_replayed_through_a_real_server(
    server: StrictServer, api: str, stream: bool, way: str,
) -> None:
    for n, task in enumerate(BFCL_SAMPLE):
        server.requests.clear()
        steps = bfcl_steps(task, way, bfcl.methods(bfcl.instances(task)))
        llm = ScriptedLLM([scripted(s) for turn in steps for s in turn])
        expected, ours = bfcl_run(task, way, llm, stream, lambda turn, bound: None)
        wire = Wire(server, api, stream)

        def each_turn(turn: int, bound: dict[str, Any], n: int = n,
                      steps: list[list[Step]] = steps, wire: Wire = wire) -> None:
            if turn == 1 and n % 2:  # the server closed the kept-alive connection meanwhile
                server.add(Drop())
            wire.add(steps[turn], "none" if (turn + n) % 3 == 0 else "last")

        got, theirs = bfcl_run(task, way, wire.provider, stream, each_turn)
        assert got == expected, task["id"]
        agree(wire, llm, [(ours, theirs)])
        assert len(server.connections) <= 2, task["id"]
        server.requests.clear()


def test_the_sample_is_multi_turn() -> None:
    assert len(BFCL_SAMPLE) >= 3
    assert all(len(t["ground_truth"]) >= 2 for t in BFCL_SAMPLE)


def test_the_shop_sample_has_parallel_calls() -> None:
    assert any(len(turn) > 1 for task in SHOP_TASKS for turn in task)


# -- arguments and results real servers send -------------------------------------------------

ECHO = {"type": "function", "function": {
    "name": "echo", "description": "Say back the arguments.",
    "parameters": {"type": "object", "properties": {}, "additionalProperties": True}}}
BIG = {"type": "function", "function": {
    "name": "big", "description": "A long text.",
    "parameters": {"type": "object", "properties": {"n": {"type": "integer"}},
                   "required": ["n"]}}}


def echo(**arguments: Any) -> str:
    return repr(arguments)


def big(n: int) -> str:
    return ("é\"\\\n😀" * n)[:n]


ODD = (
    r'{"s": "h\u00e9llo \"quoted\" \\ \ud83d\ude00 中文 \u0000", "n": 1e400, "z": -0, '
    r'"zf": -0.0, "big": 1000000000000000000000000000000, "e": {}, "f": 1.5e-320, '
    r'"nest": {"a": [1, {"b": [[], {}]}], "c": null, "t": true}, "lone": "\ud800x", '
    r'"dup": 1, "dup": 2}'
)


def odd_steps() -> list[Step]:
    return [
        Step(text="Let me look.", calls=(("c1", "echo", ODD), ("c2", "echo", "{}"),
                                         ("c3", "big", '{"n": 60000}'))),
        Step(calls=(("c4", "echo", ""), ("c5", "echo", ' {"x": [1e400, -1e400]} '))),
        # cut at the token limit while writing c8: c6 and c7 run, c8 is answered as not run
        Step(text="Three more.", calls=(("c6", "echo", '{"a": 1}'), ("c7", "big", '{"n": 9}'),
                                        ("c8", "echo", '{"b": "ab"}')), finish="length"),
        Step(text="Done."),
    ]


def odd_run(llm: BaseLLMProvider, stream: bool, before: Callable[[], None] = lambda: None,
            ) -> StateManager:
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    tools = ToolSet.from_openai([ECHO, BIG], {"echo": echo, "big": big})
    before()
    result = ReactiveRunner(create_react_node(llm, tools, stream=stream,
                                              system_prompt="Be brief."), state).run_sync(
        timeout=60)
    assert result.ok and state.get("final_answer") == "Done.", result.error
    return state


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_odd_arguments_and_long_results_replayed_through_a_real_server(
    server: StrictServer, api: str, stream: bool,
) -> None:
    steps = odd_steps()
    llm = ScriptedLLM([scripted(s) for s in steps])
    ours = odd_run(llm, stream)
    wire = Wire(server, api, stream)
    theirs = odd_run(wire.provider, stream, lambda: wire.add(steps))
    agree(wire, llm, [(ours, theirs)])


def test_arguments_past_a_floats_range_go_back_as_standard_json() -> None:
    from jianmu.llm.messages import Message, messages_to_anthropic, messages_to_openai
    from tests.support.model_server import strict_json

    history = [Message.user("go"), Message.assistant(None, tool_calls=[
        {"id": "c1", "name": "echo", "arguments": '{"n": 1e400, "m": [-1e400], "k": 1.5}'}]),
        Message.tool("ok", tool_call_id="c1")]
    (call,) = history[1].tool_calls
    assert call.arguments["n"] == float("inf")  # what the tool is given, as Python reads it
    sent = messages_to_openai(history)[1]["tool_calls"][0]["function"]["arguments"]
    assert strict_json(sent) == {"n": 10**309, "m": [-(10**309)], "k": 1.5}
    _, blocks = messages_to_anthropic(history)
    assert json.dumps(blocks, allow_nan=False)
    assert call.arguments["n"] == float("inf")  # the history itself is left as it was


# -- approvals, refusals and a restore on the way --------------------------------------------


def decided_run(llm: BaseLLMProvider, stream: bool, tmp: Path,
                before: Callable[[int], None] = lambda turn: None) -> tuple[str, StateManager]:
    """A shop run whose cancel asks a person (approved, then rejected after a restore in
    between) and whose exchange the guard denies."""
    from jianmu import Constraints

    data = make_shop()
    denied = Constraints.model_validate({"guard": {"tool_policy": {"exchange_items": "deny"}}})

    def runner_of(state: StateManager, run_id: str | None = None) -> ReactiveRunner:
        toolset = ToolSet.from_openai(
            DEFINITIONS, make_functions(data),
            metadata={"cancel_pending_order": {"confirm": True},
                      **{n: {"read_only": True} for n in READ_ONLY}})
        node = create_react_node(llm, toolset, stream=stream, constraints=denied)
        if run_id is None:
            return ReactiveRunner(node, state, checkpointer=checkpointer)
        return ReactiveRunner.restore(node, checkpointer, run_id, state_manager=state)

    checkpointer = SQLiteCheckpointer(tmp / "runs.db")
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "fix it"}]})
    runner = runner_of(state)
    before(0)
    first = runner.run_sync(timeout=60)
    assert first.status is RunStatus.SUSPENDED, first.error
    (asked,) = first.pending
    runner.approve(asked.id)
    before(1)
    second = runner.run_sync(timeout=60)
    assert second.status is RunStatus.SUSPENDED, second.error
    state = StateManager(AgentState)
    restored = runner_of(state, runner.run_id)
    restored.reject(second.pending[0].id, "no, keep it")
    before(2)
    third = restored.run_sync(timeout=60)
    assert third.ok and state.get("final_answer") == "Left as it is.", third.error
    return digest(data), state


DECIDED = [
    [Step(text="Looking.", calls=(
        ("d1", "get_order_details", '{"order_id": "#W00"}'),
        ("d2", "cancel_pending_order",
         '{"order_id": "#W00", "reason": "no longer needed"}'),
        ("d3", "exchange_items", '{"order_id": "#W01", "item_ids": ["101"], '
                                 '"new_item_ids": ["102"], "payment_method_id": "card_0"}'),
        ("d4", "calculate", '{"expression": "2 + 2"}')))],
    [Step(calls=(("d5", "cancel_pending_order",
                  '{"order_id": "#W02", "reason": "ordered by mistake"}'),))],
    [Step(text="Left as it is.")],
]


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_approved_rejected_and_denied_calls_replayed_through_a_real_server(
    server: StrictServer, api: str, stream: bool, tmp_path: Path,
) -> None:
    llm = ScriptedLLM([scripted(s) for turn in DECIDED for s in turn])
    expected, ours = decided_run(llm, stream, tmp_path / "ours")
    wire = Wire(server, api, stream)
    got, theirs = decided_run(wire.provider, stream, tmp_path / "theirs",
                              lambda turn: wire.add(DECIDED[turn]))
    assert got == expected
    agree(wire, llm, [(ours, theirs)])


def test_a_turns_results_go_in_the_order_of_its_calls() -> None:
    from jianmu.llm.messages import Message, messages_to_anthropic, messages_to_openai

    history = [Message.user("go"), Message.assistant("Three.", tool_calls=[
        {"id": i, "name": "echo", "arguments": {}} for i in ("a", "b", "c")]),
        Message.tool("cut", tool_call_id="c"), Message.tool("A", tool_call_id="a"),
        Message.tool("orphan", tool_call_id="zz"), Message.tool("B", tool_call_id="b"),
        Message.user("next")]
    sent = messages_to_openai(history)
    assert [m.get("tool_call_id") for m in sent[2:5]] == ["a", "b", "c"]
    assert sent[5]["role"] == "user" and "orphan" in sent[5]["content"]
    _, turns = messages_to_anthropic(history)
    assert [b.get("tool_use_id") for b in turns[2]["content"][:3]] == ["a", "b", "c"]
