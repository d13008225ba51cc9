"""Tests for jianmu/llm/scripted.py: the scripted stand-in model."""

from __future__ import annotations

from typing import Any

import pytest

from jianmu.errors import LLMError
from jianmu.llm import (
    LLMProvider,
    LLMResponse,
    Message,
    ScriptedLLM,
    StreamDone,
    TextDelta,
    ToolCallReady,
    Usage,
    estimate_tokens,
)
from jianmu.tools.calls import ToolCall

pytestmark = pytest.mark.anyio


class _FakeTool:
    def __init__(self, name: str) -> None:
        self.name = name

    def to_openai(self) -> dict[str, Any]:
        return {"type": "function", "function": {"name": self.name, "parameters": {}}}


async def test_replays_answers_and_tool_turns_with_deterministic_ids() -> None:
    llm = ScriptedLLM([
        [ToolCall(name="read", arguments={"path": "a"}), {"name": "LS", "arguments": "{}"}],
        [{"name": "read", "arguments": {"path": "b"}, "id": "mine"}],
        "done",
    ])
    assert isinstance(llm, LLMProvider)
    first = await llm.complete([Message.user("go")])
    assert first.tool_calls == (
        ToolCall(name="read", arguments={"path": "a"}, id="call_1"),
        ToolCall(name="LS", arguments={}, id="call_2"),  # as sent; the executor resolves it
    )
    assert first.finish_reason == "tool_calls" and first.model == "scripted"
    assert first.message.tool_calls == list(first.tool_calls)
    second = await llm.complete([Message.user("go")])
    assert second.tool_calls[0].id == "mine"  # given ids are kept
    third = await llm.complete([Message.user("go")])
    assert third.is_final and third.text == "done" and third.finish_reason == "stop"
    assert llm.remaining == 0


async def test_two_instances_give_the_same_ids() -> None:
    script = [[{"name": "a"}, {"name": "b"}]]
    ids = [
        [c.id for c in (await ScriptedLLM(script).complete([Message.user("x")])).tool_calls]
        for _ in range(2)
    ]
    assert ids == [["call_1", "call_2"], ["call_1", "call_2"]]


async def test_running_out_is_a_clear_error() -> None:
    llm = ScriptedLLM(["only one"])
    await llm.complete([Message.user("x")])
    with pytest.raises(LLMError, match="ran out of responses: all 1 scripted replies"):
        await llm.complete([Message.user("x")])
    assert len(llm.requests) == 2  # the failed request is recorded too


async def test_function_entries_see_the_messages() -> None:
    def reply(messages: list[Message]) -> Any:
        last = messages[-1]
        if last.role == "tool":
            return f"the tool said {last.content}"
        return [{"name": "echo", "arguments": {"text": last.content}}]

    llm = ScriptedLLM([reply, reply])
    first = await llm.complete([Message.user("hi")])
    assert first.tool_calls == (ToolCall(name="echo", arguments={"text": "hi"}, id="call_1"),)
    history = [Message.user("hi"), first.message,
               Message.tool("hi", tool_call_id="call_1", name="echo")]
    assert (await llm.complete(history)).text == "the tool said hi"


async def test_responses_and_messages_pass_through() -> None:
    ready = LLMResponse(message=Message.assistant("as is"), usage=Usage(input_tokens=7),
                        finish_reason="length", model="other")
    llm = ScriptedLLM([ready, Message.assistant("both", tool_calls=[{"name": "t"}])])
    assert await llm.complete([Message.user("x")]) is ready
    both = await llm.complete([Message.user("x")])
    assert both.text == "both"
    assert both.tool_calls == (ToolCall(name="t", arguments={}, id="call_1"),)


async def test_records_requests() -> None:
    llm = ScriptedLLM(["ok"])
    await llm.complete(
        [{"role": "user", "content": "hi"}],
        tools=[_FakeTool("search"), {"name": "fetch", "parameters": {"type": "object"}}],
        tool_choice="search",
        temperature=0,
    )
    request = llm.requests[0]
    assert request.messages == (Message.user("hi"),)
    assert request.tool_names == ["search", "fetch"]
    assert request.tool_choice == {"type": "function", "function": {"name": "search"}}
    assert request.params == {"temperature": 0}


