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
from tests.support.model_server import ModelServer, Turn

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
