"""The reasoning OpenAI-compatible servers send beside the answer (``reasoning_content``:
DeepSeek, Kimi, vLLM's reasoning parsers; ``reasoning``: OpenRouter, newer vLLM), on the real
keep-alive server, streamed and not, over several turns: it is kept on the assistant message
(`Message.reasoning`), never as its text; it goes back only with ``send_reasoning=True``
(DeepSeek's thinking mode with tools requires it on the current turn's assistant messages), and
never to the official OpenAI API, which refuses fields it does not know."""

from __future__ import annotations

from typing import Any

import pytest

from jianmu import Agent
from jianmu.llm import AnthropicProvider, Message, OpenAIProvider
from jianmu.llm.messages import messages_to_anthropic
from jianmu.tools import tool
from tests.support.model_server import ModelServer, Raw, Turn

STREAMED = [pytest.param(False, id="plain"), pytest.param(True, id="stream")]


@tool
def lookup(city: str) -> str:
    """Look up the weather.

    Args:
        city: the city.
    """
    return {"oslo": "snow", "paris": "sun"}.get(city.lower(), "unknown")


def _assistants(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body["messages"] if m["role"] == "assistant"]


@pytest.mark.parametrize("key", ["reasoning_content", "reasoning"])
@pytest.mark.parametrize("stream", STREAMED)
def test_reasoning_is_kept_on_the_message_and_not_sent_back_by_default(
    server: ModelServer, stream: bool, key: str,
) -> None:
    server.add(Turn(reasoning="Oslo is in Norway.", reasoning_key=key,
                    calls=[{"name": "lookup", "arguments": {"city": "Oslo"}}]),
               Turn(reasoning="Snow, then.", reasoning_key=key, text="It snows in Oslo."))
    llm = OpenAIProvider("m", base_url=server.openai_url, max_retries=0)
    result = Agent(llm, tools=[lookup], stream=stream).run_sync("weather in Oslo?")
    assert result.ok, result.error
    first, answer = [m for m in result.messages if m.role == "assistant"]
    assert first.reasoning == [{"type": key, "text": "Oslo is in Norway."}]
    assert answer.reasoning == [{"type": key, "text": "Snow, then."}]
    assert answer.content == "It snows in Oslo."  # the reasoning is never the text
    # the safe default: what the official OpenAI API takes, no field it does not know
    assert all(set(m) <= {"role", "content", "tool_calls", "name"}
               for m in _assistants(server.requests[1].body))


@pytest.mark.parametrize("stream", STREAMED)
def test_deepseek_thinking_with_tools_gets_the_current_turns_reasoning_back(
    server: ModelServer, stream: bool,
) -> None:
    """Two questions, each a loop of tool calls: every request of a loop carries the reasoning
    of that loop's assistant turns (else DeepSeek answers 400); a new question drops it."""
    def call(city: str) -> list[dict[str, Any]]:
        return [{"name": "lookup", "arguments": {"city": city}}]

    server.add(Turn(reasoning="First Oslo.", calls=call("Oslo"), needs_reasoning=True),
               Turn(reasoning="Now Paris.", calls=call("Paris"), needs_reasoning=True),
               Turn(reasoning="Both known.", text="Snow and sun.", needs_reasoning=True),
               Turn(reasoning="Again Oslo.", calls=call("Oslo"), needs_reasoning=True),
               Turn(reasoning="Same.", text="Still snow.", needs_reasoning=True))
    llm = OpenAIProvider("deepseek-reasoner", base_url=server.openai_url, max_retries=0,
                         send_reasoning=True)
    agent = Agent(llm, tools=[lookup], stream=stream)
    first = agent.run_sync("Oslo and Paris?")
    assert first.ok, first.error
    second = agent.run_sync("And Oslo now?", history=first.messages)
    assert second.ok, second.error
    assert second.messages[-1].content == "Still snow."
    sent = [[m.get("reasoning_content") for m in _assistants(r.body)] for r in server.requests]
    assert sent == [
        [],
        ["First Oslo."],
        ["First Oslo.", "Now Paris."],
        [None, None, None],  # a new question: the last one's reasoning is not sent
        [None, None, None, "Again Oslo."],
    ]


def test_reasoning_never_goes_to_the_official_openai_api() -> None:
    with pytest.raises(ValueError, match=r"api\.openai\.com"):
        OpenAIProvider("gpt-4o", base_url="https://api.openai.com/v1", api_key="sk-x",
                       send_reasoning=True)


def test_an_openai_servers_reasoning_never_goes_to_anthropic(server: ModelServer) -> None:
    """Kept beside Anthropic's thinking blocks, it is not one of them: a conversation that
    moves to Claude (a fallback, a history passed on) sends none of it."""
    turn = Message(role="assistant", content="hi",
                   reasoning=[{"type": "reasoning_content", "text": "hm"}])
    _, sent = messages_to_anthropic([Message.user("q"), turn, Message.user("again")])
    assert sent[1]["content"] == [{"type": "text", "text": "hi"}]
    server.add("ok")
    llm = AnthropicProvider("m", base_url=server.anthropic_url, max_retries=0)
    result = Agent(llm).run_sync("again", history=[Message.user("q"), turn])
    assert result.ok, result.error
    assert server.requests[0].body["messages"][1]["content"] == [{"type": "text", "text": "hi"}]


# -- OpenRouter's reasoning_details, Mistral's thinking parts ----------------------------------

