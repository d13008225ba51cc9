"""Every request a run sends is one the real APIs take: runs through `create_react_node`,
`ReactiveRunner` and `Agent` against `StrictServer`, which answers 400 (as OpenAI and
Anthropic do) to a conversation that breaks their rules: a call without its result, a result
without its call, turns of one role in a row, empty text, a forced tool with thinking on..."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from jianmu import (
    Agent,
    AgentState,
    ReactiveRunner,
    StateManager,
    ToolSet,
    create_react_node,
    tool,
)
from jianmu.llm import AnthropicProvider, OpenAIProvider
from jianmu.llm.provider import SDKProvider
from jianmu.runtime import RunStatus, SQLiteCheckpointer
from tests.support.model_server import MODES, Turn
from tests.support.strict_api import StrictServer


@pytest.fixture(scope="module")
def server() -> Iterator[StrictServer]:
    with StrictServer() as running:
        yield running


@pytest.fixture(autouse=True)
def _clean(server: StrictServer) -> Iterator[None]:
    server.reset()
    yield
    assert not server.refused, [problems for _, problems in server.refused]


def provider(server: StrictServer, api: str, **options: Any) -> SDKProvider:
    if api == "openai":
        return OpenAIProvider("test-model", base_url=server.openai_url, max_retries=0,
                              **options)
    return AnthropicProvider("test-model", base_url=server.anthropic_url, max_retries=0,
                             **options)


def call(tool_name: str, ident: str | None = None, /, **arguments: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": tool_name, "arguments": arguments}
    if ident:
        out["id"] = ident
    return out


@tool
def lookup(city: str) -> str:
    """The weather of a city.

    Args:
        city: The city.
    """
    if city == "Atlantis":
        raise ValueError("no such city")
    return "" if city == "Nowhere" else f"sunny in {city}"


@tool(category="write", permission="user_confirm")
def deploy(service: str) -> str:
    """Deploy a service (asks a person first).

    Args:
        service: The service's name.
    """
    return f"{service} deployed"


def runner_for(server: StrictServer, api: str, stream: bool, question: str = "go",
               tools: Any = (lookup, deploy), **options: Any) -> ReactiveRunner:
    checkpointer = options.pop("checkpointer", None)
    options.setdefault("system_prompt", "Be brief.")
    node = create_react_node(provider(server, api), list(tools), stream=stream, **options)
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": question}]})
    return ReactiveRunner(node, state, checkpointer=checkpointer)


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_odd_calls_unknown_malformed_failing_empty_and_text_beside(
    server: StrictServer, api: str, stream: bool,
) -> None:
    server.add(
        Turn(text="Let me look.", calls=[call("lookup", city="Oslo"), call("nosuch", x=1),
                                         call("lookup", city="Atlantis"),
                                         call("lookup", city="Nowhere"),
                                         call("lookup", wrong=3)]),
        Turn(text=""),  # an empty reply
        "Done.",
    )
    runner = runner_for(server, api, stream)
    result = runner.run_sync(timeout=30)
    runner.send("and again?")
    server.add("Again.")
    again = runner.run_sync(timeout=30)
    assert not server.refused, server.refused
    assert result.ok or result.status is RunStatus.FAILURE
    assert again.ok, again.error


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_rejected_approved_edited_and_restored_calls(
    server: StrictServer, api: str, stream: bool, tmp_path: Path,
) -> None:
    checkpointer = SQLiteCheckpointer(tmp_path / "runs.db")
    server.add(Turn(calls=[call("deploy", service="a"), call("lookup", city="Oslo")]))
    runner = runner_for(server, api, stream, checkpointer=checkpointer)
    first = runner.run_sync(timeout=30)
    assert first.status is RunStatus.SUSPENDED, first.error
    runner.reject(first.pending[0].id, "not now")
    server.add(Turn(calls=[call("deploy", service="b")]))
    second = runner.run_sync(timeout=30)
    assert second.status is RunStatus.SUSPENDED, (second.error, server.refused)
    third = second
    node = create_react_node(provider(server, api), [lookup, deploy], stream=stream,
                             system_prompt="Be brief.")
    restored = ReactiveRunner.restore(node, checkpointer, runner.run_id,
                                      state_manager=StateManager(AgentState))
    restored.approve(third.pending[0].id, arguments={"service": "d"})
    server.add("Deployed d.")
    fourth = restored.run_sync(timeout=30)
    assert fourth.ok, (fourth.error, server.refused)


class City(BaseModel):
    name: str
    population: int


@pytest.mark.parametrize("mode", ["tool", "native", "text"])
@pytest.mark.parametrize(("api", "stream"), MODES)
def test_a_typed_answer_retried_after_a_failed_validation(
    server: StrictServer, api: str, stream: bool, mode: str,
) -> None:
    if mode == "tool":
        server.add(Turn(text="Here.", calls=[call("final_result", name="Oslo")]),
                   Turn(calls=[call("final_result", name="Oslo", population=700000)]))
    else:
        server.add('{"name": "Oslo"}', '{"name": "Oslo", "population": 700000}')
    runner = runner_for(server, api, stream, output_type=City, output_mode=mode)
    result = runner.run_sync(timeout=30)
    assert result.ok, (result.error, server.refused, [r.body for r in server.requests])
    runner.send("and Bergen?")
    if mode == "tool":
        server.add(Turn(calls=[call("final_result", name="Bergen", population=1)]))
    else:
        server.add('{"name": "Bergen", "population": 1}')
    assert runner.run_sync(timeout=30).ok


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_history_cut_by_max_messages_between_a_call_and_its_result(
    server: StrictServer, api: str, stream: bool,
) -> None:
    server.add(*[Turn(calls=[call("lookup", city=f"c{i}"), call("lookup", city="x")])
                 for i in range(4)], "Done.")
    for size in (2, 3, 4, 5):
        runner = runner_for(server, api, stream, max_messages=size)
        result = runner.run_sync(timeout=30)
        assert result.ok, (size, result.error, server.refused)
        server.add(*[Turn(calls=[call("lookup", city=f"c{i}"), call("lookup", city="x")])
                     for i in range(4)], "Done.")


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_a_cut_off_answer_continued(server: StrictServer, api: str, stream: bool) -> None:
    server.add(Turn(text="The first half", cut=5), "and the second.")
    runner = runner_for(server, api, stream, on_cut_off="continue")
    result = runner.run_sync(timeout=30)
    assert result.ok, (result.error, server.refused)


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_ask_user_answered(server: StrictServer, api: str, stream: bool) -> None:
    server.add(Turn(calls=[call("ask_user", question="Which city?")]), "Oslo it is.")
    runner = runner_for(server, api, stream, tools=ToolSet.resolve(["ask_user"]))
    first = runner.run_sync(timeout=30)
    assert first.status is RunStatus.SUSPENDED, first.error
    runner.answer(first.pending[0].id, "Oslo")
    assert runner.run_sync(timeout=30).ok


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_agent_run_sync_with_the_history_of_an_earlier_result(
    server: StrictServer, api: str, stream: bool,
) -> None:
    agent = Agent(provider(server, api), tools=[lookup], system_prompt="Be brief.")
    server.add(Turn(calls=[call("lookup", city="Oslo")]), "Sunny.")
    first = agent.run_sync("weather?")
    assert first.ok, first.error
    server.add("Still sunny.")
    second = agent.run_sync("and now?", history=first.messages)
    assert second.ok, (second.error, server.refused)


hang = threading.Event()


# `hang` is never set: the call always times out, however short the timeout or slow the machine
@tool(timeout=0.2)
async def slow(n: int) -> str:
    """Wait until told.

    Args:
        n: A number.
    """
    while not hang.is_set():
        await asyncio.sleep(0.05)
    return "done"


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_parallel_calls_one_fails_one_times_out(
    server: StrictServer, api: str, stream: bool,
) -> None:
    server.add(Turn(calls=[call("lookup", city="Oslo"), call("slow", n=1),
                           call("lookup", city="Atlantis")]), "Done.")
    runner = runner_for(server, api, stream, tools=[lookup, slow])
    result = runner.run_sync(timeout=30)
    assert result.ok, (result.error, server.refused)


started: dict[str, asyncio.Event] = {}


@tool
async def stuck(n: int) -> str:
    """Run until stopped.

    Args:
        n: A number.
    """
    started["stuck"].set()
    await asyncio.Event().wait()
    return "never"


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_a_call_cancelled_midway_then_the_run_resumed_by_send(
    server: StrictServer, api: str, stream: bool,
) -> None:
    server.add(Turn(text="Working.", calls=[call("stuck", n=1), call("lookup", city="Oslo")]))
    runner = runner_for(server, api, stream, tools=[lookup, stuck])

    async def first() -> Any:
        started["stuck"] = asyncio.Event()
        task = asyncio.create_task(runner.run(timeout=30))
        await started["stuck"].wait()
        runner.cancel()
        return await task

    result = asyncio.run(first())
    assert result.status is not RunStatus.SUCCESS
    runner.send("go on")
    server.add("Resumed.")
    again = asyncio.run(runner.run(timeout=30))
    assert again.ok, (again.error, server.refused)


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_send_after_a_failed_model_call(server: StrictServer, api: str, stream: bool) -> None:
    from tests.support.model_server import Raw

    server.add(Turn(calls=[call("lookup", city="Oslo")]), Raw(status=500, body={"error": {
        "message": "down", "type": "server_error"}}))
    runner = runner_for(server, api, stream)
    result = runner.run_sync(timeout=30)
    assert result.status is RunStatus.FAILURE
    runner.send("try again")
    server.add("Back.")
    again = runner.run_sync(timeout=30)
    assert again.ok, (again.error, server.refused)


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_send_after_max_iterations(server: StrictServer, api: str, stream: bool) -> None:
    server.add(*[Turn(calls=[call("lookup", city="Oslo")])] * 3)
    runner = runner_for(server, api, stream, max_iterations=2)
    result = runner.run_sync(timeout=30)
    runner.send("stop and answer")
    server.add("Sunny.")
    again = runner.run_sync(timeout=30)
    assert again.ok, (result.error, again.error, server.refused)


@pytest.mark.parametrize(("first", "second"), [("openai", "anthropic"), ("anthropic", "openai")])
@pytest.mark.parametrize("stream", [False, True])
def test_a_fallback_switching_apis_mid_conversation(
    server: StrictServer, first: str, second: str, stream: bool,
) -> None:
    from jianmu import FallbackLLM
    from tests.support.model_server import Raw

    llm = FallbackLLM([provider(server, first), provider(server, second)])
    node = create_react_node(llm, [lookup], stream=stream, system_prompt="Be brief.")
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    down = Raw(status=500, body={"error": {"message": "down", "type": "server_error"}})
    server.add(Turn(text="Looking.", calls=[call("lookup", "a.b:0", city="Oslo"),
                                            call("lookup", "a.b:1", city="Bergen")]),
               down, Turn(calls=[call("lookup", city="Rome")]), "Done.")
    result = ReactiveRunner(node, state).run_sync(timeout=30)
    assert result.ok, (result.error, server.refused)


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_a_hand_off_and_a_sub_agent(server: StrictServer, api: str, stream: bool) -> None:
    from jianmu import agent_tool, handoff

    sub = create_react_node(provider(server, api), [lookup], name="researcher", stream=stream)
    billing = create_react_node(provider(server, api), [lookup], name="billing", stream=stream,
                                system_prompt="You bill.")
    triage = create_react_node(
        provider(server, api),
        [agent_tool(sub, name="research", description="Researches."),
         handoff(billing, description="Billing.")],
        name="triage", stream=stream, system_prompt="You route.")
    server.add(Turn(text="Asking.", calls=[call("research", input="weather in Oslo")]),
               Turn(calls=[call("lookup", city="Oslo")]), "Sunny in Oslo.",
               Turn(text="Handing over.", calls=[call("transfer_to_billing")]),
               Turn(calls=[call("lookup", city="Bergen")]), "Billed.")
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    runner = ReactiveRunner(triage, state)
    result = runner.run_sync(timeout=30)
    assert result.ok, (result.error, server.refused)
    runner.send("thanks")
    server.add("Welcome.")
    again = runner.run_sync(timeout=30)
    assert again.ok, (again.error, server.refused)


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_history_trimmed_and_summarized(server: StrictServer, api: str, stream: bool) -> None:
    from jianmu import summarize_history, trim_history

    for processor in (trim_history(60), trim_history(max_messages=3, keep_first_user=False),
                      summarize_history(provider(server, api), max_tokens=60, keep_last=3),
                      summarize_history(provider(server, api), max_tokens=60, keep_last=1)):
        stop: list[bool] = []
        server.add(lambda request, stop=stop: (
            "A summary." if "tools" not in request.body else "Stopped." if stop else
            Turn(calls=[call("lookup", city="Oslo" * 10), call("lookup", city="Bergen")])))
        runner = runner_for(server, api, stream, history=[processor], max_iterations=4)
        runner.run_sync(timeout=30)
        runner.send("stop")
        stop.append(True)
        again = runner.run_sync(timeout=30)
        server._script.clear()
        assert again.ok, (processor, again.error, server.refused)


@tool
def shot(big: bool) -> Any:
    """A screenshot, or a huge text.

    Args:
        big: Whether to give a huge text.
    """
    from jianmu.tools.calls import MediaPart, ToolOutput

    if big:
        return "x" * 300_000
    return ToolOutput(value="", media=(MediaPart(kind="image", mime_type="image/png",
                                                  data="iVBORw0KGgo="),))


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_images_and_huge_tool_results(server: StrictServer, api: str, stream: bool) -> None:
    server.add(Turn(calls=[call("shot", big=False), call("shot", big=True),
                           call("shot", big=False)]), "Seen.")
    runner = runner_for(server, api, stream, tools=[shot])
    result = runner.run_sync(timeout=30)
    assert result.ok, (result.error, server.refused)
    runner.send("more")
    server.add("More.")
    assert runner.run_sync(timeout=30).ok


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_odd_names_and_ids_a_model_gives(server: StrictServer, api: str, stream: bool) -> None:
    server.add(Turn(calls=[call("functions.lookup", "call_0", city="Oslo"),
                           call("look up", "call_1", city="Oslo")]),
               Turn(calls=[call("lookup", "call_0", city="Oslo"),
                           call("lookup", "call_0", city="Rome")]),
               Turn(calls=[call("lookup", "call_0", city="Bergen")]),
               Turn(calls=[call("x" * 80, "call_1", city="Bergen")]),
               "Done.")
    runner = runner_for(server, api, stream)
    result = runner.run_sync(timeout=30)
    assert result.ok, (result.error, server.refused)
    runner.send({"role": "user", "content": "thanks", "name": "John Doe"})
    server.add("Welcome.")
    assert runner.run_sync(timeout=30).ok


@pytest.mark.parametrize("stream", [False, True])
def test_thinking_kept_through_approval_restore_and_typed_answers(
    server: StrictServer, stream: bool, tmp_path: Path,
) -> None:
    thinking = {"type": "enabled", "budget_tokens": 1024}
    checkpointer = SQLiteCheckpointer(tmp_path / "runs.db")
    llm = AnthropicProvider("test-model", base_url=server.anthropic_url, max_retries=0,
                            thinking=thinking)
    node = create_react_node(llm, [lookup, deploy], stream=stream, output_type=City)
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    runner = ReactiveRunner(node, state, checkpointer=checkpointer)
    server.add(Turn(text="Hm.", calls=[call("deploy", service="a"), call("lookup", city="X")]))
    first = runner.run_sync(timeout=30)
    assert first.status is RunStatus.SUSPENDED, (first.error, server.refused)
    node = create_react_node(llm, [lookup, deploy], stream=stream, output_type=City)
    restored = ReactiveRunner.restore(node, checkpointer, runner.run_id,
                                      state_manager=StateManager(AgentState))
    restored.reject(first.pending[0].id, "no")
    server.add(Turn(calls=[call("final_result", name="Oslo")]),
               Turn(calls=[call("final_result", name="Oslo", population=1)]))
    second = restored.run_sync(timeout=30)
    assert second.ok, (second.error, server.refused)
    restored.send("and?")
    server.add(Turn(calls=[call("final_result", name="Rome", population=2)]))
    assert restored.run_sync(timeout=30).ok


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_a_runner_streamed(server: StrictServer, api: str, stream: bool) -> None:
    server.add(Turn(text="Let me see.", calls=[call("lookup", city="Oslo")]), "Sunny.")
    runner = runner_for(server, api, stream)

    async def main() -> list[Any]:
        return [event async for event in runner.stream(timeout=30)]

    assert asyncio.run(main())
    runner.send("more")
    server.add("More.")
    assert asyncio.run(main())


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_a_cut_off_tool_call_continued(server: StrictServer, api: str, stream: bool) -> None:
    server.add(Turn(text="Calling.", calls=[call("lookup", city="Oslo" * 5)], cut=8),
               Turn(calls=[call("lookup", city="Oslo")]), "Done.")
    runner = runner_for(server, api, stream, on_cut_off="continue")
    result = runner.run_sync(timeout=30)
    assert not server.refused, (result.error, server.refused)


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_blank_messages_and_prompts(server: StrictServer, api: str, stream: bool) -> None:
    runner = runner_for(server, api, stream, question="", system_prompt=" \n")
    server.add(Turn(text="\n\n", calls=[call("lookup", city="Oslo")]), " ")
    result = runner.run_sync(timeout=30)
    runner.send("   ")
    server.add("Hm.")
    again = runner.run_sync(timeout=30)
    assert not server.refused, (result.error, again.error, server.refused)


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_histories_given_with_loose_ends(server: StrictServer, api: str, stream: bool) -> None:
    agent = Agent(provider(server, api), tools=[lookup], system_prompt="Be brief.")
    asked = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "lookup",
                                                      "arguments": '{"city": "Oslo"}'}}]}
    histories: list[list[dict[str, Any]]] = [
        [{"role": "user", "content": "hi"}, asked],  # a call never answered
        [{"role": "user", "content": "hi"},
         {"role": "tool", "tool_call_id": "gone", "content": "sunny"}],  # a result alone
        [asked, {"role": "tool", "tool_call_id": "c1", "content": "sunny"}],  # no user first
        [{"role": "system", "content": "Old rules."}, {"role": "user", "content": "hi"},
         {"role": "assistant", "content": "Hello."}, {"role": "system", "content": "Note."}],
        [{"role": "user", "content": "a"}, {"role": "user", "content": "b"},
         {"role": "assistant", "content": "c"}, {"role": "assistant", "content": "d"}],
        # a call id used twice (a server that numbers each reply's calls from 0)
        [{"role": "user", "content": "hi"}, asked, {"role": "tool", "tool_call_id": "c1",
                                                    "content": "sunny"},
         asked, {"role": "tool", "tool_call_id": "c1", "content": "rainy"}],
    ]
    for history in histories:
        server.add("Fine.")
        result = agent.run_sync("next", history=history)
        assert result.ok or "history" in str(result.error), (history, result.error)
        assert not server.refused, (history, server.refused)
    server.add("Fine.")  # no new message: the conversation ends with the assistant's turn
    node = create_react_node(provider(server, api), [lookup], stream=stream)
    state = StateManager(AgentState, {"messages": [
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello. \n"}]})
    result = ReactiveRunner(node, state).run_sync(timeout=30)
    assert result.ok, (result.error, server.refused)


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_a_denied_call(server: StrictServer, api: str, stream: bool) -> None:
    from jianmu import Constraints

    denied = Constraints.model_validate({"guard": {"tool_policy": {"lookup": "deny"}}})
    server.add(Turn(text="Try.", calls=[call("lookup", city="Oslo"), call("deploy", service="a")]),
               "Denied.")
    runner = runner_for(server, api, stream, constraints=denied)
    first = runner.run_sync(timeout=30)
    if first.status is RunStatus.SUSPENDED:
        runner.approve(first.pending[0].id)
        first = runner.run_sync(timeout=30)
    assert first.ok, (first.error, server.refused)


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_an_approval_inside_a_sub_agent(server: StrictServer, api: str, stream: bool) -> None:
    from jianmu import agent_tool

    sub = create_react_node(provider(server, api), [deploy], name="ops", stream=stream)
    lead = create_react_node(provider(server, api),
                             [agent_tool(sub, name="ops", description="Deploys."), lookup],
                             name="lead", stream=stream)
    server.add(Turn(calls=[call("ops", input="deploy a"), call("lookup", city="Oslo")]),
               Turn(calls=[call("deploy", service="a")]))
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    runner = ReactiveRunner(lead, state)
    first = runner.run_sync(timeout=30)
    assert first.status is RunStatus.SUSPENDED, (first.error, server.refused)
    runner.reject(first.pending[0].id, "no")
    server.add("Not deployed.", "The sub-agent did not deploy.")
    second = runner.run_sync(timeout=30)
    assert second.ok, (second.error, server.refused)


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_a_model_call_timed_out_midway_then_send(
    server: StrictServer, api: str, stream: bool,
) -> None:
    from tests.support.model_server import Stall

    server.add(Turn(calls=[call("lookup", city="Oslo")]), Stall())
    runner = runner_for(server, api, stream, llm_timeout=0.5)
    result = runner.run_sync(timeout=30)
    assert result.status is RunStatus.FAILURE
    runner.send("again")
    server.add("Back.")
    again = runner.run_sync(timeout=30)
    assert again.ok, (again.error, server.refused)


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_a_stream_broken_midway_then_send(server: StrictServer, api: str, stream: bool) -> None:
    from tests.support.model_server import Raw

    full = server._anthropic_events(Turn(text="Partly", calls=[call("lookup", city="Oslo")])) \
        if api == "anthropic" else server._openai_chunks(
            {}, Turn(text="Partly", calls=[call("lookup", city="Oslo")]))
    broken = Raw(body={"partial": True}, events=full[: len(full) // 2], cut=None)
    server.add(broken)
    runner = runner_for(server, api, stream)
    result = runner.run_sync(timeout=30)
    runner.send("again")
    server.add("Back.")
    again = runner.run_sync(timeout=30)
    assert not server.refused, (result.error, again.error, server.refused)


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_a_hand_off_beside_other_calls_to_an_agent_without_tools(
    server: StrictServer, api: str, stream: bool,
) -> None:
    from jianmu import handoff

    billing = create_react_node(provider(server, api), [], name="billing", stream=stream,
                                system_prompt="You bill.")
    triage = create_react_node(provider(server, api), [lookup, deploy, handoff(billing)],
                               name="triage", stream=stream)
    server.add(Turn(text="Over.", calls=[call("lookup", city="Oslo"),
                                         call("transfer_to_billing"),
                                         call("deploy", service="a"),
                                         call("transfer_to_billing")]),
               "Billed.")
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    runner = ReactiveRunner(triage, state)
    result = runner.run_sync(timeout=30)
    if result.status is RunStatus.SUSPENDED:
        runner.approve(result.pending[0].id)
        result = runner.run_sync(timeout=30)
    assert result.ok, (result.error, server.refused)
    runner.send("thanks")
    server.add("Welcome.")
    again = runner.run_sync(timeout=30)
    assert again.ok, (again.error, server.refused)


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_typed_answers_beside_calls_as_text_and_twice(
    server: StrictServer, api: str, stream: bool,
) -> None:
    server.add("Oslo, about 700k.",  # text where the answer tool was asked for
               Turn(calls=[call("final_result", name="Oslo", population=1),
                           call("lookup", city="Oslo")]),
               Turn(calls=[call("final_result", name="Oslo", population=1),
                           call("final_result", name="Rome", population=2)]),
               Turn(calls=[call("final_result", name="Oslo", population=1)]))
    runner = runner_for(server, api, stream, output_type=City, output_retries=3)
    result = runner.run_sync(timeout=30)
    assert not server.refused, (result.error, server.refused)
    runner.send("again")
    server.add(Turn(calls=[call("final_result", name="Oslo", population=1)]))
    again = runner.run_sync(timeout=30)
    assert again.ok, (again.error, server.refused)


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_guardrails_tripped(server: StrictServer, api: str, stream: bool) -> None:
    from jianmu import Tripwire

    def no_secrets(ctx: Any, value: Any) -> Tripwire | None:
        return Tripwire("a secret") if "secret" in str(value) else None

    server.add(Turn(calls=[call("lookup", city="secret")]), "The secret is out.")
    runner = runner_for(server, api, stream, input_guardrails=[no_secrets],
                        output_guardrails=[no_secrets], tool_output_guardrails=[no_secrets])
    first = runner.run_sync(timeout=30)
    runner.send("tell me the secret")
    second = runner.run_sync(timeout=30)
    runner.send("fine, the weather")
    server.add(lambda request: "Sunny.")  # (the refused turn may have asked the model)
    third = runner.run_sync(timeout=30)
    assert third.ok, (first.error, second.error, third.error, server.refused)


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_a_skill_after_an_answer_and_one_with_no_conversation(
    server: StrictServer, api: str, stream: bool, tmp_path: Path,
) -> None:
    import py_trees

    from jianmu.config import parse_config
    from jianmu.skills import SkillCatalog
    from jianmu.skills.node import SkillNode

    folder = tmp_path / "pinger"
    folder.mkdir()
    (folder / "SKILL.md").write_text("---\nname: pinger\ndescription: A test skill.\n"
                                     "tools: [lookup]\n---\nLook up the weather.\n")
    config = parse_config(f"runtime:\n  debug_dir: {tmp_path / 'debug'}\n")
    for start in ([], [{"role": "user", "content": "go"}]):
        agent = create_react_node(provider(server, api), [lookup], stream=stream, name="first")
        skill = SkillNode("Pinger", ["pinger"], provider(server, api),
                          catalog=SkillCatalog([tmp_path], custom_tools=[lookup]),
                          tools=[lookup])
        tree = py_trees.composites.Sequence("Both", memory=True,
                                            children=[skill] if not start else [agent, skill])
        server.add(*(["Hello. \n"] if start else []),
                   Turn(calls=[call("lookup", city="Oslo")]), "Sunny.")
        state = StateManager(AgentState, {"messages": start})
        result = ReactiveRunner(tree, state, config=config).run_sync(timeout=30)
        assert result.ok, (result.error, server.refused)


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_a_run_timed_out_during_a_call_then_resumed(
    server: StrictServer, api: str, stream: bool,
) -> None:
    server.add(Turn(text="Working.", calls=[call("lookup", city="Oslo"), call("stuck", n=1)]))
    runner = runner_for(server, api, stream, tools=[lookup, stuck])

    async def first() -> Any:
        started["stuck"] = asyncio.Event()
        return await runner.run(timeout=0.5)

    result = asyncio.run(first())
    assert result.status is not RunStatus.SUCCESS
    server.add("Resumed.")
    resumed = asyncio.run(runner.run(timeout=0.5))  # the same turn again, no new message
    runner.send("go on")
    server.add(lambda request: "Resumed.")
    again = asyncio.run(runner.run(timeout=30))
    assert again.ok, (resumed.error, again.error, server.refused)


@pytest.mark.parametrize("output_type", [int, list[int], City | int, str, dict[str, int]],
                         ids=["int", "list", "union", "str", "dict"])
@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_answer_tools_of_every_type(server: StrictServer, api: str, output_type: Any) -> None:
    server.add(lambda request: Turn(calls=[call(request.body["tools"][-1].get(
        "name") or request.body["tools"][-1]["function"]["name"], response=1)]))
    runner = runner_for(server, api, False, output_type=output_type, output_retries=0,
                        max_iterations=2)
    runner.run_sync(timeout=30)
    assert server.requests and not server.refused, server.refused


@pytest.mark.parametrize("output_type", [int, list[int], City | int, str, dict[str, int]],
                         ids=["int", "list", "union", "str", "dict"])
@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_native_answers_of_every_type(server: StrictServer, api: str, output_type: Any) -> None:
    server.add(lambda request: "1")
    runner = runner_for(server, api, False, output_type=output_type, output_mode="native",
                        output_retries=0, max_iterations=2)
    runner.run_sync(timeout=30)
    assert server.requests and not server.refused, server.refused


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_budgets_spent_midway_then_send(server: StrictServer, api: str, stream: bool) -> None:
    from jianmu import Constraints

    for limits in ({"max_tool_calls": 1}, {"budget": {"total_tokens": 10}}):
        server.add(Turn(calls=[call("lookup", city="Oslo"), call("lookup", city="Rome")]),
                   Turn(calls=[call("lookup", city="Bergen")]))
        tight = Constraints.model_validate({"guard": limits})
        runner = runner_for(server, api, stream, constraints=tight)
        first = runner.run_sync(timeout=30)
        runner.send("just answer")
        server._script.clear()
        server.add(lambda request: "Fine.")
        again = runner.run_sync(timeout=30)
        server._script.clear()
        assert not server.refused, (limits, first.error, again.error, server.refused)


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_an_agent_resumed_after_approvals_then_asked_again(
    server: StrictServer, api: str, stream: bool,
) -> None:
    agent = Agent(provider(server, api), tools=[lookup, deploy], system_prompt="Be brief.")
    server.add(Turn(text="Both.", calls=[call("deploy", service="a"), call("deploy", service="b"),
                                         call("lookup", city="Oslo")]))
    first = agent.run_sync("deploy a and b")
    assert first.status is RunStatus.SUSPENDED, (first.error, server.refused)
    first.approve(first.pending[0].id, arguments={"service": "c"})
    first.reject(first.pending[1].id, "not b")
    server.add("Deployed c.")
    second = agent.run_sync(resume=first)
    assert second.ok, (second.error, server.refused)
    server.add("Nothing else.")
    third = agent.run_sync("anything else?", history=second.messages)
    assert third.ok, (third.error, server.refused)


@pytest.mark.parametrize("stream", [False, True])
def test_thinking_with_cut_off_calls_empty_replies_and_send(
    server: StrictServer, stream: bool,
) -> None:
    llm = AnthropicProvider("test-model", base_url=server.anthropic_url, max_retries=0,
                            thinking={"type": "enabled", "budget_tokens": 1024})
    node = create_react_node(llm, [lookup], stream=stream, on_cut_off="continue")
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    runner = ReactiveRunner(node, state)
    server.add(Turn(text="Calling.", calls=[call("lookup", city="Oslo" * 5)], cut=8),
               Turn(calls=[call("lookup", city="Oslo")]), Turn(text=""), "Done.")
    first = runner.run_sync(timeout=30)
    runner.send("more")
    server.add(lambda request: "More.")
    again = runner.run_sync(timeout=30)
    assert again.ok, (first.error, again.error, server.refused)


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_a_processor_that_cuts_a_call_from_its_result_is_refused_before_sending(
    server: StrictServer, api: str, stream: bool,
) -> None:
    server.add(Turn(calls=[call("lookup", city="Oslo")]), "Done.")
    runner = runner_for(server, api, stream, history=[lambda messages: messages[-1:]])
    result = runner.run_sync(timeout=30)
    assert "HistoryProcessorError" in str(result.error) and len(server.requests) == 1


@pytest.mark.parametrize("stream", [False, True])
def test_a_fallback_to_openai_and_back_to_anthropic_thinking_mid_loop(
    server: StrictServer, stream: bool,
) -> None:
    from jianmu import FallbackLLM
    from tests.support.model_server import Raw

    thinking = AnthropicProvider("test-model", base_url=server.anthropic_url, max_retries=0,
                                 thinking={"type": "enabled", "budget_tokens": 1024})
    llm = FallbackLLM([thinking, provider(server, "openai")])
    node = create_react_node(llm, [lookup], stream=stream)
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    down = Raw(status=500, body={"type": "error", "error": {"type": "api_error",
                                                            "message": "down"}})
    # Claude is down, the OpenAI model calls a tool, Claude (thinking) is back for the rest
    server.add(down, Turn(calls=[call("lookup", city="Oslo")]), "Sunny.")
    result = ReactiveRunner(node, state).run_sync(timeout=30)
    assert result.ok, (result.error, server.refused)
    assert [r.api for r in server.requests] == ["anthropic", "openai", "anthropic"]


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_a_question_answered_by_a_message_sent(
    server: StrictServer, api: str, stream: bool,
) -> None:
    server.add(Turn(text="Asking.", calls=[call("ask_user", question="Which city?"),
                                           call("lookup", city="Oslo")]), "Oslo it is.")
    runner = runner_for(server, api, stream, tools=[*ToolSet.resolve(["ask_user"]), lookup])
    first = runner.run_sync(timeout=30)
    assert first.status is RunStatus.SUSPENDED, first.error
    try:
        runner.send("Oslo")
    except RuntimeError:  # refused while a question waits: answered the usual way
        runner.answer(first.pending[0].id, "Oslo")
    second = runner.run_sync(timeout=30)
    assert second.ok, (second.error, server.refused)


TOO_LONG = {
    "openai": {"error": {"message": "This model's maximum context length is 8192 tokens. However,"
                                    " your messages resulted in 9120 tokens. Please reduce the "
                                    "length of the messages.",
                         "type": "invalid_request_error", "param": "messages",
                         "code": "context_length_exceeded"}},
    "anthropic": {"type": "error", "error": {"type": "invalid_request_error",
                                             "message": "prompt is too long: 210443 tokens > "
                                                        "200000 maximum"}},
}


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_a_conversation_past_the_context_fails_catchably_and_goes_on_trimmed(
    server: StrictServer, api: str, stream: bool,
) -> None:
    from jianmu import ContextTooLongError, trim_history
    from tests.support.model_server import Raw

    def answer(request: Any) -> Any:  # the model's context holds 12 messages
        if len(request.body["messages"]) > 12:
            return Raw(status=400, body=TOO_LONG[api])
        last = request.body["messages"][-1]
        content = last.get("content")
        if last.get("role") == "tool" or (isinstance(content, list) and content[0].get(
                "type") == "tool_result"):
            return "Sunny."
        return Turn(calls=[call("lookup", city="Oslo"), call("lookup", city="Rome")])

    agent = Agent(provider(server, api), tools=[lookup], system_prompt="Be brief.",
                  stream=stream)
    history: Any = None
    failed = None
    for turn in range(6):
        server.add(*[answer] * 3)
        result = agent.run_sync(f"question {turn}", history=history)
        server._script.clear()
        if not result.ok:
            failed = result
            break
        history = result.messages
    assert failed is not None and isinstance(failed.exception, ContextTooLongError), failed
    assert failed.exception.status_code == 400 and "trim" in str(failed.exception)
    # nothing lost: the conversation so far, this turn's question and its tool results too
    assert [m.content for m in failed.messages[:len(history)]] == [
        m.content for m in history]
    assert failed.messages[len(history)].content == f"question {turn}"
    server.refused.clear()  # the 400s above were this test's own
    trimmed = Agent(provider(server, api), tools=[lookup], system_prompt="Be brief.",
                    stream=stream, history_processors=[trim_history(max_messages=8)])
    server.add(*[answer] * 3)
    again = trimmed.run_sync("and now?", history=failed.messages)
    assert again.ok, (again.error, server.refused)
