"""Chat models: `Message`, the `LLMProvider` protocol, `OpenAIProvider`, `AnthropicProvider`
and `ScriptedLLM`."""

from __future__ import annotations

from jianmu.llm.anthropic import AnthropicProvider
from jianmu.llm.messages import (
    Message,
    Role,
    coerce_messages,
    messages_from_anthropic,
    messages_from_openai,
    messages_to_anthropic,
    messages_to_openai,
)
from jianmu.llm.openai import OpenAIProvider
from jianmu.llm.provider import (
    BaseLLMProvider,
    ChatRequest,
    LLMProvider,
    LLMResponse,
    StreamDone,
    StreamEvent,
    TextDelta,
    ToolCallReady,
    Usage,
    from_config,
    provider_from_config,
    takes_requests,
    tool_choice_to_openai,
    tools_to_openai,
)
from jianmu.llm.scripted import ScriptedLLM, ScriptedRequest, estimate_tokens

__all__ = (
    "AnthropicProvider",
    "BaseLLMProvider",
    "ChatRequest",
    "LLMProvider",
    "LLMResponse",
    "Message",
    "OpenAIProvider",
    "Role",
    "ScriptedLLM",
    "ScriptedRequest",
    "StreamDone",
    "StreamEvent",
    "TextDelta",
    "ToolCallReady",
    "Usage",
    "coerce_messages",
    "estimate_tokens",
    "from_config",
    "messages_from_anthropic",
    "messages_from_openai",
    "messages_to_anthropic",
    "messages_to_openai",
    "provider_from_config",
    "takes_requests",
    "tool_choice_to_openai",
    "tools_to_openai",
)