async def test_usage_is_estimated_from_characters() -> None:
    llm = ScriptedLLM(["12345678", [{"name": "ab", "arguments": {"k": 1}}]])
    history = [Message.user("x" * 40)]
    answer = await llm.complete(history)
    assert answer.usage == Usage(input_tokens=10, output_tokens=2)
    call = await llm.complete(history, tools=[_FakeTool("ab")])
    # Prompt: the text plus the tool schemas; output: the call's name and arguments.
    tools_json = '[{"function": {"name": "ab", "parameters": {}}, "type": "function"}]'
    assert call.usage.input_tokens == estimate_tokens("x" * 40 + tools_json)
    assert call.usage.output_tokens == estimate_tokens('ab{"k": 1}')
    assert estimate_tokens("") == 0 and estimate_tokens("abcde") == 2


async def test_stream_yields_words_then_calls_then_done() -> None:
    llm = ScriptedLLM(["Hello big world", Message.assistant("ok", tool_calls=[{"name": "t"}])])
    events = [e async for e in llm.stream([Message.user("x")])]
    assert events[:-1] == [TextDelta(text="Hello "), TextDelta(text="big "),
                           TextDelta(text="world")]
    assert isinstance(events[-1], StreamDone) and events[-1].response.text == "Hello big world"
    events = [e async for e in llm.stream([Message.user("x")])]
    assert events[1] == ToolCallReady(call=ToolCall(name="t", arguments={}, id="call_1"), index=0)


@pytest.mark.parametrize(
    ("script", "error", "fragment"),
    [
        ("answer", TypeError, "wrap a single answer in a list"),
        ([42], TypeError, "response #0 is 42 of type int"),
        (["ok", []], ValueError, "response #1: an empty tool-call turn"),
        ([[1]], TypeError, "tool call 1 must be a ToolCall or a dict"),
        ([Message.user("x")], ValueError, "must be an assistant message"),
    ],
)
async def test_bad_scripts_are_refused(script: Any, error: type[Exception], fragment: str) -> None:
    with pytest.raises(error, match=fragment):
        ScriptedLLM(script)


async def test_bad_function_results_are_refused() -> None:
    llm = ScriptedLLM([lambda messages: 42, lambda messages: lambda m: "x"])
    with pytest.raises(TypeError, match="returned by the script function"):
        await llm.complete([Message.user("x")])
    with pytest.raises(TypeError, match="returned another function"):
        await llm.complete([Message.user("x")])


async def test_scripted_calls_are_numbered_in_order_and_given_ids_kept() -> None:
    llm = ScriptedLLM([
        [{"name": "a"}, {"name": "b", "id": "mine"}, ToolCall(name="c", arguments={})],
        [{"name": "d", "arguments": '{"k": 1}'}],
        "done",
    ])
    first = await llm.complete([Message.user("x")])
    assert [c.id for c in first.tool_calls] == ["call_1", "mine", "call_2"]
    assert [c.id for c in first.message.tool_calls] == ["call_1", "mine", "call_2"]
    second = await llm.complete([Message.user("x")])
    assert second.tool_calls[0].id == "call_3" and second.tool_calls[0].arguments == {"k": 1}


def _restore_with(script: list[Any], db: Any, run_id: str) -> tuple[Any, ScriptedLLM]:
    from jianmu import ReactiveRunner, SQLiteCheckpointer, StateManager
    from jianmu.nodes import AgentState, create_react_node

    llm = ScriptedLLM(script)
    runner = ReactiveRunner.restore(create_react_node(llm, _TOOLS, name="agent"),
                                    SQLiteCheckpointer(db), run_id,
                                    state_manager=StateManager(AgentState))
    return runner, llm


