"""The `LLMProvider` protocol, its results (`LLMResponse`, `Usage`, stream events) and
`from_config`, which picks a provider from the ``llm:`` section of the config."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from jianmu.errors import ConfigError
from jianmu.llm.messages import Message
from jianmu.tools.calls import ToolCall

if TYPE_CHECKING:
    from jianmu.config import AppConfig, LLMConfig

__all__ = (
    "BaseLLMProvider",
    "LLMProvider",
    "LLMResponse",
    "MessagesInput",
    "StreamDone",
    "StreamEvent",
    "TextDelta",
    "ToolCallReady",
    "ToolsInput",
    "Usage",
    "from_config",
    "provider_from_config",
    "tool_choice_to_openai",
    "tools_to_openai",
)

MessagesInput = Sequence[Message | Mapping[str, Any]]
"""A history: `Message`s or OpenAI-style message dicts."""
ToolsInput = Iterable[Any] | None
"""Tools offered to the model: `Tool` objects (anything with ``to_openai()``) or schema dicts."""


@dataclass(frozen=True, kw_only=True)
class Usage:
    """Tokens one or more model calls used; ``+`` adds them up."""

    input_tokens: int = 0
    """Prompt tokens."""
    output_tokens: int = 0
    """Completion tokens."""

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
        )

    def __radd__(self, other: Any) -> Usage:
        # Lets sum(usages) start from its default 0.
        if other == 0:
            return self
        return NotImplemented


@dataclass(frozen=True, kw_only=True)
class LLMResponse:
    """One model reply: the assistant message, its tool calls and what it cost."""

    message: Message
    """The assistant message to append to the history."""
    tool_calls: tuple[ToolCall, ...] = ()
    """The tool calls it asks for; taken from ``message`` when left empty."""
    usage: Usage = field(default_factory=Usage)
    """Tokens used by this call."""
    finish_reason: str | None = None
    """Why the model stopped: ``stop``, ``tool_calls``, ``length``..."""
    model: str = ""
    """The model that answered, as the server names it."""

    def __post_init__(self) -> None:
        if not isinstance(self.message, Message):
            object.__setattr__(self, "message", Message.from_openai(self.message))
        calls = self.tool_calls or self.message.tool_calls
        object.__setattr__(self, "tool_calls", tuple(ToolCall.from_list(calls)))

    @property
    def text(self) -> str:
        """The reply's text, ``""`` when it only calls tools."""
        return self.message.content or ""

    @property
    def is_final(self) -> bool:
        """Whether this is a final answer: no tool calls."""
        return not self.tool_calls


@dataclass(frozen=True, kw_only=True)
class TextDelta:
    """A piece of the reply's text, as it arrives."""

    text: str
    """The new characters."""


@dataclass(frozen=True, kw_only=True)
class ToolCallReady:
    """A tool call whose name and arguments have fully arrived."""

    call: ToolCall
    """The whole call."""
    index: int
    """Its position among the reply's tool calls."""


@dataclass(frozen=True, kw_only=True)
class StreamDone:
    """The last event of a stream: the whole reply, usage included."""

    response: LLMResponse
    """The assembled reply, the same as `complete()` would have returned."""

    @property
    def usage(self) -> Usage:
        """Tokens used by the call."""
        return self.response.usage


StreamEvent = TextDelta | ToolCallReady | StreamDone
"""What `LLMProvider.stream()` yields: text deltas, finished tool calls, then one `StreamDone`."""


@runtime_checkable
class LLMProvider(Protocol):
    """A chat model that can call tools.

    Implementations: `OpenAIProvider` (any OpenAI-compatible server) and `ScriptedLLM` (a
    scripted stand-in for tests and offline demos). Build one from the config with
    `from_config` (a module function: a Protocol cannot carry a constructor;
    `BaseLLMProvider.from_config` is the same function).
    """

    model: str
    """The model name sent with each request."""

    async def complete(
        self,
        messages: MessagesInput,
        *,
        tools: ToolsInput = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        **params: Any,
    ) -> LLMResponse:
        """Ask the model for one reply.

        Raises:
            LLMTransientError: a retryable failure outlasted the provider's retries.
            LLMError: any other failure.
        """
        ...

    def stream(
        self,
        messages: MessagesInput,
        *,
        tools: ToolsInput = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        **params: Any,
    ) -> AsyncIterator[StreamEvent]:
        """Ask for one reply and yield it as it arrives, ending with a `StreamDone`."""
        ...

    async def close(self) -> None:
        """Release connections; the provider must not be used afterwards."""
        ...


