"""Rich content: images and audio of MCP tool results reach the model as image parts."""

from __future__ import annotations

import base64
import sys
from collections.abc import AsyncIterator

import pytest

from jianmu import ReactiveRunner, RunStatus, StateManager
from jianmu.llm import Message
from jianmu.llm.anthropic import AnthropicProvider
from jianmu.llm.openai import OpenAIProvider
from jianmu.mcp import MCPToolProvider
from jianmu.nodes.state import AgentState
from jianmu.nodes.tool_executor import ToolExecutor
from jianmu.tools.calls import ToolCall
from jianmu.tools.registry import ToolSet
from tests.mcp.helpers import HERE
from tests.support.fake_anthropic import FakeAnthropicServer, fake_anthropic
from tests.support.fake_openai import FakeOpenAIServer, fake_openai

__all__ = ("fake_anthropic", "fake_openai")  # fixtures

pytestmark = pytest.mark.anyio

MEDIA = str(HERE / "servers" / "media_server.py")
CALLS = [
    ToolCall(name="media__chart", arguments={"title": "sales"}, id="call_chart"),
    ToolCall(name="media__snapshot", arguments={}, id="call_snap"),
    ToolCall(name="media__chime", arguments={}, id="call_chime"),
]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """asyncio, for the whole module: its tests share one loop, and the one run below."""
    return "asyncio"


@pytest.fixture(scope="module")
async def recorded() -> AsyncIterator[list[Message]]:
    """The run of the three calls, once for the module: each test reads its messages."""
    provider = MCPToolProvider("media", command=sys.executable, args=[MEDIA], trust="read_only",
                               timeout=20)
    toolset = await ToolSet.from_providers([provider])
    try:
        state = StateManager(AgentState, {"actions": list(CALLS)})
        result = await ReactiveRunner(ToolExecutor(tools=toolset), state).run(timeout=60)
        assert result.status is RunStatus.SUCCESS
        tool_messages = list(state.get("messages"))
    finally:
        await provider.close()
    yield [Message.user("show me"), Message.assistant(tool_calls=CALLS), *tool_messages]


@pytest.fixture
def history(recorded: list[Message]) -> list[Message]:
    """A user turn, the assistant's three calls, and the tool messages the executor made
    (copies: what a test does with them leaves the next test's alone)."""
    return [m.model_copy(deep=True) for m in recorded]


async def test_tool_messages_carry_images_and_audio_whole(history: list[Message]) -> None:
    chart, snap, chime = history[2:]
    assert chart.content == "chart of sales" and [m.kind for m in chart.media] == ["image"]
    # 40k characters of base64: whole, not summarised nor cut at the result limit
    assert len(chart.media[0].data) > 40_000
    assert base64.b64decode(chart.media[0].data).startswith(b"\x89PNG")
    # structuredContent is the value, and the image is still there
    assert snap.content == '{"width": 1, "height": 1}' and snap.media[0].mime_type == "image/png"
    assert chime.media[0].kind == "audio" and chime.media[0].mime_type == "audio/wav"
    # a checkpoint round-trips the media; a message without media dumps as before
    assert Message.model_validate(chart.model_dump(mode="json")) == chart
    assert "media" not in history[0].model_dump()


async def test_openai_gets_the_images_in_a_user_message_after_the_results(
    history: list[Message], fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.add("A rising chart.", "A rising chart.")
    llm = OpenAIProvider("gpt-fake", base_url=fake_openai.base_url, retry_backoff=0)
    try:
        await llm.complete(history)
        blind = OpenAIProvider("gpt-fake", base_url=fake_openai.base_url, images=False)
        await blind.complete(history)
        await blind.close()
    finally:
        await llm.close()
    sent = fake_openai.requests[0]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool", "tool", "user"]
    # tool messages hold text only: the result, and a stand-in naming each media part
    assert sent[2]["content"].startswith("chart of sales\n[image: image/png, about ")
    assert sent[4]["content"] == "a chime\n[audio: audio/wav, about 12 bytes]"
    parts = sent[5]["content"]
    assert [p["type"] for p in parts] == ["text", "image_url", "text", "image_url"]
    assert parts[0]["text"] == "Images returned by tool call call_chart (media__chart):"
    assert parts[2]["text"] == "Images returned by tool call call_snap (media__snapshot):"
    assert parts[1]["image_url"]["url"] == "data:image/png;base64," + history[2].media[0].data
    assert parts[3]["image_url"]["url"].startswith("data:image/png;base64,iVBOR")
    # a model that reads no images gets the stand-ins only
    blind_sent = fake_openai.requests[1]["messages"]
    assert [m["role"] for m in blind_sent] == ["user", "assistant", "tool", "tool", "tool"]
    assert blind_sent[2] == sent[2]


async def test_anthropic_gets_image_blocks_inside_the_tool_results(
    history: list[Message], fake_anthropic: FakeAnthropicServer
) -> None:
    fake_anthropic.add("A rising chart.")
    llm = AnthropicProvider("claude-fake", base_url=fake_anthropic.base_url, api_key="k")
    try:
        await llm.complete(history)
    finally:
        await llm.close()
    assert not fake_anthropic.refused
    results = fake_anthropic.requests[0]["messages"][2]["content"]
    assert [r["tool_use_id"] for r in results] == ["call_chart", "call_snap", "call_chime"]
    chart, snap, chime = (r["content"] for r in results)
    assert [b["type"] for b in chart] == ["text", "image"]
    assert chart[1]["source"] == {"type": "base64", "media_type": "image/png",
                                  "data": history[2].media[0].data}
    assert snap[0]["text"].startswith('{"width": 1, "height": 1}\n[image: image/png')
    assert snap[1]["type"] == "image"
    assert chime == "a chime\n[audio: audio/wav, about 12 bytes]"  # no audio blocks there


async def test_an_embedded_image_resource_travels_whole_and_a_link_says_what_it_links() -> None:
    """A resource embedded in a result whose blob is an image (a file server's screenshot or
    picture) reached the model as ``[resource file:///shots/one.png: image/png]``, the image
    lost where an image block travels whole; a resource link showed its URI only, without the
    name, title and description the server gave it."""
    provider = MCPToolProvider("media", command=sys.executable, args=[MEDIA], trust="read_only",
                               timeout=20)
    toolset = await ToolSet.from_providers([provider])
    try:
        shot = await toolset.execute("media__screenshot", {})
        link = await toolset.execute("media__find_report", {})
    finally:
        await provider.close()
    assert shot.ok and [(m.kind, m.mime_type) for m in shot.media] == [("image", "image/png")]
    assert base64.b64decode(shot.media[0].data).startswith(b"\x89PNG")
    assert shot.output == "the screen\n[resource file:///shots/one.png: image/png]"
    assert link.ok and link.output == (
        "[resource link file:///reports/q3.pdf: Q3 report (q3.pdf, application/pdf) — "
        "Sales of the third quarter]"
    )
