"""Tests for jianmu/llm/provider.py: results, tool schemas, from_config and the base class."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from jianmu.config import AppConfig, LLMConfig, parse_config
from jianmu.errors import ConfigError
from jianmu.llm import (
    BaseLLMProvider,
    LLMProvider,
    LLMResponse,
    Message,
    OpenAIProvider,
    ScriptedLLM,
    StreamDone,
    TextDelta,
    ToolCallReady,
    Usage,
    from_config,
    provider_from_config,
    takes_requests,
    tool_choice_to_openai,
    tools_to_openai,
)
from jianmu.tools.calls import ToolCall


class _FakeTool:
    """Stands in for `jianmu.tools.Tool`: all a provider needs is ``to_openai()``."""

    def __init__(self, name: str) -> None:
        self.name = name

    def to_openai(self) -> dict[str, Any]:
        return {"type": "function", "function": {"name": self.name, "parameters": {}}}


def test_usage_adds_up() -> None:
    a = Usage(input_tokens=10, output_tokens=2)
    b = Usage(input_tokens=5, output_tokens=3)
    assert (a + b) == Usage(input_tokens=15, output_tokens=5)
    assert (a + b).total_tokens == 20
    assert sum([a, b]) == a + b
    assert Usage().total_tokens == 0
    with pytest.raises(TypeError):
        a + 1  # type: ignore[operator]


def test_llm_response_takes_calls_from_message() -> None:
    call = ToolCall(name="x", arguments={}, id="c1")
    response = LLMResponse(message=Message.assistant(tool_calls=[call]))
    assert response.tool_calls == (call,)
    assert not response.is_final
    assert response.text == ""
    final = LLMResponse(message={"role": "assistant", "content": "done"})  # type: ignore[arg-type]
    assert final.is_final and final.text == "done"
    assert final.message == Message.assistant("done")


def test_tools_to_openai_shapes() -> None:
    openai_entry = {"type": "function", "function": {"name": "b", "parameters": {}}}
    schema = {"name": "c", "description": "C.", "parameters": {"type": "object"}}
    anthropic = {"name": "d", "input_schema": {"type": "object", "properties": {}}}
    assert tools_to_openai([_FakeTool("a"), openai_entry, schema, anthropic]) == [
        {"type": "function", "function": {"name": "a", "parameters": {}}},
        openai_entry,
        {"type": "function",
         "function": {"name": "c", "description": "C.", "parameters": {"type": "object"}}},
        {"type": "function",
         "function": {"name": "d", "parameters": {"type": "object", "properties": {}}}},
    ]
    assert tools_to_openai(None) == []
    with pytest.raises(TypeError, match="cannot offer 42 as a tool"):
        tools_to_openai([42])


def test_tool_choice_to_openai() -> None:
    assert tool_choice_to_openai(None) is None
    assert tool_choice_to_openai("required") == "required"
    assert tool_choice_to_openai("search") == {"type": "function", "function": {"name": "search"}}
    assert tool_choice_to_openai({"type": "function"}) == {"type": "function"}
    with pytest.raises(TypeError, match="tool_choice 3 is invalid"):
        tool_choice_to_openai(3)  # type: ignore[arg-type]


# -- from_config -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_from_config_scripted_uses_params_responses() -> None:
    config = parse_config(
        "llm:\n  provider: scripted\n  params:\n    responses:\n"
        "      - [{name: ls, arguments: {path: .}}]\n      - all done\n"
    )
    llm = from_config(config)
    assert isinstance(llm, ScriptedLLM)
    first = await llm.complete([Message.user("hi")])
    assert first.tool_calls == (ToolCall(name="ls", arguments={"path": "."}, id="call_1"),)
    assert (await llm.complete([Message.user("hi")])).text == "all done"


def test_from_config_scripted_without_responses_explains() -> None:
    with pytest.raises(ConfigError, match=r"llm.params.responses is not set"):
        from_config(LLMConfig(provider="scripted"))


@pytest.mark.parametrize(
    ("responses", "fragment"),
    [("just text", "must be a list"), ([42], "response #0")],
)
def test_from_config_scripted_bad_responses(responses: Any, fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        from_config(LLMConfig(provider="scripted", params={"responses": responses}))


@pytest.mark.anyio
@pytest.mark.parametrize("provider", ["openai", None])
async def test_from_config_openai(provider: str | None) -> None:
    config = LLMConfig(
        provider=provider, model="qwen", base_url="http://127.0.0.1:9/v1", api_key="k",
        max_retries=1, timeout=5, params={"temperature": 0.1, "retry_backoff": 0},
    )
    llm = provider_from_config(AppConfig(llm=config))
    assert isinstance(llm, OpenAIProvider)
    assert (llm.model, llm.base_url, llm.max_retries, llm.timeout) == (
        "qwen", "http://127.0.0.1:9/v1/", 1, 5.0
    )
    assert llm.retry_backoff == 0
    assert llm.default_params == {"temperature": 0.1}
    await llm.close()


def test_from_config_openai_needs_a_model() -> None:
    with pytest.raises(ConfigError, match=r"llm.model is not set"):
        from_config(LLMConfig(provider="openai", base_url="http://127.0.0.1:9/v1"))


def test_nothing_configured_is_an_error_never_a_scripted_model() -> None:
    with pytest.raises(ConfigError, match=r"set llm.provider"):
        from_config(AppConfig())
    with pytest.raises(ConfigError, match=r"set llm.provider"):
        BaseLLMProvider.from_config(LLMConfig())


# -- BaseLLMProvider ---------------------------------------------------------------------------


class _Echo(BaseLLMProvider):
    model = "echo"

    async def complete(self, messages: Any, *, tools: Any = None, tool_choice: Any = None,
                       **params: Any) -> LLMResponse:
        calls = [ToolCall(name="t", arguments={"n": 1}, id="c1")]
        return LLMResponse(message=Message.assistant("thinking", tool_calls=calls))


@pytest.mark.anyio
async def test_base_stream_replays_complete() -> None:
    async with _Echo() as llm:
        assert isinstance(llm, LLMProvider)
        events = [e async for e in llm.stream([Message.user("x")])]
    assert events[0] == TextDelta(text="thinking")
    assert events[1] == ToolCallReady(call=ToolCall(name="t", arguments={"n": 1}, id="c1"),
                                      index=0)
    assert isinstance(events[2], StreamDone) and events[2].response.text == "thinking"
    assert events[2].usage == Usage()


@pytest.mark.anyio
async def test_base_complete_must_be_implemented() -> None:
    with pytest.raises(NotImplementedError, match="must implement complete"):
        await BaseLLMProvider().complete([])


def test_importing_the_llm_package_does_not_import_the_sdk() -> None:
    code = (
        "import sys, jianmu.llm; "
        "bad = [m for m in ('openai', 'httpx2') if m in sys.modules]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


class _Base(BaseLLMProvider):
    async def send(self, request: Any) -> LLMResponse:
        return LLMResponse(message=Message.assistant("ok"))


class _OwnComplete(_Base):
    async def complete(self, messages: Any, **kwargs: Any) -> LLMResponse:
        return LLMResponse(message=Message.assistant("mine"))


def test_takes_requests_only_when_complete_is_the_base_one() -> None:
    assert takes_requests(_Base())
    assert takes_requests(_Base(), stream=True)
    assert not takes_requests(_OwnComplete())
    patched = _Base()
    patched.complete = _OwnComplete().complete  # type: ignore[method-assign]
    assert not takes_requests(patched)
    assert not takes_requests(_Base(), params={"tools": []})
    assert takes_requests(_Base(), params={"temperature": 0})
    assert not takes_requests(object())
