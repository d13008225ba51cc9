"""The `LLMProvider` protocol, its requests and results (`ChatRequest`, `LLMResponse`, `Usage`
from `jianmu.llm.messages`, stream events) and `from_config`, which builds the provider that
the ``llm:`` section of the config names (through the plug-in registry, `jianmu.plugins`); and
`SDKProvider`, what the providers built on a vendor SDK (OpenAI's, Anthropic's) share."""

from __future__ import annotations

import importlib
import json
import math
import os
import re
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Protocol, Self, TypeGuard, TypeVar, runtime_checkable
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from jianmu import plugins
from jianmu._secrets import MASK, filter_logs, redact_url, url_secrets
from jianmu.config import AppConfig, LLMConfig
from jianmu.errors import ConfigError, LLMError, MissingExtraError
from jianmu.llm._http import read_ahead, read_failed
from jianmu.llm._per_loop import PerLoop
from jianmu.llm.in_flight import watched
from jianmu.llm.messages import Message, Usage, coerce_messages
from jianmu.tools.calls import ToolCall

__all__ = (
    "CLIENT_OPTIONS",
    "LIMIT_REASONS",
    "BaseLLMProvider",
    "ChatRequest",
    "LLMProvider",
    "LLMResponse",
    "MessagesInput",
    "StreamDone",
    "StreamEvent",
    "TextDelta",
    "ToolCallReady",
    "ToolsInput",
    "Usage",
    "can_stream",
    "close_stream",
    "from_config",
    "from_name",
    "not_json",
    "provider_from_config",
    "read_wait",
    "replayed",
    "replays_stream",
    "reply_id",
    "sdk_timeout",
    "split_url",
    "takes_requests",
    "token_count",
    "tool_choice_to_openai",
    "tools_to_openai",
    "unreadable",
    "utf8_safe",
)

_T = TypeVar("_T")

MessagesInput = Sequence[Message | Mapping[str, Any]]
"""A history: `Message`s or OpenAI-style message dicts."""
ToolsInput = Iterable[Any] | None
"""Tools offered to the model: `Tool` objects (anything with ``to_openai()``) or schema dicts."""


LIMIT_REASONS = frozenset({"length", "max_tokens", "model_context_window_exceeded",
                           "model_length"})
"""Finish reasons that say the token limit ended the reply (OpenAI's ``length``; Mistral's
``model_length``, the model's context filled; Anthropic's raw ones too, for a provider that
passes them on as they came)."""


@dataclass(frozen=True, kw_only=True)
class LLMResponse:
    """One model reply: the assistant message, its tool calls and what it cost."""

    message: Message
    """The assistant message to append to the history."""
    tool_calls: tuple[ToolCall, ...] = ()
    """The tool calls it asks for; taken from ``message`` when left empty."""
    usage: Usage | None = field(default_factory=Usage)
    """Tokens used by this call; ``None`` when the server did not say (unknown, not 0)."""
    finish_reason: str | None = None
    """Why the model stopped: ``stop``, ``tool_calls``, ``length``..."""
    model: str = ""
    """The model that answered, as the server names it."""
    response_id: str = ""
    """The server's id of this reply (``chatcmpl-...``, ``msg_...``); empty if it gave none."""

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
    def cut_off(self) -> bool:
        """Whether the token limit ended the reply (its finish reason is in `LIMIT_REASONS`)."""
        return self.finish_reason in LIMIT_REASONS

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
    def usage(self) -> Usage | None:
        """Tokens used by the call; ``None`` when the server did not say."""
        return self.response.usage


StreamEvent = TextDelta | ToolCallReady | StreamDone
"""What `LLMProvider.stream()` yields: text deltas, finished tool calls, then one `StreamDone`."""


@dataclass(frozen=True, kw_only=True)
class ChatRequest:
    """One request to a model, normalised once: what `BaseLLMProvider.send` receives."""

    messages: tuple[Message, ...]
    """The history."""
    tools: tuple[dict[str, Any], ...] = ()
    """The tools offered, in the OpenAI shape."""
    tool_choice: Any = None
    """The ``tool_choice`` asked for, in the OpenAI shape."""
    params: dict[str, Any] = field(default_factory=dict)
    """Other request parameters."""

    @property
    def tool_names(self) -> list[str]:
        """Names of the tools offered."""
        return [t.get("function", {}).get("name", "") for t in self.tools]

    @classmethod
    def build(
        cls,
        messages: MessagesInput,
        tools: ToolsInput,
        tool_choice: str | Mapping[str, Any] | None,
        params: Mapping[str, Any],
    ) -> ChatRequest:
        """Normalise the arguments of `LLMProvider.complete`.

        Raises:
            TypeError: a message, a tool or ``tool_choice`` has no known shape.
        """
        return cls(
            messages=tuple(coerce_messages(messages)),
            tools=tuple(tools_to_openai(tools)),
            tool_choice=tool_choice_to_openai(tool_choice),
            params=dict(params),
        )