DETAILS = [{"type": "reasoning.text", "text": "Oslo is in Norway.", "signature": "sig-1",
            "format": "anthropic-claude-v1", "index": 0},
           {"type": "reasoning.encrypted", "data": "b64==", "format": "anthropic-claude-v1",
            "index": 1}]
CALL = {"id": "call_1", "type": "function",
        "function": {"name": "lookup", "arguments": '{"city": "Oslo"}'}}


def _completion(message: dict[str, Any], finish: str) -> dict[str, Any]:
    return {"id": "gen-1", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", **message},
                         "finish_reason": finish}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}}


def _chunks(deltas: list[dict[str, Any]], finish: str) -> list[dict[str, Any]]:
    def chunk(delta: dict[str, Any], reason: str | None = None) -> dict[str, Any]:
        return {"id": "gen-1", "object": "chat.completion.chunk", "created": 0, "model": "m",
                "choices": [{"index": 0, "delta": delta, "finish_reason": reason}]}
    return [chunk({"role": "assistant", "content": ""}), *map(chunk, deltas), chunk({}, finish)]


def _openrouter_turn(stream: bool) -> Raw:
    if not stream:
        return Raw(body=_completion({"content": None, "reasoning": "Oslo is in Norway.",
                                     "reasoning_details": DETAILS, "tool_calls": [CALL]},
                                    "tool_calls"))
    return Raw(events=_chunks([
        {"reasoning": "Oslo is ", "reasoning_details": [
            {"type": "reasoning.text", "text": "Oslo is ", "format": "anthropic-claude-v1",
             "index": 0}]},
        {"reasoning": "in Norway.", "reasoning_details": [
            {"type": "reasoning.text", "text": "in Norway.", "index": 0}]},
        {"reasoning_details": [{"type": "reasoning.text", "signature": "sig-1", "index": 0}]},
        {"reasoning_details": [{"type": "reasoning.encrypted", "data": "b64==",
                                "format": "anthropic-claude-v1", "index": 1}]},
        {"tool_calls": [{"index": 0, **CALL}]},
    ], "tool_calls"))


@pytest.mark.parametrize("stream", STREAMED)
def test_openrouters_reasoning_details_are_kept_whole_and_sent_back_unchanged(
    server: ModelServer, stream: bool,
) -> None:
    """OpenRouter gives a thinking model's reasoning as ``reasoning_details`` (text with its
    signature, encrypted blocks), streamed in pieces by index; Claude and Gemini behind it want
    them back unchanged beside the tool calls: they were dropped, so a thinking model's tool
    loop through OpenRouter lost its reasoning (or was refused)."""
    server.add(_openrouter_turn(stream), "It snows in Oslo.")
    llm = OpenAIProvider("anthropic/claude", base_url=server.openai_url, max_retries=0,
                         send_reasoning=True)
    result = Agent(llm, tools=[lookup], stream=stream).run_sync("weather in Oslo?")
    assert result.ok, result.error
    first = next(m for m in result.messages if m.role == "assistant")
    expected = [{**DETAILS[0]}, {**DETAILS[1]}]
    assert first.reasoning == [{"type": "reasoning", "text": "Oslo is in Norway."},
                               {"type": "reasoning_details", "details": expected}]
    (sent,) = _assistants(server.requests[1].body)
    assert sent["reasoning_details"] == expected
    assert "reasoning" not in sent  # the details carry the text (and its signature)


@pytest.mark.parametrize("stream", STREAMED)
def test_reasoning_details_are_not_sent_back_by_default(server: ModelServer, stream: bool) -> None:
    server.add(_openrouter_turn(stream), "It snows in Oslo.")
    llm = OpenAIProvider("m", base_url=server.openai_url, max_retries=0)
    result = Agent(llm, tools=[lookup], stream=stream).run_sync("weather in Oslo?")
    assert result.ok, result.error
    (sent,) = _assistants(server.requests[1].body)
    assert set(sent) <= {"role", "content", "tool_calls", "name"}


@pytest.mark.parametrize("stream", STREAMED)
def test_mistral_thinking_parts_are_kept_as_reasoning_not_text(
    server: ModelServer, stream: bool,
) -> None:
    thinking = {"type": "thinking", "thinking": [{"type": "text", "text": "Snow, surely."}]}
    if stream:
        server.add(Raw(events=_chunks([{"content": [thinking]},
                                       {"content": [{"type": "text", "text": "It snows."}]}],
                                      "stop")))
    else:
        server.add(Raw(body=_completion(
            {"content": [thinking, {"type": "text", "text": "It snows."}]}, "stop")))
    server.add("You are welcome.")
    llm = OpenAIProvider("magistral", base_url=server.openai_url, max_retries=0,
                         send_reasoning=True)
    agent = Agent(llm, stream=stream)
    result = agent.run_sync("weather in Oslo?")
    assert result.ok, result.error
    answer = result.messages[-1]
    assert answer.content == "It snows."
    assert answer.reasoning == [{"type": "thinking_parts", "text": "Snow, surely."}]
    assert agent.run_sync("thanks", history=result.messages).ok
    (sent,) = _assistants(server.requests[1].body)
    assert set(sent) <= {"role", "content", "tool_calls", "name"}  # kept, never sent back
    _, to_claude = messages_to_anthropic(result.messages)
    assert to_claude[-1]["content"] == [{"type": "text", "text": "It snows."}]
