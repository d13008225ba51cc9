"""`AnthropicProvider`: Claude models through Anthropic's Messages API.

The ``anthropic`` SDK (the ``anthropic`` extra) is imported when a provider is built, never
when this module is imported.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Self

from pydantic import BaseModel

from jianmu.errors import ConfigError, LLMError, LLMTransientError, MissingExtraError
from jianmu.llm._http import (
    broke_off,
    drained,
    http_client,
    last_event_kept,
    refused_unread,
    resent_once,
    silent,
    timed_out,
    told,
    too_long,
)
from jianmu.llm._pairs import PairedText, paired
from jianmu.llm._paused import MAX_PAUSES, RawBlocks, blocks_of, continued, joined
from jianmu.llm.in_flight import watch_stream
from jianmu.llm.messages import REASONING_BLOCKS, Message, messages_to_anthropic
from jianmu.llm.provider import (
    CLIENT_OPTIONS,
    REQUEST_OPTIONS,
    TRANSIENT_STATUSES,
    LLMResponse,
    SDKProvider,
    StreamDone,
    TextDelta,
    ToolCallReady,
    Usage,
    check_common,
    close_stream,
    not_json,
    not_utf8,
    read_wait,
    replayed,
    reply_id,
    sdk_timeout,
    sent,
    server_message,
    split_url,
    token_count,
    unreadable,
)
from jianmu.tools.calls import ToolCall

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic, Timeout

    from jianmu.config import LLMConfig
    from jianmu.llm.provider import ChatRequest, StreamEvent

__all__ = ("AnthropicProvider",)

_STATUS_HINTS = {
    401: "; check llm.api_key or $ANTHROPIC_API_KEY",
    403: "; check llm.api_key and its permissions",
    404: "; check llm.model and llm.base_url",
}
# Error types worth retrying, also when they arrive as an ``error`` event of a stream.
_TRANSIENT_TYPES = frozenset({"overloaded_error", "rate_limit_error", "api_error",
                              "timeout_error"})
_CACHE = {"type": "ephemeral"}
# Anthropic names a refused tool by its position: "tools.3.custom.input_schema: ..."
_TOOL_PATH = re.compile(r"\btools\.(\d+)\b")
_STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}
"""Anthropic stop reasons as the OpenAI finish reasons the rest of Jianmu reads."""


def _unversioned(base_url: str | None) -> str | None:
    """``base_url`` without a ``/v1`` it ends with: the SDK adds it to each path
    (``/v1/messages``), and a URL given as OpenAI's are (``https://gateway/v1``) asked
    ``/v1/v1/messages``, which no server has."""
    if base_url is None:
        return None
    trimmed = base_url.rstrip("/")
    return trimmed.removesuffix("/v1") if trimmed.endswith("/v1") else base_url


def _is_transport_error(exc: BaseException) -> bool:
    """Whether ``exc`` is the HTTP client's (httpx, httpcore) or the socket's."""
    package = type(exc).__module__.split(".", 1)[0]
    return isinstance(exc, OSError) or package in {"httpx", "httpx2", "httpcore", "httpcore2"}


def _error_type(exc: Any) -> str:
    """The ``error.type`` of an Anthropic error body (``overloaded_error``...), or ``""``."""
    body = getattr(exc, "body", None)
    error = body.get("error") if isinstance(body, Mapping) else None
    return str(error.get("type") or "") if isinstance(error, Mapping) else ""


def _usage(usage: Any, previous: Usage | None = None, *, whole: bool = False) -> Usage | None:
    """`Usage` from an Anthropic ``usage`` object (of a ``whole`` reply: both counts due);
    ``input_tokens`` counts cached ones too; ``None`` (unknown) when the server sent none or a
    count that is not one.

    In a stream, ``message_delta`` repeats the counts so far (cumulative): missing ones keep
    the ``previous`` values, and so does one below them (a compatible server's placeholder,
    SGLang's ``input_tokens: 0``: a cumulative count never falls).
    """
    if usage is None:
        return previous
    before = previous or Usage()
    broken = False

    def count(name: str, default: int) -> int:
        nonlocal broken
        value = getattr(usage, name, None)
        if value is None:  # a first report gives the input (a whole reply, both counts)
            broken = broken or (previous is None and name == "input_tokens") or (
                whole and name == "output_tokens")
            return default
        counted = token_count(value)
        broken = broken or counted is None
        return max(counted or 0, default) if previous is not None else counted or 0

    read = count("cache_read_input_tokens", before.cache_read_tokens)
    created = count("cache_creation_input_tokens", before.cache_creation_tokens)
    fresh = count("input_tokens", before.input_tokens - before.cache_read_tokens
                  - before.cache_creation_tokens)
    output = count("output_tokens", before.output_tokens)
    if broken:  # a count that is not one: the usage is unknown, not a wrong number
        return None
    return Usage(
        input_tokens=fresh + read + created,
        output_tokens=output,
        cache_read_tokens=read,
        cache_creation_tokens=created,
    )


def _stop_reason(reason: str | None) -> str | None:
    return _STOP_REASONS.get(reason, reason) if reason else None


def _reasoning(block: Any) -> dict[str, Any]:
    """A ``thinking`` or ``redacted_thinking`` block as plain data, to send back unchanged
    (`Message.reasoning`): its text and signature, or its encrypted data. A field a
    compatible server left out (an unsigned thinking block) stays out: the reply is not
    refused for what only the next request needs."""
    kind = block.type
    fields = ("thinking", "signature") if kind == "thinking" else ("data",)
    out: dict[str, Any] = {"type": kind}
    for name in fields:
        value = getattr(block, name, None)
        if isinstance(value, str):
            out[name] = value
    return out


def _call(block_id: str, name: str, arguments: Any) -> ToolCall:
    """A tool call from a ``tool_use`` block."""
    return ToolCall.from_dict({"id": block_id, "name": name, "input": arguments})


class AnthropicProvider(SDKProvider):
    """A Claude model behind Anthropic's Messages API, on the official ``anthropic`` SDK.

    Tools go out with their ``input_schema``, tool calls come back as ``tool_use`` blocks and
    results go back as ``tool_result`` blocks (consecutive results in one user turn). With
    ``prompt_caching`` (the default) the system prompt and the tool list carry a
    ``cache_control`` breakpoint, so later turns of a loop read them from the cache.

    Rate limits and overload (429, 529), other 5xx, timeouts and dropped connections are
    retried by the SDK, ``max_retries`` times with its exponential backoff (honouring
    ``retry-after``), then raise `LLMTransientError`; any other failure raises `LLMError`
    with the server's message at once, naming the tool when the server refused a tool's
    definition. A stream is retried only until its response starts; an answer that broke off
    midway is never asked again, and a kept-alive connection the server had closed is sent
    on again once, at once (`jianmu.llm._http`). A turn the API paused (``pause_turn``: a
    long turn of server tools) is continued as Anthropic documents, its reply sent back as
    the assistant's turn, and its parts given as one reply (`jianmu.llm._paused`).

    Args:
        model: model name sent with each request, e.g. ``claude-sonnet-4-5``.
        base_url: server URL; the SDK's default (``$ANTHROPIC_BASE_URL`` or Anthropic) when
            ``None``. A ``/v1`` it ends with is dropped: the SDK adds it to each path; so is
            the endpoint of one pasted whole (``.../v1/messages``), its query sent with each
            request.
        api_key: ``$ANTHROPIC_API_KEY`` when ``None``, else ``"not-needed"`` for local servers.
        max_retries: retries of transient failures.
        timeout: the longest wait, in seconds, for a byte: to connect, to send the request, and
            for each read of the answer (its first byte, then each next one). A read timeout,
            not a limit on the whole call: a server that keeps sending (a stream's events, a
            proxy's keep-alive bytes in a long generation) is never cut off by it. The whole
            call is limited by the agent node's timeout (``llm.timeout``,
            ``create_react_node(llm_timeout=...)``), or ``asyncio.timeout`` around a call
            made directly. An httpx ``Timeout`` sets the waits apart (``Timeout(60,
            connect=5)``: a shorter wait to connect); its errors say its read wait.
        max_tokens: the reply's length limit (the Messages API requires one); a request's
            ``max_tokens`` parameter overrides it.
        prompt_caching: put ``cache_control`` on the system prompt and the tool list.
        images: send the images of tool results (MCP screenshots, charts) as image parts;
            off for a model that reads no images (they stay as text stand-ins).
        **default_params: request parameters sent every time (``temperature``...), but for
            the SDK client's own settings, which go to the client: ``default_headers``,
            ``default_query``, ``auth_token`` (a gateway's bearer token, kept out of errors
            as the key is), and ``http_client``, your own ``httpx2.AsyncClient`` (its
            event hooks get Jianmu's; used on every event loop the provider runs on, and
            never closed by it: yours to close).

    Raises:
        MissingExtraError: the ``anthropic`` package is not installed.
        ValueError: an argument is out of range.
    """

    provider_name = "anthropic"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        max_retries: int = 3,
        timeout: float | Timeout = 60,
        max_tokens: int = 4096,
        prompt_caching: bool = True,
        images: bool = True,
        **default_params: Any,
    ) -> None:
        check_common(model, max_retries, timeout)
        if not isinstance(max_tokens, int) or max_tokens < 1:
            raise ValueError(f"max_tokens must be an integer >= 1, got {max_tokens!r}")
        self.model = model
        self.max_retries = max_retries
        self.timeout = read_wait(timeout)
        self._timeout = timeout  # seconds, or an httpx Timeout (connect apart from read...)
        self.max_tokens = max_tokens
        self.prompt_caching = bool(prompt_caching)
        self.images = bool(images)
        self.default_params = dict(default_params)
        if base_url is None:
            base_url = os.environ.get("ANTHROPIC_BASE_URL")
        base_url, query = split_url(base_url, "/v1/messages")
        self._client_options: dict[str, Any] = dict(
            base_url=_unversioned(base_url),
            api_key=api_key or os.environ.get("ANTHROPIC_API_KEY") or "not-needed",
            **self._client_settings(self.default_params, (*CLIENT_OPTIONS, "auth_token"),
                                    query),
        )
        if "auth_token" in self._client_options and api_key is None:
            del self._client_options["api_key"]  # the SDK takes one of them, and this is it
        self._start_clients()

    def _make_client(self) -> AsyncAnthropic:
        """An SDK client with the SDK's backoff, which honours ``retry-after``."""
        try:
            import anthropic
        except ImportError:
            raise MissingExtraError("anthropic", "anthropic") from None
        return anthropic.AsyncAnthropic(
            **self._client_options, max_retries=self.max_retries,
            timeout=sdk_timeout(anthropic, self._timeout),
            http_client=http_client(anthropic, self._http_given),
        )

    @classmethod
    def from_llm_config(cls, llm: LLMConfig) -> Self:
        """The provider that the ``llm:`` config section describes (``provider: anthropic``).

        ``llm.params.max_tokens`` and ``llm.params.prompt_caching`` (``false`` turns caching
        off) configure the provider; other params are sent with every request.

        Raises:
            ConfigError: ``llm.model`` is not set, or a param has the wrong type.
        """
        if not llm.model:
            raise ConfigError(
                "llm.model is not set; name the Claude model to use, "
                "e.g. llm.model: claude-sonnet-4-5"
            )
        params = dict(llm.params)
        extra: dict[str, Any] = {}
        if "max_tokens" in params:
            max_tokens = params.pop("max_tokens")
            if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
                raise ConfigError(f"llm.params.max_tokens must be an integer >= 1, got "
                                  f"{max_tokens!r}")
            extra["max_tokens"] = max_tokens
        if "prompt_caching" in params:
            caching = params.pop("prompt_caching")
            if not isinstance(caching, bool):
                raise ConfigError(f"llm.params.prompt_caching must be true or false, got "
                                  f"{caching!r}")
            extra["prompt_caching"] = caching
        return cls._from_llm(llm, params, **extra)

    # -- requests ----------------------------------------------------------------------------

    def output_format_params(
        self, *, name: str, schema: dict[str, Any], strict: bool
    ) -> dict[str, Any]:
        """The request parameter that asks for JSON of ``schema``: Anthropic's structured
        output (``output_config.format``), which constrains the reply to the schema.

        Raises:
            ConfigError: the installed ``anthropic`` SDK has no ``output_config`` yet.
        """
        import importlib.util

        if importlib.util.find_spec("anthropic.types.output_config_param") is None:
            raise ConfigError(
                f"the installed anthropic SDK has no structured output (output_config), which "
                f"output_mode='native' needs for {self.model!r}; upgrade it (pip install -U "
                "anthropic) or use output_mode='tool'"
            )
        return {"output_config": {"format": {"type": "json_schema", "schema": schema}}}

    def _request(self, request: ChatRequest) -> dict[str, Any]:
        """The ``messages.create`` arguments for ``request``."""
        merged = {**self.default_params, **request.params}
        options = {k: merged.pop(k) for k in REQUEST_OPTIONS if k in merged}
        body = dict(merged.pop("extra_body", None) or {})
        system, messages = messages_to_anthropic(request.messages, images=self.images)
        max_tokens = merged.pop("max_tokens", None)
        alias = merged.pop("max_completion_tokens", None)  # OpenAI's newer name for it
        out: dict[str, Any] = {
            "model": merged.pop("model", self.model),
            "max_tokens": max_tokens or alias or self.max_tokens,
            "messages": merge_turns(messages),
            **options,
        }
        if system:
            out["system"] = (
                [{"type": "text", "text": system, "cache_control": dict(_CACHE)}]
                if self.prompt_caching else system
            )
        if request.tools:
            tools = [anthropic_tool(t) for t in request.tools]
            if self.prompt_caching:  # a breakpoint on the last tool caches the whole list
                tools[-1]["cache_control"] = dict(_CACHE)
            out["tools"] = tools
            choice = anthropic_tool_choice(request.tool_choice)
            if choice is not None:
                out["tool_choice"] = choice
        elif request.tool_choice is not None:
            raise ValueError(
                f"tool_choice={request.tool_choice!r} was given but no tools; pass tools=... "
                "or drop it"
            )
        else:
            called = _called_tools(messages)
            if called:
                # Anthropic refuses a history of tool_use blocks in a request that defines no
                # tools: those called are offered by name (any input), never to be called again
                out["tools"] = called
                out["tool_choice"] = {"type": "none"}
        if _unthought_tool_use(out["messages"], merged.get("thinking")):
            # a turn of this tool loop came from a model that did not think (a fallback's
            # other provider): its thinking cannot come back, and Anthropic refuses the loop
            # with thinking on; it goes on without, until the next message of the user
            merged.pop("thinking")
        stop = merged.pop("stop", None)
        if stop:
            merged.setdefault("stop_sequences", [stop] if isinstance(stop, str) else list(stop))
        # Every other parameter goes in the body, so that the SDK never refuses one.
        body.update(merged)
        if body:
            out["extra_body"] = body
        return out

    @contextmanager
    def _map_errors(
        self, tools: Sequence[Mapping[str, Any]] = (), *, midstream: bool = False
    ) -> Iterator[None]:
        """Translate the SDK's exceptions into `LLMError` / `LLMTransientError`."""
        import anthropic

        where = f"{self.base_url} (model {self.model!r})"
        tries = "" if midstream else (
            f" after {self.max_retries + 1} attempt(s) (max_retries={self.max_retries})"
        )

        def refused(status: int, kind: str, said: str) -> LLMError:
            if midstream:  # an ``error`` event in a stream that had started (HTTP 200)
                # a gateway's error event may give no kind: its message alone, not ": ..."
                text = f"the stream from {where} failed midway: " + (
                    f"{kind}: {said}" if kind else said)
            else:
                text = f"HTTP {status} from {where}: {said}"
            if status in TRANSIENT_STATUSES or status >= 500 or kind in _TRANSIENT_TYPES:
                error: LLMError = LLMTransientError(text + tries)
            else:
                error = too_long(status, said, text) or LLMError(
                    text + _tool_hint(text, tools) + _STATUS_HINTS.get(status, ""))
            if not midstream:  # an error event in a stream came with the stream's 200
                error.status_code = status
            return error

        try:
            yield
        except anthropic.APIStatusError as exc:
            raise refused(exc.status_code, _error_type(exc),
                          server_message(exc, *self._secrets)) from exc
        except anthropic.APIConnectionError as exc:
            unread = refused_unread(exc, self.timeout)
            if unread is not None:  # an error status whose body could not be read
                raise refused(unread.status, "", unread.said) from exc
            cause = exc.__cause__ or exc
            if timed_out(exc) or isinstance(exc, anthropic.APITimeoutError):  # no byte came
                raise LLMTransientError(silent(where, self.timeout, begun=broke_off(exc))
                                        + ("" if broke_off(exc) else tries)) from exc
            if broke_off(exc):  # never sent again: the server answered, and billed it
                raise LLMTransientError(
                    f"the answer from {where} broke off midway (not asked again): "
                    f"{told(cause)}"
                ) from exc
            raise LLMTransientError(
                f"connection to {where} failed{tries}: {told(cause)}"
            ) from exc
        except anthropic.AnthropicError as exc:
            raise LLMError(f"{where}: {server_message(exc, *self._secrets)}") from exc
        except json.JSONDecodeError as exc:  # a body or an event the SDK could not parse
            raise not_json(where, exc, self._secrets) from exc
        except UnicodeDecodeError as exc:  # a whole body (a stream is read with U+FFFD)
            raise not_utf8(where, exc, self._secrets) from exc
        except Exception as exc:
            # The SDK does not wrap a connection that breaks while a stream is being read.
            if not midstream or not _is_transport_error(exc):
                raise
            if timed_out(exc):
                raise LLMTransientError(silent(where, self.timeout, begun=True)) from exc
            raise LLMTransientError(
                f"the stream from {where} failed midway: {told(exc)}"
            ) from exc

    async def _send(self, request: ChatRequest) -> LLMResponse:
        """Ask the model for one reply.

        Raises:
            LLMTransientError: a transient failure outlasted ``max_retries``.
            LLMError: the server refused the request.
        """
        body = self._request(request)
        create: Any = self._client.messages.create
        parts: list[LLMResponse] = []
        while True:
            with self._map_errors(request.tools):
                reply = await resent_once(functools.partial(sent, create, body))
            parts.append(self._reply(reply))
            if getattr(reply, "stop_reason", None) != "pause_turn":
                return joined(parts)
            body = self._continued(body, blocks_of(reply), len(parts))

    def _reply(self, reply: Any) -> LLMResponse:
        """The reply a whole message holds."""
        where = self.base_url or "the Anthropic API"
        # the SDK hands over whatever a 200 carried: a proxy's HTML page is a str
        content = getattr(reply, "content", None)
        error = getattr(reply, "error", None)
        # an error body, with its ``type`` or without (a proxy's ``{"error": {...}}``)
        if isinstance(error, Mapping) and (getattr(reply, "type", None) == "error"
                                           or not content):
            error_type = str(error.get("type", ""))
            text = f"{where} answered with an error: {error_type}: {error.get('message', '')}"
            raise (LLMTransientError if error_type in _TRANSIENT_TYPES else LLMError)(text)
        if not isinstance(reply, BaseModel) or getattr(reply, "type", None) not in (
            None, "message"
        ) or not isinstance(content, list):
            raise unreadable(where, "something other than a message", reply)
        texts: list[str] = []
        calls: list[ToolCall] = []
        reasoning: list[dict[str, Any]] = []
        for block in content:
            kind = getattr(block, "type", None)
            if kind == "text":
                if not isinstance(block.text, str):
                    raise unreadable(where, "a text block that is not text", block)
                texts.append(block.text)
            elif kind == "tool_use":
                calls.append(_call(block.id, block.name, block.input))
            elif kind in REASONING_BLOCKS:
                reasoning.append(_reasoning(block))
        text = "".join(texts)
        return LLMResponse(
            message=Message(role="assistant", content=text or None, tool_calls=calls,
                            reasoning=reasoning),
            usage=_usage(getattr(reply, "usage", None), whole=True),
            finish_reason=_stop_reason(getattr(reply, "stop_reason", None)),
            model=getattr(reply, "model", None) or self.model,
            response_id=reply_id(getattr(reply, "id", None)),
        )

    async def _send_stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Stream one reply: text deltas, each tool call once its block ends, then
        `StreamDone`.

        A tool call's input arrives as ``input_json_delta`` fragments, joined when its
        ``content_block_stop`` comes; usage comes from ``message_start`` and
        ``message_delta``.

        Raises:
            LLMTransientError: the request failed transiently past ``max_retries``, or the
                stream broke, reported an error or ended without ``message_stop`` midway
                (not retried: the server answered).
            LLMError: the server refused the request.
        """
        body = self._request(request)
        parts: list[LLMResponse] = []
        while True:
            paused = RawBlocks()
            once = self._stream_once(request, body, paused)
            try:
                async for out in once:
                    if isinstance(out, StreamDone):
                        parts.append(out.response)
                    elif isinstance(out, ToolCallReady):  # numbered across the turn's parts
                        yield ToolCallReady(call=out.call, index=out.index + sum(
                            len(part.tool_calls) for part in parts))
                    else:
                        yield out
            finally:  # closed with this one: its connection goes back now
                await close_stream(once)
            if parts[-1].finish_reason != "pause_turn":
                yield StreamDone(response=joined(parts))
                return
            body = self._continued(body, paused.blocks(), len(parts))

    def _continued(self, body: dict[str, Any], blocks: list[dict[str, Any]],
                   pauses: int) -> dict[str, Any]:
        """The request that continues a turn paused ``pauses`` times (`continued`).

        Raises:
            LLMError: the turn was paused `MAX_PAUSES` times.
        """
        if pauses >= MAX_PAUSES:
            raise LLMError(f"{self.base_url or 'the Anthropic API'} (model {self.model!r}) "
                           f"paused the turn {pauses} times (pause_turn) without finishing it")
        return continued(body, blocks)

    async def _stream_once(self, request: ChatRequest, body: dict[str, Any],
                           paused: RawBlocks) -> AsyncIterator[StreamEvent]:
        """Stream one message: its events, then `StreamDone`; its content blocks go to
        ``paused``, to be sent back if the turn was paused."""
        create: Any = self._client.messages.create
        with self._map_errors(request.tools):
            events = await resent_once(lambda: sent(create, {**body, "stream": True}))
            whole = await self.whole_body(events)
        last_event_kept(events)
        _name_events(events)
        if whole is not None:  # a server that ignored ``stream``: its whole reply, replayed
            import anthropic

            reply = anthropic.types.Message.construct(**whole) if isinstance(
                whole, dict) else whole
            paused.extend(blocks_of(reply))
            for out in replayed(self._reply(reply)):
                yield out
            return
        where = self.base_url or "the Anthropic API"
        assembler = _StreamAssembler(self.model, where)
        watch_stream(assembler)
        each = aiter(events)
        try:
            with self._map_errors(request.tools, midstream=True):
                async for event in each:
                    paused.feed(event)
                    for out in assembler.feed(event):
                        yield out
                    if assembler.stopped:
                        # nothing after ``message_stop`` is the message's: a body that goes on
                        # (a proxy that keeps the stream open) is not waited on
                        break
            await drained(events)
        except LLMTransientError as exc:
            # broken after ``message_stop`` (a proxy that drops the connection): the
            # message is whole
            if not assembler.stopped or not broke_off(exc):
                raise
        finally:
            await each.aclose()
            await events.close()
        if not assembler.started:  # an answer that was no event stream (an HTML page...)
            raise self.no_events(events, "a message_start event", where)
        if not assembler.stopped:
            # the body ended cleanly but the message had not (a proxy's timeout, a server
            # that lost its worker): its text so far is no answer, and was billed
            raise LLMTransientError(
                f"the stream from {where} (model {self.model!r}) ended before the reply did "
                "(no message_stop): an incomplete reply, not asked again")
        for out in assembler.flush():
            yield out
        yield StreamDone(response=assembler.response())


def _name_events(events: Any) -> None:
    """Name each event of ``events`` (the SDK's stream) that came without an ``event:``
    line by its data's ``type``, as Anthropic names them: the SDK skips an unnamed event, so
    a server that sends only ``data:`` lines (some compatible gateways) streamed nothing, and
    its reply was lost. An unnamed event whose data is not a JSON object is named
    ``unnamed``: the SDK then reads it, and its error shows the text."""
    read = getattr(events, "_iter_events", None)
    if read is None:  # an SDK that reads its events otherwise: left as it is
        return

    async def named() -> AsyncIterator[Any]:
        async for sse in read():
            if sse.event is None and sse.data:
                try:
                    data = json.loads(sse.data)
                except ValueError:
                    data = None
                kind = data.get("type") if isinstance(data, dict) else None
                sse = type(sse)(event=kind if isinstance(kind, str) and kind else "unnamed",
                                data=sse.data, id=sse.id, retry=sse.retry)
            yield sse

    events._iter_events = named


def _tool_hint(text: str, tools: Sequence[Mapping[str, Any]]) -> str:
    """``; the definition of tool 'x' was refused`` when the error points into ``tools``."""
    found = _TOOL_PATH.search(text)
    if found is None or not tools:
        return ""
    index = int(found.group(1))
    if index >= len(tools):
        return ""
    name = anthropic_tool(tools[index])["name"]
    return (
        f"; the server refused the definition of tool {name!r} (tools[{index}]): fix its "
        "input schema or leave the tool out"
    )


class _StreamAssembler:
    """Collects the events of a streamed message into text, whole tool calls and usage."""

    def __init__(self, model: str, where: str) -> None:
        self.model = model
        self.response_id = ""
        self.where = where
        self.text: list[str] = []
        self.blocks: dict[int, dict[str, Any]] = {}
        self.calls: dict[tuple[int, int], ToolCall] = {}  # by block index, then arrival
        self.thinking: dict[int, dict[str, Any]] = {}  # reasoning blocks by index, in order
        # their deltas' text (thinking, signature) by block index and field, joined when read:
        # added to one string delta by delta, a long thought was copied quadratically
        self.thought_pieces: dict[tuple[int, str], list[str]] = {}
        self.stop_reason: str | None = None
        self.usage: Usage | None = None  # unknown until the server says
        self.usage_broken = False  # a count that was not one: unknown for good
        # ``message_start`` counts the output so far (a token or none): the reply's count
        # is ``message_delta``'s; without it the output is unknown, not that placeholder
        self.output_counted = False
        self.started = False
        self.stopped = False  # the message's end came (``message_stop``)
        self._paired = PairedText()  # an emoji's JSON escapes split between two deltas

    def received(self) -> tuple[Usage | None, int]:
        """The usage sent so far (``message_start``'s prompt count) and the characters of the
        reply received (a stopped call's count, `jianmu.llm.in_flight`)."""
        self._join_thoughts()
        chars = sum(map(len, self.text)) + sum(
            len(b["name"]) + sum(map(len, b["json"])) for b in self.blocks.values()) + sum(
            len(c.name) + len(c.arguments_json()) for c in self.calls.values()) + sum(
            len(t.get("thinking") or "") for t in self.thinking.values())
        return self.usage, chars

    def feed(self, event: Any) -> list[StreamEvent]:
        kind = getattr(event, "type", None)
        if kind == "message_start":
            self.started = True
            message = getattr(event, "message", None)
            model = getattr(message, "model", None)
            self.model = model if isinstance(model, str) and model else self.model
            self.response_id = reply_id(getattr(message, "id", None))
            sent_usage = getattr(message, "usage", None)
            self.usage = _usage(sent_usage)
            self.usage_broken = sent_usage is not None and self.usage is None
        elif kind == "content_block_start":
            block = event.content_block
            block_type = getattr(block, "type", None)
            if block_type == "tool_use":
                # a block started again at an open block's index ends that one, not lose it
                ready: list[StreamEvent] = (
                    [self._finished(event.index)] if event.index in self.blocks else [])
                self.blocks[event.index] = {"id": block.id, "name": block.name, "json": [],
                                            "input": getattr(block, "input", None)}
                return ready
            if block_type in ("thinking", "redacted_thinking"):  # (again at an index: new)
                for name in ("thinking", "signature"):
                    self.thought_pieces.pop((event.index, name), None)
                self.thinking[event.index] = (  # a thinking block's text and signature follow
                    {"type": "thinking", "thinking": "", "signature": "", **_reasoning(block)}
                    if block_type == "thinking" else _reasoning(block))
            elif block_type == "text" and getattr(block, "text", ""):
                if not isinstance(block.text, str):
                    raise unreadable(self.where, "a text block that is not text", block)
                return self._said(block.text)
        elif kind == "content_block_delta":
            delta = event.delta
            if delta.type == "text_delta" and delta.text:
                if not isinstance(delta.text, str):
                    raise unreadable(self.where, "a text delta that is not text", delta)
                return self._said(delta.text)
            if delta.type == "input_json_delta" and event.index in self.blocks:
                self.blocks[event.index]["json"].append(delta.partial_json or "")
            elif delta.type in ("thinking_delta", "signature_delta") and (
                event.index in self.thinking
            ):
                name = "thinking" if delta.type == "thinking_delta" else "signature"
                piece = getattr(delta, name, None)
                if not isinstance(piece, str):
                    raise unreadable(self.where, f"a {delta.type} that is not text", delta)
                self.thought_pieces.setdefault((event.index, name), []).append(piece)
        elif kind == "content_block_stop" and event.index in self.blocks:
            return [self._finished(event.index)]
        elif kind == "message_stop":
            self.stopped = True
        elif kind == "message_delta":
            self.stop_reason = getattr(event.delta, "stop_reason", None) or self.stop_reason
            if getattr(event, "usage", None) is not None:
                self.usage = _usage(event.usage, self.usage)
                self.usage_broken = self.usage_broken or self.usage is None
                self.output_counted = self.output_counted or getattr(
                    event.usage, "output_tokens", None) is not None
        return []

    def _said(self, piece: str) -> list[StreamEvent]:
        """A piece of the reply's text, as a delta (none while it holds only half a
        character: `PairedText`)."""
        text = self._paired.piece(piece)
        if not text:
            return []
        self.text.append(text)
        return [TextDelta(text=text)]

    def _finished(self, index: int) -> ToolCallReady:
        """The tool call of block ``index``, whose input is all there."""
        block = self.blocks.pop(index)
        raw = paired("".join(block["json"]))  # an emoji's escapes split between deltas
        given = block["input"]
        # Anthropic starts a block with ``input: {}`` and streams the input as JSON
        # fragments; a compatible server that gives it whole at the start streams none
        arguments = given if not raw.strip() and given else _decode_input(raw)
        call = self.calls[index, len(self.calls)] = _call(block["id"], block["name"], arguments)
        return ToolCallReady(call=call, index=len(self.calls) - 1)

    def flush(self) -> list[StreamEvent]:
        """The text still held (half a character: `PairedText`), and the calls of tool blocks
        that a compatible server never closed (no ``content_block_stop``): the message's end
        ends them, else they are lost."""
        rest = self._paired.rest()
        held: list[StreamEvent] = self._said(rest) if rest else []
        return [*held, *(self._finished(index) for index in sorted(self.blocks))]

    def _join_thoughts(self) -> None:
        """Add the thinking deltas held apart to their blocks."""
        for (index, name), pieces in self.thought_pieces.items():
            block = self.thinking[index]
            if isinstance(block.get(name), str):  # (not a redacted block's: it has no text)
                block[name] += "".join(pieces)
        self.thought_pieces.clear()

    def response(self) -> LLMResponse:
        text = "".join(self.text)
        self._join_thoughts()
        reasoning = [_thought(block) for _, block in sorted(self.thinking.items())]
        calls = [call for _, call in sorted(self.calls.items())]  # in the blocks' order
        return LLMResponse(
            message=Message(role="assistant", content=text or None, tool_calls=calls,
                            reasoning=reasoning),
            usage=None if self.usage_broken or not self.output_counted else self.usage,
            finish_reason=_stop_reason(self.stop_reason),
            model=self.model,
            response_id=self.response_id,
        )


def _thought(block: dict[str, Any]) -> dict[str, Any]:
    """A thinking block with an emoji whose escapes a server split between two deltas one
    character again (signed: it goes back as it was written)."""
    text = block.get("thinking")
    if not isinstance(text, str) or paired(text) is text:
        return block
    return {**block, "thinking": paired(text)}


def _decode_input(raw: str) -> Any:
    """A tool_use input from its JSON text: ``{}`` when empty, the raw text when broken."""
    if not raw.strip():
        return {}
    try:
        return json.loads(raw)
    except ValueError:
        return raw

# -- the request format ------------------------------------------------------------------------
# Tool definitions, ``tool_choice`` and turns in Anthropic's shape, from the OpenAI shapes a
# `ChatRequest` holds.


def anthropic_tool(entry: Mapping[str, Any]) -> dict[str, Any]:
    """An Anthropic tool definition (``Tool.to_anthropic()``'s shape) from a `ChatRequest`
    entry in the OpenAI shape."""
    function = entry.get("function") if isinstance(entry.get("function"), Mapping) else entry
    assert isinstance(function, Mapping)
    out: dict[str, Any] = {"name": function.get("name", "")}
    if function.get("description"):
        out["description"] = function["description"]
    schema = function.get("parameters", function.get("input_schema"))
    out["input_schema"] = dict(schema) if schema else {"type": "object", "properties": {}}
    return out


def _called_tools(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Stand-ins of the tools the ``tool_use`` blocks of ``messages`` call, one per name."""
    names = dict.fromkeys(
        block.get("name") or "tool" for message in messages
        if message["role"] == "assistant" and isinstance(message["content"], list)
        for block in message["content"] if block.get("type") == "tool_use"
    )
    return [{"name": name, "description": "A tool called earlier in the conversation.",
             "input_schema": {"type": "object"}} for name in names]


def anthropic_tool_choice(choice: Any) -> dict[str, Any] | None:
    """Anthropic's ``tool_choice`` from the OpenAI shape a `ChatRequest` holds."""
    if choice is None:
        return None
    if choice in ("auto", "none"):
        return {"type": choice}
    if choice == "required":
        return {"type": "any"}
    if isinstance(choice, Mapping):
        function = choice.get("function")
        if isinstance(function, Mapping) and function.get("name"):
            return {"type": "tool", "name": function["name"]}
        if choice.get("type") in ("auto", "any", "tool", "none"):
            return dict(choice)
    raise ValueError(f"tool_choice {choice!r} has no Anthropic equivalent")


EARLIER_TURNS = "(The conversation's earlier turns are left out.)"
"""The user turn put first when a history begins with the assistant's (one cut short by a
history processor): the Messages API refuses a conversation that does not begin with the user."""


GO_ON = "(Go on.)"
"""The user turn put last when a conversation is empty or ends with the assistant's (a skill
or an agent run after an answer, with no new message): the Messages API refuses no messages,
and Claude 4.6 and later (and thinking) a request that ends with an assistant turn."""

EMPTY_MESSAGE = "(an empty message)"
"""The text of a user turn that said nothing (``""``, only spaces): the Messages API refuses
an empty turn and a text block of no text."""


def merge_turns(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Join consecutive turns of one role (tool results then a user note, for one), drop
    empty assistant turns and blank text, and begin and end with a user turn: the Messages API
    wants alternating, non-empty turns, the first and last the user's, and no text block
    without text."""
    out: list[dict[str, Any]] = []
    for message in messages:
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        blocks = [b for b in blocks if not _blank(b)]
        if not blocks:
            if message["role"] == "assistant" or (out and out[-1]["role"] == "user"):
                continue
            blocks = [{"type": "text", "text": EMPTY_MESSAGE}]
        content = blocks[0]["text"] if isinstance(content, str) else blocks
        if out and out[-1]["role"] == message["role"]:
            previous = out[-1]["content"]
            if isinstance(previous, str):
                previous = out[-1]["content"] = [{"type": "text", "text": previous}]
            previous.extend(blocks)
        else:
            out.append({"role": message["role"], "content": content})
    if out and out[0]["role"] != "user":
        out.insert(0, {"role": "user", "content": EARLIER_TURNS})
    if not out or out[-1]["role"] != "user":
        out.append({"role": "user", "content": GO_ON})
    return out


def _unthought_tool_use(messages: list[dict[str, Any]], thinking: Any) -> bool:
    """Whether thinking is on and an assistant turn that used a tool since the user's last
    message (tool results aside) does not begin with its thinking, as Anthropic requires."""
    if not isinstance(thinking, Mapping) or thinking.get("type") == "disabled":
        return False
    for message in reversed(messages):
        content = message["content"]
        blocks = content if isinstance(content, list) else [{"type": "text"}]
        if message["role"] == "user":
            if any(b.get("type") != "tool_result" for b in blocks):
                return False  # the user's message: the loop began after it
            continue
        uses = any(b.get("type") == "tool_use" for b in blocks)
        if uses and blocks[0].get("type") not in REASONING_BLOCKS:
            return True
    return False


def _blank(block: Any) -> bool:
    """Whether ``block`` is a text block without text (or only spaces)."""
    if not isinstance(block, Mapping) or block.get("type") != "text":
        return False
    text = block.get("text")
    return not isinstance(text, str) or not text.strip()
