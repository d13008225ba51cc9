"""What one model turn sends: the history window behind the system message, the tools."""

from __future__ import annotations

import pytest

from jianmu import ReactiveRunner, ScriptedLLM, StateManager, tool
from jianmu.llm import Message
from jianmu.nodes import AgentState, create_react_node
from jianmu.nodes.agent_llm import AgentLLMNode, recent_messages
from jianmu.tools import ToolSet

pytestmark = pytest.mark.anyio


@tool
def lookup(city: str) -> str:
    """The weather of a city.

    Args:
        city: the city.
    """
    return f"sunny in {city}"


@tool
def other(city: str) -> str:
    """Another lookup.

    Args:
        city: the city.
    """
    return city


def _history() -> list[Message]:
    """A user turn, two tool turns (one with two calls), an answer."""
    calls = [{"id": "a", "name": "lookup", "arguments": {"city": "Oslo"}},
             {"id": "b", "name": "lookup", "arguments": {"city": "Rome"}}]
    return [
        Message.user("Weather?"),
        Message.assistant(tool_calls=calls),
        Message.tool("sunny", tool_call_id="a", name="lookup"),
        Message.tool("rainy", tool_call_id="b", name="lookup"),
        Message.assistant(tool_calls=[{"id": "c", "name": "lookup",
                                       "arguments": {"city": "Oslo"}}]),
        Message.tool("sunny", tool_call_id="c", name="lookup"),
        Message.assistant("Sunny in Oslo, rainy in Rome."),
    ]


async def _bound(node: AgentLLMNode) -> StateManager:
    """``node`` bound to a run (it answered once), its state holding `_history`."""
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "hi"}]})
    await ReactiveRunner(node, state).run()
    state.replace({"messages": _history()})
    return state


@pytest.mark.parametrize("limit", [None, 1, 2, 3, 4, 5, 7, 50])
async def test_the_window_is_recent_messages_behind_the_system_message(
    limit: int | None,
) -> None:
    node = AgentLLMNode(llm=ScriptedLLM(["hello"]), system_prompt="Be brief.",
                        max_messages=limit)
    state = await _bound(node)
    sent = node.request_messages()
    stored = state.get("messages")
    assert sent[0].role == "system" and sent[0].content == "Be brief."
    assert sent[1:] == recent_messages(stored, limit)
    assert sent[1].role != "tool"  # never opens on results cut from their call
    assert stored == _history()  # the stored history is never changed
    assert sent is not stored
    if limit is None:  # no processor to run: the turn sends just this
        assert await node.prepare_messages() == sent


async def test_the_system_message_is_made_once_per_prompt() -> None:
    node = AgentLLMNode(llm=ScriptedLLM(["hello"]), system_prompt="Be brief.")
    await _bound(node)
    first = node.request_messages()[0]
    assert node.request_messages()[0] is first  # the same prompt: the same message
    node.skill_prompt = "Use the lookup."
    changed = node.request_messages()[0]
    assert changed.content == "Be brief.\n\nUse the lookup."
    node.system_prompt = node.skill_prompt = ""
    assert node.request_messages()[0].role == "user"  # no prompt: no system message
    node.system_prompt = "Be brief."
    assert node.request_messages()[0].content == "Be brief."


async def test_every_turn_sends_the_tools_of_the_set_offered_then() -> None:
    llm = ScriptedLLM([[{"name": "lookup", "arguments": {"city": "Oslo"}}],
                       [{"name": "lookup", "arguments": {"city": "Rome"}}], "done"])
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "Weather?"}]})
    result = await ReactiveRunner(create_react_node(llm, [lookup]), state).run()
    assert result.ok
    expected = tuple(ToolSet([lookup]).to_openai(include_deprecated=True))
    assert [r.tools for r in llm.requests] == [expected] * 3
    node = AgentLLMNode(llm=ScriptedLLM(["a", "b"]), tools=[lookup])
    await _bound(node)
    assert node._request_tools(ToolSet([lookup])) == expected
    swapped = ToolSet([lookup, other])  # a new set of tools is sent as it is
    assert [t["function"]["name"] for t in node._request_tools(swapped)] == ["lookup", "other"]


async def test_a_list_of_tools_is_one_set_across_turns_until_it_or_a_tool_changes() -> None:
    from jianmu.constraints import Constraints

    @tool
    def note(text: str) -> str:
        """Keep a note.

        Args:
            text: the note.
        """
        return text

    tools = [lookup, note]
    node = AgentLLMNode(llm=ScriptedLLM(["a"]), tools=tools)
    await _bound(node)
    first = node.visible_tools()
    assert first.names() == ["lookup", "note"]
    assert node.visible_tools() is first  # nothing changed: the same set, its export kept
    tools.append(other)  # the list given is read each turn
    grown = node.visible_tools()
    assert grown.names() == ["lookup", "note", "other"]
    note.description = "Keep a short note."  # a tool that changes is sent as it is now
    described = node.visible_tools()
    assert described is not grown
    sent = {t["function"]["name"]: t for t in node._request_tools(described)}
    assert sent["note"]["function"]["description"] == "Keep a short note."
    node.constraints = Constraints.model_validate(  # new constraints: visibility again
        {"guard": {"tool_policy": {"note": "deny"}}})
    assert node.visible_tools().names() == ["lookup", "other"]
    tools.remove(other)
    assert node.visible_tools().names() == ["lookup"]
