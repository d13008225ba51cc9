"""A schema whose root holds ``anyOf``/``oneOf``/``allOf`` (MCP servers write ``"anyOf":
[{"required": ["card"]}, {"required": ["iban"]}]`` for "give one of these"): OpenAI and
Anthropic refuse every request that offers such a tool, whatever the model was asked. The
schema offered to a model leaves them out, joining their branches' properties to the root's;
the tool still checks a call by its whole schema and tells the model what it missed."""

from __future__ import annotations

import asyncio
from typing import Any

from jianmu.llm import AnthropicProvider, Message, OpenAIProvider
from jianmu.llm.provider import ChatRequest
from jianmu.tools import Tool, ToolSet
from tests.support.strict_api import anthropic_problems, openai_problems

SENT: list[dict[str, Any]] = []


def _pay(**kwargs: Any) -> str:
    SENT.append(kwargs)
    return "paid"


PAY = Tool.from_schema(_pay, name="pay", description="Pay an order.", input_schema={
    "type": "object",
    "properties": {"order": {"type": "string"}, "card": {"type": "string"}},
    "required": ["order"],
    "anyOf": [{"required": ["card"]}, {"required": ["iban"], "properties": {
        "iban": {"type": "string", "pattern": "^[A-Z]{2}"}}}],
})
SHIP = Tool.from_schema(_pay, name="ship", description="Ship.", input_schema={
    "type": "object",
    "$defs": {"Where": {"type": "object", "properties": {"city": {"type": "string"}},
                        "required": ["city"]}},
    "allOf": [{"$ref": "#/$defs/Where"}, {"properties": {"city": {"type": "integer"}}}],
    "oneOf": [{"properties": {"fast": {"type": "boolean"}}}],
})


def test_the_apis_take_every_request_offering_the_tools() -> None:
    request = ChatRequest.build([Message.user("pay")], [PAY, SHIP], None, {})
    openai = OpenAIProvider("m", base_url="http://127.0.0.1:9/v1")._request(request,
                                                                            stream=False)
    anthropic = AnthropicProvider("m", base_url="http://127.0.0.1:9")._request(request)
    assert openai_problems(openai) == [] and anthropic_problems(anthropic) == []
    for made in (PAY, SHIP):
        made.to_openai(strict=True)  # strict export can say it too
    offered = PAY.to_anthropic()["input_schema"]
    assert offered["properties"].keys() == {"order", "card", "iban"}
    assert offered["required"] == ["order"]
    ship = SHIP.to_openai()["function"]["parameters"]
    assert ship["required"] == ["city"] and ship["properties"]["fast"] == {"type": "boolean"}
    assert ship["properties"]["city"] == {"anyOf": [{"type": "string"}, {"type": "integer"}]}
    assert PAY.parameters["anyOf"]  # the tool's own schema is whole


def test_a_call_is_still_checked_by_the_whole_schema() -> None:
    SENT.clear()
    tools = ToolSet([PAY])
    missed = asyncio.run(tools.execute("pay", {"order": "A1"}))
    assert not missed.ok and SENT == []
    # what each form missed, and every argument a form names
    assert "1. 'card' is a required property; 2. 'iban' is a required property" in (
        missed.error or ""), missed.error
    assert "allowed arguments: order (required), card, iban" in (missed.error or "")
    bad = asyncio.run(tools.execute("pay", {"order": "A1", "iban": "x"}))
    assert not bad.ok and SENT == []
    assert "2. $.iban: 'x' does not match '^[A-Z]{2}'" in (bad.error or ""), bad.error
    good = asyncio.run(tools.execute("pay", {"order": "A1", "iban": "NO93"}))
    assert good.ok and SENT == [{"order": "A1", "iban": "NO93"}]
