"""Chat models: `Message`, the `LLMProvider` protocol, `OpenAIProvider`, `AnthropicProvider`
and `ScriptedLLM`.

Its names load on first use (module ``__getattr__``): importing one imports only the module
that holds it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jianmu._lazy import lazy_names

if TYPE_CHECKING:
    from jianmu.llm.anthropic import AnthropicProvider
    from jianmu.llm.fallback import FallbackLLM, fallback_events
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
        replays_stream,
        takes_requests,
        tool_choice_to_openai,
        tools_to_openai,
    )
    from jianmu.llm.scripted import ScriptedLLM, ScriptedRequest, estimate_tokens

__all__ = (
    "AnthropicProvider",
    "BaseLLMProvider",
    "ChatRequest",
    "FallbackLLM",
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
    "fallback_events",
    "from_config",
    "messages_from_anthropic",
    "messages_from_openai",
    "messages_to_anthropic",
    "messages_to_openai",
    "provider_from_config",
    "replays_stream",
    "takes_requests",
    "tool_choice_to_openai",
    "tools_to_openai",
)

_HOLDERS = {
    "jianmu.llm.anthropic": ("AnthropicProvider",),
    "jianmu.llm.fallback": ("FallbackLLM", "fallback_events"),
    "jianmu.llm.messages": (
        "Message",
        "Role",
        "coerce_messages",
        "messages_from_anthropic",
        "messages_from_openai",
        "messages_to_anthropic",
        "messages_to_openai",
    ),
    "jianmu.llm.openai": ("OpenAIProvider",),
    "jianmu.llm.provider": (
        "BaseLLMProvider",
        "ChatRequest",
        "LLMProvider",
        "LLMResponse",
        "StreamDone",
        "StreamEvent",
        "TextDelta",
        "ToolCallReady",
        "Usage",
        "from_config",
        "provider_from_config",
        "replays_stream",
        "takes_requests",
        "tool_choice_to_openai",
        "tools_to_openai",
    ),
    "jianmu.llm.scripted": ("ScriptedLLM", "ScriptedRequest", "estimate_tokens"),
}
__getattr__, __dir__ = lazy_names(__name__, _HOLDERS, __all__)