@runtime_checkable
class LLMProvider(Protocol):
    """A chat model that can call tools.

    Implementations: `OpenAIProvider` (any OpenAI-compatible server), `AnthropicProvider`
    (Claude's Messages API) and `ScriptedLLM` (a
    scripted stand-in for tests and offline demos), both `BaseLLMProvider`s, or any class
    with these methods. Build one from the config with `from_config` (a module function: a
    Protocol cannot carry a constructor; `BaseLLMProvider.from_config` is the same function).

    The method bodies here are the defaults of `BaseLLMProvider`, which subclasses this
    protocol: they normalise the arguments once into a `ChatRequest` and hand it to
    `BaseLLMProvider.send` / `send_stream`.
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
        if not isinstance(self, BaseLLMProvider):
            raise NotImplementedError(f"{type(self).__name__} must implement complete()")
        return await self.send(ChatRequest.build(messages, tools, tool_choice, params))

    async def stream(
        self,
        messages: MessagesInput,
        *,
        tools: ToolsInput = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        **params: Any,
    ) -> AsyncIterator[StreamEvent]:
        """Ask for one reply and yield it as it arrives, ending with a `StreamDone`."""
        if not isinstance(self, BaseLLMProvider):
            raise NotImplementedError(f"{type(self).__name__} must implement stream()")
        request = ChatRequest.build(messages, tools, tool_choice, params)
        events = self.send_stream(request)
        try:
            async for event in events:
                yield event
        finally:  # closed with this one, not by the loop's finalizer later: its connection
            await close_stream(events)

    async def close(self) -> None:
        """Release connections; the provider must not be used afterwards."""


class BaseLLMProvider(LLMProvider):
    """A base for providers: `complete()` and `stream()` normalise their arguments once into a
    `ChatRequest`; subclasses implement `send()` (or override `complete()`), and may
    implement `send_stream()` (default: `complete()`'s reply replayed). A no-op `close()` and
    async-context-manager support come with it."""

    model: str = ""
    provider_name: str = ""
    """Who serves the model, as traces name it (``gen_ai.provider.name``: ``openai``,
    ``anthropic``); empty when no known provider does."""

    @staticmethod
    def from_config(config: LLMConfig | AppConfig) -> LLMProvider:
        """The module function `from_config`, reachable from the class."""
        return from_config(config)

    async def send(self, request: ChatRequest) -> LLMResponse:
        """Send one normalised request and return the reply; subclasses implement it."""
        raise NotImplementedError(f"{type(self).__name__} must implement complete() or send()")

    async def send_stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Yield `complete()`'s reply as text deltas (`text_pieces`), its tool calls, then
        `StreamDone`."""
        response = await self.whole_reply(request)
        for piece in self.text_pieces(response.text):
            yield TextDelta(text=piece)
        for index, call in enumerate(response.tool_calls):
            yield ToolCallReady(call=call, index=index)
        yield StreamDone(response=response)

    def text_pieces(self, text: str) -> list[str]:
        """How `send_stream` cuts a whole reply's text into deltas: one piece by default."""
        return [text] if text else []

    def whole_reply(self, request: ChatRequest) -> Awaitable[LLMResponse]:
        """The reply that the base `send_stream` replays: `send`'s, or `complete()`'s when a
        subclass overrides that."""
        if takes_requests(self, params=request.params):
            return self.send(request)  # what `complete` would do, minus rebuilding the request
        return self.complete(
            request.messages, tools=request.tools, tool_choice=request.tool_choice,
            **request.params,
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


_ARGUMENT_NAMES = frozenset({"messages", "tools", "tool_choice"})


async def close_stream(events: AsyncIterator[Any]) -> None:
    """Close a stream that has an ``aclose`` (an async generator's), now."""
    close = getattr(events, "aclose", None)
    if close is not None:
        await close()


def can_stream(llm: Any) -> bool:
    """Whether ``llm`` streams: a `BaseLLMProvider` does (a reply it cannot stream is replayed
    as deltas), another provider when it has a ``stream`` of its own (not the protocol's)."""
    if isinstance(llm, BaseLLMProvider):
        return True
    method = getattr(type(llm), "stream", None)
    return callable(method) and method is not LLMProvider.stream


def replays_stream(llm: BaseLLMProvider) -> bool:
    """Whether ``llm.send_stream`` is the base one, which replays the whole reply
    (`BaseLLMProvider.whole_reply`) cut by ``text_pieces``: a caller that wants only the
    pieces and the reply may then ask for those two itself, without a stream's generator
    and its event objects in between."""
    return (type(llm).send_stream is BaseLLMProvider.send_stream
            and "send_stream" not in getattr(llm, "__dict__", {}))


def takes_requests(
    llm: object, *, stream: bool = False, params: Mapping[str, Any] | None = None
) -> TypeGuard[BaseLLMProvider]:
    """Whether ``llm.complete`` (``stream``: ``llm.stream``) is the base one, which only
    normalises its arguments into a `ChatRequest` for ``send`` (``send_stream``).

    A caller that already holds the request's parts in normal form (an agent node, every
    turn) may then build the request itself and hand it to ``send`` directly: the provider
    receives exactly what `complete` would have built. ``params`` are the extra request
    parameters, which must not repeat an argument's name (`complete` would refuse them).
    """
    # the class's order first: a subclass of a protocol's class is checked in Python, slowly,
    # and this runs on every model call
    if BaseLLMProvider not in type(llm).__mro__ and not isinstance(llm, BaseLLMProvider):
        return False
    name = "stream" if stream else "complete"
    if getattr(type(llm), name) is not getattr(LLMProvider, name):
        return False
    if name in getattr(llm, "__dict__", {}):  # replaced on the instance
        return False
    return not params or not _ARGUMENT_NAMES.intersection(params)


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

    ``llm.provider`` names a registered provider (`jianmu.plugins`): ``openai`` (also chosen
    when no provider but a ``model``/``base_url`` is set), ``anthropic``, ``scripted`` (a
    `ScriptedLLM` replaying ``params.responses``; never picked unless asked for by name) or a
    plug-in. Its class builds itself with ``from_llm_config(llm)``. With ``llm.fallback``, a
    `FallbackLLM` asks that model first, then each of the list in turn.

    Raises:
        ConfigError: no provider is configured, the name is not registered, or the chosen
            one lacks a setting.
        MissingExtraError: the provider needs an extra that is not installed.
    """
    llm = config.llm if isinstance(config, AppConfig) else config
    if llm.fallback:  # FallbackLLM builds the first model and those listed, each by this
        wrapper: LLMProvider = plugins.resolve("llm", "fallback").from_llm_config(llm)
        return wrapper
    name = llm.provider or ("openai" if llm.base_url or llm.model else None)
    if name is None:
        raise ConfigError(
            "no model provider is configured: set llm.provider in configs/jianmu.yaml to "
            "'openai' (with llm.model and llm.base_url of any OpenAI-compatible server), to "
            "'anthropic' (with llm.model and $ANTHROPIC_API_KEY) or to 'scripted' (with "
            "llm.params.responses) for the offline stand-in"
        )
    provider: LLMProvider = plugins.resolve("llm", name).from_llm_config(llm)
    return provider


provider_from_config = from_config
"""Alias of `from_config`."""


def from_name(name: str) -> LLMProvider:
    """The provider a ``"provider:model"`` name gives (``"openai:gpt-4o"``,
    ``"anthropic:claude-sonnet-4-5"``), as ``from_config`` builds it from the environment's
    keys and base URLs.

    Raises:
        ConfigError: the name has no provider part, or names no registered provider.
        MissingExtraError: the provider needs an extra that is not installed.
    """
    provider, _, model = name.partition(":")
    if not model or not provider:
        # "openai:" names its provider and no model: say which part is missing
        missing = "no model" if provider and name.count(":") else "no provider"
        raise ConfigError(
            f"the model {name!r} names {missing}: write 'openai:<model>' (any "
            "OpenAI-compatible server, with $OPENAI_BASE_URL) or 'anthropic:<model>', or give "
            "a provider object such as OpenAIProvider(...)"
        )
    if not plugins.is_registered("llm", provider):
        import difflib  # only on this error's path

        close = difflib.get_close_matches(provider.lower(), plugins.names("llm"), n=1)
        hint = f"; did you mean '{close[0]}:{model}'?" if close else ""
        raise ConfigError(f"no model provider named {provider!r} (in {name!r}){hint}")
    key, url = _NAMED_ENVIRONMENT.get(provider, (None, None))
    if key:  # the SDK first: a key set for a missing SDK would only lead to the next error
        try:
            importlib.import_module(provider)
        except ImportError:
            raise MissingExtraError(provider, provider) from None
    if key and url and not os.environ.get(key) and not os.environ.get(url):
        # without either the SDK would go to the vendor keyless: a 401 (or a connection error
        # offline) after every retry, naming no variable
        cls = "OpenAIProvider" if provider == "openai" else "AnthropicProvider"
        raise ConfigError(
            f"the model {name!r} needs an API key: set ${key} (or ${url} for a compatible "
            f"server that needs none), or give {cls}({model!r}, api_key=...)"
        )
    return from_config(LLMConfig(provider=provider, model=model))


_NAMED_ENVIRONMENT = {
    "openai": ("OPENAI_API_KEY", "OPENAI_BASE_URL"),
    "anthropic": ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
}
"""The key and the base URL each vendor SDK reads from the environment."""


# -- providers on a vendor SDK -----------------------------------------------------------------
# Argument checks, the SDK client's URL and closing, building from the ``llm:`` section, and
# reading a server's error text.

TRANSIENT_STATUSES = frozenset({408, 409, 429})
"""Statuses worth retrying, as the SDKs themselves treat them: timeout, lock conflict, rate
limit (5xx are transient too)."""
REQUEST_OPTIONS = ("extra_headers", "extra_query", "timeout")
"""Per-request options of the SDKs; every other parameter goes into the JSON body."""
CLIENT_OPTIONS = ("default_headers", "default_query", "http_client")
"""Settings of the SDK's client, not of a request: given among a provider's parameters (or in
``llm.params``), they go to its client, never into a request's JSON body (where a header's
key went to the server as text, and an HTTP client failed every request as not JSON)."""
_KEY_HEADERS = ("authorization", "proxy-authorization", "api-key", "x-api-key")


def check_common(model: Any, max_retries: Any, timeout: Any) -> None:
    """Refuse a model name, retry count or timeout that no provider can use."""
    if not isinstance(model, str) or not model.strip():
        raise ValueError(f"model must be a non-empty model name, got {model!r}")
    if not isinstance(max_retries, int) or max_retries < 0:
        raise ValueError(f"max_retries must be an integer >= 0, got {max_retries!r}")
    if not (_seconds(timeout) or _split(timeout)):
        raise ValueError(
            f"timeout must be a number of seconds > 0 (the longest wait for a byte: to "
            f"connect, to send, to read), or an httpx Timeout whose waits are each one or "
            f"None, got {timeout!r}")


_WAITS = ("connect", "read", "write", "pool")


def _seconds(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) and value > 0


def _split(timeout: Any) -> bool:
    """Whether ``timeout`` is an httpx ``Timeout``: a wait (or None) to connect, read..."""
    return all(hasattr(timeout, name) for name in _WAITS) and all(
        getattr(timeout, name) is None or _seconds(getattr(timeout, name)) for name in _WAITS)


def split_url(url: str | None, endpoint: str) -> tuple[str | None, dict[str, str]]:
    """``url`` without its query and without the ``endpoint`` path it may end with (a URL
    pasted whole, as Azure's portal shows it: ``.../chat/completions?api-version=...``), and
    that query's parameters, to send with each request: the SDKs join a path after the whole
    URL, query and all (``/d/?api-version=1chat/completions``)."""
    if url is None:
        return None, {}
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    bare = path.removesuffix(endpoint) if path.endswith(endpoint) else path
    if not parts.query and not parts.fragment and bare == path:
        return url, {}
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    return urlunsplit((parts.scheme, parts.netloc, bare, "", "")), query


def read_wait(timeout: Any) -> float:
    """The longest wait for a byte of the answer that a provider's ``timeout`` sets (seconds,
    or an httpx ``Timeout``'s read wait), which its timeout errors say."""
    if not _split(timeout):
        return float(timeout)
    if timeout.read is not None:
        return float(timeout.read)
    return max((float(getattr(timeout, name)) for name in _WAITS
                if getattr(timeout, name) is not None), default=math.inf)


def sdk_timeout(sdk: Any, timeout: Any) -> Any:
    """A provider's ``timeout`` for its ``sdk``'s client: seconds as they are, an httpx
    ``Timeout`` (connect apart from read...) as the SDK's own type (httpx2's, not httpx's)."""
    if not _split(timeout):
        return float(timeout)
    return sdk.Timeout(**{name: getattr(timeout, name) for name in _WAITS})


_SHOWN = 500
"""The most of a server's error text an error shows: a proxy's page may be 200 KB, written
into the run's result, its events and its checkpoint."""


def server_message(exc: Any, *secrets: str) -> str:
    """The error text a server put in its body, else the SDK's message; ``secrets`` taken
    out before it is cut short (a secret cut in two would show its first half)."""
    text = _without(_server_message(exc), secrets)
    return text if len(text) <= _SHOWN else f"{text[:_SHOWN]}... ({len(text)} characters)"


def _server_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        error = body.get("error", body)
        if isinstance(error, Mapping):
            for key in ("message", "detail", "msg"):
                if error.get(key):
                    return str(error[key])
        elif isinstance(error, str) and error:
            return error
        if body.get("detail"):
            return str(body["detail"])
    elif isinstance(body, str) and body:
        return body
    return str(getattr(exc, "message", None) or exc)


def reply_id(value: Any) -> str:
    """The id a server gave its reply, when it is printable text of a sane length; else ``""``
    (a trace keeps it: a server's junk stays out)."""
    if isinstance(value, str) and 0 < len(value) <= 256 and value.isprintable():
        return value
    return ""


def token_count(value: Any) -> int | None:
    """A token count a server sent, as an ``int``; ``None`` when it is not one (missing, a
    negative or fractional number, text that is not digits), so a broken count is unknown
    usage rather than a number that breaks the run's sums."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float):
        return int(value) if value.is_integer() and 0 <= value < 2**63 else None
    if isinstance(value, str) and 0 < len(value) <= 18 and value.isascii() and value.isdigit():
        return int(value)
    return None


def unreadable(where: str, what: str, reply: Any) -> LLMError:
    """The error for a reply that is not the API's shape: a proxy's HTML page, a JSON body of
    another kind; the reply is shown, cut short."""
    shown = repr(reply)
    if len(shown) > 200:
        shown = shown[:200] + "..."
    return LLMError(f"{where} answered with {what}: {shown}")


def not_json(where: str, exc: json.JSONDecodeError, secrets: tuple[str, ...] = ()) -> LLMError:
    """The error for a body or a stream event the SDK could not parse: what was wrong, where,
    and the text itself around that spot (cut short), so that nothing the server said is
    lost; ``secrets`` taken out of the whole text before it is cut (a secret cut at either
    end would show a part of it)."""
    doc = exc.doc if isinstance(exc.doc, str) else ""
    pos = exc.pos
    if secrets:  # the spot moves by what was taken out before it
        pos = len(_without(doc[:pos], secrets)) if pos <= len(doc) else pos
        doc = _without(doc, secrets)
    start = max(0, pos - 100)
    shown = repr(doc[start:pos + 100])
    shown = ("..." if start else "") + shown + ("..." if pos + 100 < len(doc) else "")
    return LLMError(f"{where} answered with text that is not JSON ({exc.msg} at character "
                    f"{exc.pos}): {shown}")


def not_utf8(where: str, exc: UnicodeDecodeError, secrets: tuple[str, ...] = ()) -> LLMError:
    """The error for a body that is not UTF-8, as JSON must be (a server that cut a character
    in two): where, and the text around the first byte that is not, its bytes shown as U+FFFD;
    ``secrets`` taken out of the text before it is cut."""
    raw = bytes(exc.object)
    before = _without(raw[:exc.start].decode("utf-8", "replace"), secrets)
    after = _without(raw[exc.start:].decode("utf-8", "replace"), secrets)
    shown = ("..." if len(before) > 100 else "") + repr(before[-100:] + after[:100]) + (
        "..." if len(after) > 100 else "")
    return LLMError(f"{where} answered with a body that is not UTF-8 ({exc.reason} at byte "
                    f"{exc.start}): {shown}")


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def utf8_safe(value: Any) -> Any:
    """``value`` (a request body) with every lone surrogate in its text replaced by U+FFFD.

    A JSON string may escape one (``"\\ud800"``) and a file name read by Python may hold one
    (``surrogateescape``), so a model's reply or a tool's output can bring one into the
    conversation; UTF-8 cannot encode it, so an SDK refuses to send every later request.
    """
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, Mapping):
        return {utf8_safe(k): utf8_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [utf8_safe(v) for v in value]
    return value


def replayed(response: LLMResponse) -> list[StreamEvent]:
    """A whole reply as a stream's events: its text, its tool calls, then `StreamDone`."""
    events: list[StreamEvent] = [TextDelta(text=response.text)] if response.text else []
    events += [ToolCallReady(call=call, index=i) for i, call in enumerate(response.tool_calls)]
    events.append(StreamDone(response=response))
    return events


async def sent(create: Callable[..., Awaitable[_T]], body: Mapping[str, Any]) -> _T:
    """``await create(**body)``; again with `utf8_safe(body)` when the SDK could not encode
    the body as UTF-8 (nothing was sent: the encoding fails while the request is built).
    Checked on that failure only, not on every request."""
    try:
        return await create(**body)
    except UnicodeEncodeError:
        return await create(**utf8_safe(body))


class SDKProvider(BaseLLMProvider):
    """A provider whose requests go through a vendor SDK client: one client per event loop
    (``_client`` is the running loop's), closed when that loop shuts down.

    A client and its connection pool belong to the loop they were used on, so a provider
    shared by runners on different loops (or by one ``asyncio.run`` after another) never
    hands a client to a loop it was not made on. Subclasses make a client in
    ``_make_client``, call ``_start_clients`` at the end of ``__init__`` and implement
    ``_send`` and ``_send_stream``: `send` and `send_stream` raise their errors with the API
    key and the URL's password taken out (`kept_secret`), whatever a server echoed.
    """

    _base_url: str = ""
    _secrets: tuple[str, ...] = ()
    _clients: PerLoop[Any]
    _spare: list[Any]
    _http_given: Any = None  # the user's own HTTP client: theirs to close, not ours
    _keys_in_headers: tuple[str, ...] = ()  # an Azure api-key, an Authorization's token

    async def send(self, request: ChatRequest) -> LLMResponse:
        """Ask the server for one reply (`_send`)."""
        watched()  # its HTTP client says when the request went out (`jianmu.llm.in_flight`)
        with self.kept_secret():
            return await self._send(request)

    async def send_stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Stream one reply (`_send_stream`)."""
        watched()
        events = self._send_stream(request)
        try:
            with self.kept_secret():
                async for event in events:
                    yield event
        finally:  # closed here, not by the loop's finalizer later: its connection goes back
            await close_stream(events)

    async def _send(self, request: ChatRequest) -> LLMResponse:
        """The reply; subclasses implement it (or override `send`)."""
        raise NotImplementedError(f"{type(self).__name__} must implement _send() or send()")

    async def _send_stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """The reply's events; by default the whole reply replayed, as a `BaseLLMProvider`'s."""
        async for event in BaseLLMProvider.send_stream(self, request):
            yield event

    async def whole_body(self, stream: Any) -> Any | None:
        """The JSON of a streamed request's answer that is a whole reply, not an event stream
        (a server or proxy that ignores ``stream``), the SDK's ``stream`` closed; ``None`` for
        an event stream, left to the SDK to read. However labelled, a reply is told by its
        first byte, read ahead and put back (no event stream starts with ``{`` or ``[``), as
        its text has it: decoded (a gzip-compressed reply, a proxy compressing JSON) and past
        any white space (a proxy keeping the connection alive while the model works). An
        event stream labelled JSON is one, and a whole reply labelled otherwise, an event
        stream included, or not at all (Go's servers call JSON they do not label
        ``text/plain``) is one too.

        Raises:
            LLMError: the body is not JSON, or not UTF-8.
        """
        response = getattr(stream, "response", None)
        if response is None:
            return None
        # its first chunk kept, for `no_events` to show; no BOM in an event stream or JSON
        body = read_ahead(response, events=True)
        response.stream = body
        if await self._read(body.lead()) not in (b"{", b"["):
            return None
        try:
            text = await self._read(body.whole())
        finally:
            await stream.close()
        try:
            return json.loads(text)
        except UnicodeDecodeError as exc:
            raise not_utf8(self.base_url, exc, self._secrets) from exc
        except ValueError as exc:
            raise unreadable(self.base_url, "text that is not JSON", text) from exc

    async def _read(self, reading: Awaitable[bytes]) -> bytes:
        """``await reading`` (of an answer's body, read here rather than by the SDK), the HTTP
        client's failure to read (a timeout, a reset) an `LLMTransientError` that says so, as
        the SDK's own would be: the answer had begun, so it is not asked again."""
        try:
            return await reading
        except Exception as exc:
            where = f"{self.base_url} (model {getattr(self, 'model', '?')!r})"
            error = read_failed(exc, where, getattr(self, "timeout", 0.0))
            if error is None:
                raise
            raise error from exc

    def no_events(self, stream: Any, what: str, where: str = "") -> LLMError:
        """The error for a streamed request whose answer held no event the SDK could read
        (a proxy's HTML page or plain-text error, sent with status 200): ``what`` it lacked,
        and the start of what came instead."""
        response = getattr(stream, "response", None)
        came = getattr(getattr(response, "stream", None), "seen", b"")
        text = f"{where or self.base_url} answered a streamed request without {what}"
        if not came:
            return LLMError(text)  # nothing came, or bytes not of the encoding it said
        shown = repr(self.secret_free(came.decode("utf-8", "replace")))
        return LLMError(f"{text}: {shown[:200] + '...' if len(shown) > 200 else shown}")

    @contextmanager
    def kept_secret(self) -> Iterator[None]:
        """Take the key and the URL's password out of an `LLMError` raised inside, and out of
        the exceptions it was raised from (a traceback prints them all): a server may echo
        the key in its error, a proxy the URL in its page."""
        try:
            yield
        except LLMError as exc:
            if self._secrets:
                _redact_chain(exc, self._secrets)
            raise

    def secret_free(self, text: str) -> str:
        """``text`` without the key and the URL's password."""
        return _without(text, self._secrets)

    def _make_client(self) -> Any:
        """A new SDK client; subclasses implement it."""
        raise NotImplementedError(f"{type(self).__name__} must implement _make_client()")

    def _client_settings(self, params: dict[str, Any], names: Sequence[str],
                         query: Mapping[str, str] | None = None) -> dict[str, Any]:
        """Take the SDK client's settings (``names``: `CLIENT_OPTIONS` and the SDK's own)
        out of ``params``, which go in each request's body; an ``http_client`` is kept apart.
        ``query`` (the base URL's, `split_url`) goes with each request, under
        ``default_query``'s own parameters.

        Raises:
            ValueError: ``default_headers`` or ``default_query`` is not a mapping.
        """
        taken = {name: params.pop(name) for name in names if name in params}
        for name in ("default_headers", "default_query"):
            value = taken.get(name)
            if value is not None and not (isinstance(value, Mapping) and all(
                    isinstance(k, str) for k in value)):
                raise ValueError(f"{name} must be a mapping of names to values (sent with "
                                 f"every request), got {value!r}")
        headers = taken.get("default_headers") or {}
        if not all(isinstance(v, str) for v in headers.values()):
            raise ValueError(f"default_headers' values must be text (a header's value), got "
                             f"{ {k: v for k, v in headers.items() if not isinstance(v, str)} }")
        if query:
            taken["default_query"] = {**query, **(taken.get("default_query") or {})}
        self._http_given = taken.pop("http_client", None)
        self._keys_in_headers = _header_keys(taken.get("default_headers")) + tuple(
            url_secrets("?" + urlencode(taken.get("default_query") or {})))
        return {name: value for name, value in taken.items() if value is not None}

    def _start_clients(self) -> None:
        """Make the first client now (the SDK checks its settings), kept for the first loop."""
        first = self._make_client()
        url = str(first.base_url)
        key = getattr(first, "api_key", None)
        # a stand-in (``not-needed``) is no secret, and replacing it would garble messages
        keys: tuple[str, ...] = (key,) if isinstance(key, str) and len(key) >= 8 and (
            key != "not-needed") else ()
        token = getattr(first, "auth_token", None)  # Anthropic's, for a gateway's bearer auth
        keys += self._keys_in_headers + ((token,) if isinstance(token, str) and len(token) >= 8
                                         else ())
        # longest first, so that one secret inside another goes whole; a few characters
        # replaced everywhere would garble every message
        secrets = {s for s in (*keys, *url_secrets(url)) if len(s) >= 4}
        self._secrets = tuple(sorted(secrets, key=len, reverse=True))
        # httpx2 (the SDKs' client) logs each request's URL, its query's keys too, at INFO,
        # and the SDKs their request options at DEBUG: kept out of any log a user turns on
        filter_logs(CLIENT_LOGGERS, self._secrets)
        self._base_url = redact_url(url)
        self._spare = [first]
        # the SDK's close closes its HTTP client: a user's own is left open, theirs to close
        close = _close_client if self._http_given is None else _left_open
        self._clients = PerLoop(self._next_client, close)

    def _next_client(self) -> Any:
        if self._spare:
            return self._spare.pop()
        if self._http_given is not None:
            # its pool's connections are the first loop's transports: on another loop they
            # failed the run ("Event loop is closed") and could not be closed at all
            raise ConfigError(
                f"{type(self).__name__}(http_client=...) runs on one event loop, the first it "
                "was used on, and this is another (a second asyncio.run, another thread's "
                "runner): give no http_client (the provider keeps a client per loop), or a "
                "provider per loop, each with its own http_client")
        return self._make_client()

    @property
    def _client(self) -> Any:
        """The running event loop's client."""
        return self._clients.get()

    @classmethod
    def _from_llm(cls, llm: LLMConfig, params: dict[str, Any], **extra: Any) -> Self:
        """The provider for ``llm``: its model, URL, key, retries and timeout, plus ``extra``
        settings and ``params`` sent with every request."""
        return cls(  # type: ignore[call-arg]
            llm.model,
            base_url=llm.base_url,
            api_key=llm.api_key,
            max_retries=llm.max_retries,
            timeout=llm.timeout,
            **extra,
            **params,
        )

    @property
    def base_url(self) -> str:
        """The server URL requests go to, its password (if any) shown as ``***``."""
        return self._base_url

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    async def close(self) -> None:
        """Close the running loop's HTTP client (other loops' close when those loops shut
        down); a later request opens a new one."""
        await self._clients.aclose()


async def _close_client(client: Any) -> None:
    await client.close()


async def _left_open(client: Any) -> None:
    """An SDK client on the user's own HTTP client holds nothing else: nothing to close."""


def _header_keys(headers: Any) -> tuple[str, ...]:
    """The keys that ``headers`` (the client's ``default_headers``) carry: an Azure
    ``api-key``, an ``Authorization`` and its token alone (a server may echo either)."""
    if not isinstance(headers, Mapping):
        return ()
    keys: list[str] = []
    for name, value in headers.items():
        if str(name).lower() in _KEY_HEADERS and isinstance(value, str):
            keys += [value, value.rsplit(" ", 1)[-1]]
    return tuple(key for key in keys if len(key) >= 8)


CLIENT_LOGGERS = ("httpx", "httpx2", "openai._base_client", "anthropic._base_client")
"""The loggers whose lines may quote a request's URL, headers or options (the SDKs of this
release send through ``httpx2``, which logs under its own name)."""


def _without(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` without ``secrets``, nor the first part of one that a reply shown cut short
    (`unreadable`'s ``...``) ends with. Only these: a server's own words stay as they are
    (``signature: Field required`` is no secret)."""
    for secret in secrets:
        text = text.replace(secret, MASK)
    for secret in secrets:
        for end in range(len(secret) - 1, 3, -1):
            if f"{secret[:end]}..." in text:
                text = text.replace(f"{secret[:end]}...", f"{MASK}...")
                break
    return text


def _redact_chain(exc: BaseException, secrets: tuple[str, ...]) -> None:
    """Take ``secrets`` out of the messages of ``exc`` and the exceptions behind it."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        try:
            text = str(current)
        except Exception:  # a message that cannot be shown shows no secret either
            text = ""
        if _without(text, secrets) != text:
            current.args = (_without(text, secrets),)
        for name in ("message", "body"):  # what the SDKs' errors keep beside their text
            value = getattr(current, name, None)
            if isinstance(value, str) and _without(value, secrets) != value:
                try:
                    setattr(current, name, _without(value, secrets))
                except (AttributeError, TypeError):
                    pass
        current = current.__cause__ or current.__context__
