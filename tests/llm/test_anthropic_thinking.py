"""Anthropic's extended thinking across turns, on the real keep-alive server: with thinking on,
an assistant turn that used a tool must come back starting with the thinking block it was
given, signature and all, or the API refuses the request (400). The turn's reasoning is kept
on its message (`Message.reasoning`), sent back to Anthropic, checkpointed with the
conversation, and never sent to another API."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from jianmu.llm import AnthropicProvider, Message
from jianmu.llm.messages import messages_from_anthropic, messages_to_anthropic
from tests.llm.test_odd_servers import ask
from tests.support.model_server import ModelServer, Raw, Turn

THINKING = {"type": "enabled", "budget_tokens": 1024}


@pytest.fixture(scope="module")
def server() -> Iterator[ModelServer]:
    with ModelServer() as running:
        yield running


def weather(city: str) -> str:
    """The weather of a city.

    Args:
        city: the city.
    """
    return "sunny"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_tool_turn_goes_back_with_its_thinking(server: ModelServer, stream: bool) -> None:
    llm = AnthropicProvider("m", base_url=server.anthropic_url, max_retries=0,
                            thinking=THINKING)
    for _ in range(3):  # runs one after another on one provider and its kept-alive connections
        server.add(Turn(calls=[{"name": "weather", "arguments": {"city": "Oslo"}}]), "Sunny.")
        result, _ = ask(llm, stream, "Weather in Oslo?", tools=[weather])
        assert result.ok, result.error  # the server refused the second turn without it
        assert result.output == "Sunny."
        asked = next(m for m in result.messages if m.tool_calls)
        assert [b["type"] for b in asked.reasoning] == ["thinking"]
        assert asked.reasoning[0]["signature"] in server.signed
        assert asked.reasoning[0]["thinking"] == "Let me think about it."
        sent_back = server.requests[-1].body["messages"][1]["content"]
        assert sent_back[0] == asked.reasoning[0] and sent_back[1]["type"] == "tool_use"
    assert not server.problems


def test_reasoning_is_kept_in_dumps_and_never_sent_to_openai() -> None:
    block = {"type": "thinking", "thinking": "Hmm.", "signature": "sig"}
    redacted = {"type": "redacted_thinking", "data": "opaque"}
    message = Message(role="assistant", tool_calls=[{"id": "c", "name": "f", "arguments": {}}],
                      reasoning=[block, redacted])
    again = Message.model_validate(message.model_dump(mode="json"))  # a checkpoint's round trip
    assert again == message
    assert "reasoning" not in message.to_openai()
    assert "reasoning" not in Message(role="assistant", content="x").model_dump()
    _, sent = messages_to_anthropic([message])
    assert sent[0]["content"][:2] == [block, redacted]
    back = messages_from_anthropic(None, sent)[0]  # (then its call's result, as not run)
    assert back.reasoning == [block, redacted]
    with pytest.raises(ValueError, match="only assistant messages carry reasoning"):
        Message(role="user", content="x", reasoning=[block])


def test_an_unsigned_thinking_block_does_not_fail_the_reply(server: ModelServer) -> None:
    """A compatible server that thinks without signing: the answer stands, and the block is
    kept as given (what it lacks matters only to a server that checks it)."""
    server.add(Raw(body={
        "id": "m", "type": "message", "role": "assistant", "model": "m",
        "content": [{"type": "thinking", "thinking": "Hm."}, {"type": "text", "text": "Fine."}],
        "stop_reason": "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": 3, "output_tokens": 2}}))
    llm = AnthropicProvider("m", base_url=server.anthropic_url, max_retries=0)
    result, _ = ask(llm, False, "How are you?")
    assert result.ok, result.error
    assert result.output == "Fine."
    assert result.messages[-1].reasoning == [{"type": "thinking", "thinking": "Hm."}]