class BaseLLMProvider:
    """A base for providers: `stream()` built on `complete()`, a no-op `close()`, and
    async-context-manager support. Subclasses implement `complete()`."""

    model: str = ""

    @staticmethod
    def from_config(config: LLMConfig | AppConfig) -> LLMProvider:
        """The module function `from_config`, reachable from the class."""
        return from_config(config)

    async def complete(
        self,
        messages: MessagesInput,
        *,
        tools: ToolsInput = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        **params: Any,
    ) -> LLMResponse:
        """Ask the model for one reply; subclasses must implement it."""
        raise NotImplementedError(f"{type(self).__name__} must implement complete()")

    async def stream(
        self,
        messages: MessagesInput,
        *,
        tools: ToolsInput = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        **params: Any,
    ) -> AsyncIterator[StreamEvent]:
        """Yield `complete()`'s reply as one text delta, its tool calls, then `StreamDone`."""
        response = await self.complete(messages, tools=tools, tool_choice=tool_choice, **params)
        if response.text:
            yield TextDelta(text=response.text)
        for index, call in enumerate(response.tool_calls):
            yield ToolCallReady(call=call, index=index)
        yield StreamDone(response=response)

    async def close(self) -> None:
        """Nothing to release by default."""

    async def __aenter__(self) -> BaseLLMProvider:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


def tools_to_openai(tools: ToolsInput) -> list[dict[str, Any]]:
    """Turn `Tool` objects and schema dicts into OpenAI ``tools`` entries.

    Accepts anything with ``to_openai()``, OpenAI entries (``{"type": "function",
    "function": {...}}``) and bare schemas (``{"name", "description", "parameters"}``, as
    ``Tool.to_schema()`` returns).

    Raises:
        TypeError: an entry is none of these.
    """
    if tools is None:
        return []
    out: list[dict[str, Any]] = []
    for tool in tools:
        if hasattr(tool, "to_openai") and not isinstance(tool, Mapping):
            out.append(tool.to_openai())
        elif isinstance(tool, Mapping) and isinstance(tool.get("function"), Mapping):
            out.append(dict(tool))
        elif isinstance(tool, Mapping) and isinstance(tool.get("name"), str):
            function: dict[str, Any] = {"name": tool["name"]}
            if tool.get("description"):
                function["description"] = tool["description"]
            parameters = tool.get("parameters", tool.get("input_schema"))
            function["parameters"] = parameters or {"type": "object", "properties": {}}
            out.append({"type": "function", "function": function})
        else:
            raise TypeError(
                f"cannot offer {tool!r} as a tool: pass Tool objects, OpenAI tool dicts "
                f"({{'type': 'function', 'function': {{...}}}}) or schemas with a 'name'"
            )
    return out


def tool_choice_to_openai(choice: str | Mapping[str, Any] | None) -> Any:
    """OpenAI ``tool_choice``: ``auto``/``none``/``required`` pass through, a tool name
    forces that tool, a dict passes through."""
    if choice is None or isinstance(choice, Mapping):
        return dict(choice) if choice is not None else None
    if choice in ("auto", "none", "required"):
        return choice
    if isinstance(choice, str) and choice:
        return {"type": "function", "function": {"name": choice}}
    raise TypeError(
        f"tool_choice {choice!r} is invalid; use 'auto', 'none', 'required', a tool name or a dict"
    )


def from_config(config: LLMConfig | AppConfig) -> LLMProvider:
    """Build the provider that the ``llm:`` config section names.

    ``provider: scripted`` gives a `ScriptedLLM` replaying ``params.responses``;
    ``provider: openai`` (or no provider but a ``model``/``base_url``) gives an
    `OpenAIProvider`. A scripted model is never picked unless asked for by name.

    Raises:
        ConfigError: no provider is configured, or the chosen one lacks a setting.
    """
    from jianmu.config import AppConfig

    llm = config.llm if isinstance(config, AppConfig) else config
    params = dict(llm.params)
    if llm.provider == "scripted":
        from jianmu.llm.scripted import ScriptedLLM

        responses = params.pop("responses", None)
        if responses is None:
            raise ConfigError(
                "llm.provider is 'scripted' but llm.params.responses is not set; list the "
                "replies to replay (a string is a final answer, a list of {name, arguments} "
                "a tool-call turn), or set llm.provider: openai with llm.model and llm.base_url"
            )
        if not isinstance(responses, list):
            raise ConfigError(
                f"llm.params.responses must be a list of replies, got {responses!r}"
            )
        try:
            return ScriptedLLM(responses, model=llm.model or "scripted")
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"llm.params.responses: {exc}") from None
    if llm.provider == "openai" or (llm.provider is None and (llm.base_url or llm.model)):
        if not llm.model:
            raise ConfigError(
                "llm.model is not set; name the model the server should run, "
                "e.g. llm.model: gpt-4o-mini"
            )
        from jianmu.llm.openai import OpenAIProvider

        backoff = params.pop("retry_backoff", None)
        extra: dict[str, Any] = {} if backoff is None else {"retry_backoff": float(backoff)}
        return OpenAIProvider(
            llm.model,
            base_url=llm.base_url,
            api_key=llm.api_key,
            max_retries=llm.max_retries,
            timeout=llm.timeout,
            **extra,
            **params,
        )
    raise ConfigError(
        "no model provider is configured: set llm.provider in configs/jianmu.yaml to 'openai' "
        "(with llm.model and llm.base_url of any OpenAI-compatible server) or to 'scripted' "
        "(with llm.params.responses) for the offline stand-in"
    )


provider_from_config = from_config
"""Alias of `from_config`."""