def _deploy(target: str) -> str:
    """Deploy.

    Args:
        target: where.
    """
    return f"deployed {target}"


def _lookup(city: str) -> str:
    """The weather.

    Args:
        city: the city.
    """
    return f"sunny in {city}"


def _tools() -> list[Any]:
    from jianmu.tools import tool

    return [tool(confirm=True)(_deploy), tool(_lookup)]


_TOOLS = _tools()


def test_a_restored_run_goes_on_with_the_script_where_it_was(tmp_path: Any) -> None:
    from jianmu import ReactiveRunner, SQLiteCheckpointer, StateManager
    from jianmu.nodes import AgentState, create_react_node

    script: list[Any] = [[{"name": "_lookup", "arguments": {"city": "Oslo"}}],
                         [{"name": "_deploy", "arguments": {"target": "prod"}}],
                         "Deployed.", [{"name": "_lookup", "arguments": {"city": "Rome"}}],
                         "Rome is sunny."]
    db = tmp_path / "runs.sqlite"
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "ship"}]})
    runner = ReactiveRunner(create_react_node(ScriptedLLM(script), _TOOLS, name="agent"), state,
                            checkpointer=SQLiteCheckpointer(db), run_id="r1")
    first = runner.run_sync(timeout=30)
    assert first.status.value == "suspended" and [r.id for r in first.pending] == ["call_2"]

    restored, llm = _restore_with(script, db, "r1")  # as in another process: a new script
    restored.approve("call_2")
    assert restored.run_sync(timeout=30).ok
    assert restored.state.get("final_answer") == "Deployed."
    assert len(llm.requests) == 1 and llm.remaining == 2

    again, llm = _restore_with(script, db, "r1")
    again.send("And Rome?")
    assert again.run_sync(timeout=30).ok
    assert again.state.get("final_answer") == "Rome is sunny."
    calls = [c.id for m in again.state.get("messages") for c in m.tool_calls]
    assert calls == ["call_1", "call_2", "call_3"]  # the numbering went on too


def test_a_hand_off_teams_scripts_go_on_where_they_were_after_a_restore(tmp_path: Any) -> None:
    """The agent handed to read the team's conversation with the hand-off turn of the agent
    before it in it: its fresh script, in another process, started again at its first entry
    (the deploy asked about again, and the answer never came)."""
    from jianmu import Agent, SQLiteCheckpointer, handoff

    store = SQLiteCheckpointer(tmp_path / "runs.sqlite")

    def team() -> tuple[Agent, ScriptedLLM]:
        ops_llm = ScriptedLLM([[{"name": "_deploy", "arguments": {"target": "prod"}}],
                               "Deployed to prod.", "Again?"])
        ops = Agent(ops_llm, tools=[_TOOLS[0]], name="ops")
        triage = Agent(ScriptedLLM([[{"name": "transfer_to_ops", "arguments": {}}]]),
                       tools=[handoff(ops)], name="triage", checkpointer=store)
        return triage, ops_llm

    first = team()[0].run_sync("Ship it.")
    assert [r.id for r in first.pending] == ["call_1"]
    triage, ops_llm = team()  # as in another process
    restored = triage.restore(first.run_id)
    restored.approve()
    done = triage.run_sync(resume=restored)
    assert done.ok and done.output == "Deployed to prod."
    assert len(ops_llm.requests) == 1 and ops_llm.remaining == 1


def test_a_history_from_elsewhere_starts_the_script_at_its_beginning() -> None:
    llm = ScriptedLLM(["first", "second"])
    llm._skip_replayed([Message(role="user", content="hi"),
                        Message(role="assistant", content="not from this script")])
    assert llm.remaining == 2
    llm._skip_replayed([Message(role="user", content="hi"),
                        Message(role="assistant", content="first")])
    assert llm.remaining == 1
    scripted = ScriptedLLM([lambda messages: "from a function"])  # its reply is unknown
    scripted._skip_replayed([Message(role="user", content="hi"),
                             Message(role="assistant", content="from a function")])
    assert scripted.remaining == 1
