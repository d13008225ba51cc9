"""Tests for jianmu/llm/messages.py: validation and OpenAI / Anthropic / JSON round trips."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from jianmu.llm.messages import (
    Message,
    coerce_messages,
    messages_from_anthropic,
    messages_from_openai,
    messages_to_anthropic,
    messages_to_openai,
)
from jianmu.tools.calls import MediaPart, ToolCall, ToolResult

# -- strategies --------------------------------------------------------------------------------


def _not_json(text: str) -> bool:
    try:
        json.loads(text.strip())
    except ValueError:
        return bool(text.strip())
    return False


_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
_arguments = st.dictionaries(st.text(max_size=8), _json_values, max_size=4) | st.text(
    min_size=1, max_size=10
).filter(_not_json)
_names = st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True)
_texts = st.text(max_size=30)


@st.composite
def conversations(draw: Any, *, speaker_names: bool = True) -> list[Message]:
    """A valid history: optional system prompt, then user / assistant / tool-result turns."""
    messages: list[Message] = []
    if draw(st.booleans()):
        messages.append(Message.system(draw(_texts)))
    next_id = 0
    for _ in range(draw(st.integers(0, 4))):
        name = draw(st.none() | _names) if speaker_names else None
        messages.append(Message.user(draw(_texts), name=name))
        calls = []
        for _ in range(draw(st.integers(0, 3))):
            next_id += 1
            calls.append(
                ToolCall(name=draw(_names), arguments=draw(_arguments), id=f"call_{next_id}")
            )
        content = draw(st.none() | st.text(min_size=1, max_size=30))
        messages.append(Message.assistant(content, tool_calls=calls))
        for call in calls:
            messages.append(Message.tool(draw(_texts), tool_call_id=call.id, name=call.name))
    return messages


# -- round trips -------------------------------------------------------------------------------


@settings(deadline=None)
@given(conversations())
def test_openai_round_trip(history: list[Message]) -> None:
    wire = messages_to_openai(history)
    json.dumps(wire)  # what goes on the wire is plain JSON
    # a turn of neither text nor calls goes as "" (OpenAI refuses null content without calls)
    sent = [m.model_copy(update={"content": ""})
            if m.role != "tool" and m.content is None and not m.tool_calls else m
            for m in history]
    assert messages_from_openai(wire) == sent


@settings(deadline=None)
@given(conversations(speaker_names=False))
def test_anthropic_round_trip(history: list[Message]) -> None:
    system, wire = messages_to_anthropic(history)
    json.dumps(wire)
    # an answer of only whitespace is not sent (the API refuses such a text): none comes back
    sent = [m.model_copy(update={"content": None})
            if m.role == "assistant" and m.content and m.content.isspace() else m
            for m in history]
    # nor a blank system prompt (refused as a text block without text): a system prompt
    # comes back only when there is one
    sent = [m for m in sent if m.role != "system" or (m.content and not m.content.isspace())]
    assert messages_from_anthropic(system, wire) == sent


@settings(deadline=None)
@given(conversations())
def test_json_dump_restores(history: list[Message]) -> None:
    for message in history:
        dumped = json.loads(json.dumps(message.model_dump(mode="json")))
        assert Message.model_validate(dumped) == message


@settings(deadline=None)
@given(conversations(speaker_names=False))
def test_anthropic_alternates_and_groups_tool_results(history: list[Message]) -> None:
    _, wire = messages_to_anthropic(history)
    for previous, current in itertools.pairwise(wire):
        tool_results = isinstance(current["content"], list) and current["content"] and all(
            b["type"] == "tool_result" for b in current["content"]
        )
        if tool_results:  # results always answer the assistant turn right before them
            assert previous["role"] == "assistant"
            asked = [b["id"] for b in previous["content"] if b["type"] == "tool_use"]
            assert [b["tool_use_id"] for b in current["content"]] == asked


# -- Anthropic specifics -----------------------------------------------------------------------


def test_consecutive_tool_results_become_one_user_message() -> None:
    history = [
        Message.system("be brief"),
        Message.user("weather in Paris and Rome?"),
        Message.assistant(
            "Checking both.",
            tool_calls=[
                ToolCall(name="weather", arguments={"city": "Paris"}, id="call_1"),
                ToolCall(name="weather", arguments={"city": "Rome"}, id="call_2"),
            ],
        ),
        Message.tool("18C", tool_call_id="call_1", name="weather"),
        Message.tool("Error: station offline", tool_call_id="call_2", name="weather"),
        Message.user("thanks"),
    ]
    system, wire = messages_to_anthropic(history)
    assert system == "be brief"
    assert wire == [
        {"role": "user", "content": "weather in Paris and Rome?"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking both."},
                {"type": "tool_use", "id": "call_1", "name": "weather",
                 "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "call_2", "name": "weather",
                 "input": {"city": "Rome"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": "18C"},
                {"type": "tool_result", "tool_use_id": "call_2",
                 "content": "Error: station offline", "is_error": True},
            ],
        },
        {"role": "user", "content": "thanks"},
    ]
    assert messages_from_anthropic(system, wire) == history


def test_native_anthropic_history_converts() -> None:
    # Shapes as the Anthropic API returns them: block lists, a system block list, thinking.
    wire = [
        {"role": "user", "content": [{"type": "text", "text": "list files"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "use ls", "signature": "x"},
                {"type": "tool_use", "id": "toolu_01", "name": "LS", "input": {"path": "."}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01",
                 "content": [{"type": "text", "text": "a.txt"}]},
                {"type": "text", "text": "and read it"},
            ],
        },
    ]
    history = messages_from_anthropic([{"type": "text", "text": "sys"}], wire)
    assert history == [
        Message.system("sys"),
        Message.user("list files"),
        # the name as sent: the executor resolves it to a registered tool (or refuses it);
        # the thinking kept as the turn's reasoning, to go back with it
        Message(role="assistant",
                tool_calls=[ToolCall(name="LS", arguments={"path": "."}, id="toolu_01")],
                reasoning=[{"type": "thinking", "thinking": "use ls", "signature": "x"}]),
        Message.tool("a.txt", tool_call_id="toolu_01", name="LS"),
        Message.user("and read it"),
    ]


def test_non_object_arguments_survive_anthropic() -> None:
    call = ToolCall(name="echo", arguments="not json {", id="c1")
    _, wire = messages_to_anthropic([Message.assistant(tool_calls=[call])])
    assert wire[0]["content"][0]["input"] == {"_raw_arguments": "not json {"}
    assert messages_from_anthropic(None, wire)[0].tool_calls == [call]


def test_several_system_messages_join() -> None:
    system, wire = messages_to_anthropic([Message.system("a"), Message.user("u"),
                                          Message.system("b")])
    assert system == "a\n\nb"
    assert wire == [{"role": "user", "content": "u"}]


@pytest.mark.parametrize(
    ("wire", "fragment"),
    [
        ([{"role": "system", "content": "x"}], "role 'system' is not an Anthropic role"),
        ([{"role": "user", "content": [{"type": "image", "source": {}}]}], "'image'"),
        ([{"role": "assistant", "content": [{"type": "server_tool_use"}]}], "not supported"),
        ([{"role": "user", "content": 42}], "content must be a string or a list"),
    ],
)
def test_unconvertible_anthropic_input_is_refused(wire: list[dict], fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        messages_from_anthropic(None, wire)


# -- Message validation ------------------------------------------------------------------------


def test_content_parts_are_joined() -> None:
    parts = [{"type": "text", "text": "one"}, "two", {"type": "input_text", "text": "three"}]
    assert Message(role="user", content=parts).content == "one\ntwo\nthree"


def test_parts_that_are_not_text_nor_base64_images_are_refused_clearly() -> None:
    with pytest.raises(ValidationError, match="only base64 data URLs are supported"):
        Message(role="user", content=[{"type": "image_url", "image_url": {"url": "x"}}])
    with pytest.raises(ValidationError, match="'input_audio' is not supported"):
        Message(role="user", content=[{"type": "input_audio", "input_audio": {"data": "x"}}])


@pytest.mark.parametrize(
    "raw",
    [
        {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}},
        {"type": "tool_use", "id": "c1", "name": "add", "input": {"a": 1}},
        {"id": "c1", "name": "add", "arguments": {"a": 1}},
        ToolCall(name="add", arguments={"a": 1}, id="c1"),
    ],
)
def test_tool_calls_accept_every_shape(raw: Any) -> None:
    message = Message(role="assistant", tool_calls=[raw])
    assert message.tool_calls == [ToolCall(name="add", arguments={"a": 1}, id="c1")]


def test_single_tool_call_dict_is_accepted() -> None:
    message = Message(role="assistant", tool_calls={"id": "c1", "name": "x"})
    assert message.tool_calls == [ToolCall(name="x", arguments={}, id="c1")]


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({"role": "robot", "content": "x"}, "role"),
        ({"role": "user", "tool_calls": [{"name": "x"}]}, "only assistant messages"),
        ({"role": "tool", "content": "x"}, "needs tool_call_id"),
        ({"role": "user", "content": "x", "tool_call_id": "c1"}, "belongs on tool messages"),
        ({"role": "user", "content": "x", "colour": "red"}, "colour"),
        ({"role": "user", "content": 3}, "content"),
    ],
)
def test_bad_messages_say_what_is_wrong(fields: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ValidationError, match=fragment):
        Message.model_validate(fields)


def test_from_openai_ignores_response_only_keys() -> None:
    message = Message.from_openai(
        {"role": "assistant", "content": "hi", "refusal": None, "audio": None,
         "annotations": [], "function_call": None}
    )
    assert message == Message.assistant("hi")


def test_developer_role_is_a_system_message() -> None:
    assert Message.from_openai({"role": "developer", "content": "x"}) == Message.system("x")


def test_from_openai_refuses_non_dicts() -> None:
    with pytest.raises(TypeError, match="expected an OpenAI message dict"):
        Message.from_openai("hello")  # type: ignore[arg-type]


def test_to_openai_shapes() -> None:
    call = ToolCall(name="add", arguments={"a": 1}, id="c1")
    assert Message.assistant(tool_calls=[call]).to_openai() == {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function",
                        "function": {"name": "add", "arguments": '{"a": 1}'}}],
    }
    assert Message.tool("2", tool_call_id="c1", name="add").to_openai() == {
        "role": "tool", "content": "2", "name": "add", "tool_call_id": "c1",
    }


def test_from_tool_result() -> None:
    ok = ToolResult(tool="add", ok=True, output={"sum": 3}, call_id="c1")
    assert Message.from_tool_result(ok) == Message.tool('{"sum": 3}', tool_call_id="c1", name="add")
    failed = ToolResult(tool="add", ok=False, error="boom", call_id="c2")
    assert Message.from_tool_result(failed).content == "Error: boom"
    # The executor's own OpenAI dict converts to the same message.
    assert Message.from_openai(ok.to_message()) == Message.from_tool_result(ok)
    with pytest.raises(ValueError, match="has no call_id"):
        Message.from_tool_result(ToolResult(tool="add", ok=True, output=1))


def test_coerce_messages() -> None:
    history = coerce_messages([Message.user("a"), {"role": "assistant", "content": "b"}])
    assert history == [Message.user("a"), Message.assistant("b")]
    with pytest.raises(TypeError, match="wrap it in a list"):
        coerce_messages(Message.user("a"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="wrap it in a list"):
        coerce_messages("hello")  # type: ignore[arg-type]


def test_media_round_trips_through_the_anthropic_format() -> None:
    image = MediaPart(kind="image", mime_type="image/png", data="iVBORw0K")
    history = [Message.assistant(tool_calls=[{"id": "t1", "name": "shot", "arguments": {}}]),
               Message.tool("a screen", tool_call_id="t1", name="shot", media=[image])]
    _, sent = messages_to_anthropic(history)
    back = messages_from_anthropic(None, sent)
    # as it was: the stand-in line sent for the image is not read back into its text (sent
    # again, the history said the image once more per round)
    assert back == history and sent[1]["content"][0]["content"][0]["text"].startswith(
        "a screen\n[image: ")
    asked = Message(role="user", content="What is this?", media=[image])  # it was refused
    assert messages_from_anthropic(None, messages_to_anthropic([asked])[1]) == [asked]
    with pytest.raises(ValueError, match="only tool and user messages carry media"):
        Message(role="assistant", content="x", media=[image])


def test_openai_image_parts_read_back_as_media() -> None:
    image = MediaPart(kind="image", mime_type="image/png", data="iVBORw0K")
    history = [Message.assistant(tool_calls=[{"id": "c1", "name": "shot", "arguments": {}}]),
               Message.tool("a screen", tool_call_id="c1", name="shot", media=[image])]
    sent = messages_to_openai(history)
    back = messages_from_openai(sent)
    assert back[2].role == "user" and back[2].media == [image]
    assert back[2].content == "Images returned by tool call c1 (shot):"


def test_anthropic_call_ids_are_unique_and_of_its_pattern_each_result_with_its_call() -> None:
    def turn(call_id: str) -> list[Message]:
        return [Message.assistant(tool_calls=[ToolCall(name="f", arguments={}, id=call_id)]),
                Message.tool("r", tool_call_id=call_id)]

    history = [Message.user("go"), *turn("call_0"), *turn("call_0"), *turn("a.b:0"),
               *turn("a_b_0"), *turn("toolu_01A")]
    _, sent = messages_to_anthropic(history)
    uses = [b["id"] for m in sent[1::2] for b in m["content"]]
    results = [b["tool_use_id"] for m in sent[2::2] for b in m["content"]]
    assert uses == results == ["call_0", "call_0_2", "a_b_0", "a_b_0_2", "toolu_01A"]
    assert messages_to_anthropic(history) == messages_to_anthropic(history)  # cache-stable


def test_openai_call_ids_past_40_characters_are_shortened_alike_in_call_and_result() -> None:
    long_id = "chatcmpl-tool-" + "ab" * 16
    history = [Message.user("go"),
               Message.assistant(tool_calls=[ToolCall(name="f", arguments={}, id=long_id),
                                             ToolCall(name="f", arguments={}, id="call_1")]),
               Message.tool("r", tool_call_id=long_id), Message.tool("s", tool_call_id="call_1")]
    sent = messages_to_openai(history)
    ids = [c["id"] for c in sent[1]["tool_calls"]]
    assert [m["tool_call_id"] for m in sent[2:]] == ids and ids[1] == "call_1"
    assert len(ids[0]) == 40 and ids[0].startswith("chatcmpl-tool-")


def test_a_users_picture_goes_out_and_comes_back_once() -> None:
    """``Message.to_openai()`` left a user's image out (a history kept as OpenAI dicts lost
    it), and a history sent and read back (`messages_to_openai`, then `from_openai`) said each
    image once more per round: its stand-in line stayed in the text."""
    from jianmu.llm.messages import messages_from_openai, messages_to_openai

    picture = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    asked = Message.from_openai({"role": "user", "content": [
        {"type": "text", "text": "What is this?"}, picture]})
    assert asked.to_openai() == {"role": "user", "content": [
        {"type": "text", "text": "What is this?\n[image: image/png, about 8 bytes]"}, picture]}
    assert Message.from_openai(asked.to_openai()) == asked
    history = [asked]
    for _ in range(3):
        history = messages_from_openai(messages_to_openai(history))
    assert history == [asked]
    bare = Message.from_openai({"role": "user", "content": [picture]})
    assert Message.from_openai(bare.to_openai()) == bare
    shown = Message(role="tool", content="chart", tool_call_id="c1", media=asked.media)
    assert shown.to_openai()["content"] == "chart\n[image: image/png, about 8 bytes]"
