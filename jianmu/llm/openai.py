"""`OpenAIProvider`: any OpenAI-compatible chat server (OpenAI, vLLM, llama.cpp, Ollama...).

The ``openai`` SDK (the ``openai`` extra) is imported when a provider is built, never when
this module is imported.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Self, TypeVar

from pydantic import BaseModel, ValidationError

from jianmu.errors import ConfigError, LLMError, LLMTransientError, MissingExtraError
from jianmu.llm._http import (
    broke_off,
    drained,
    http_client,
    last_event_kept,
    refused_unread,
    silent,
    timed_out,
    told,
    too_long,
    unanswered,
)
from jianmu.llm._pairs import PairedText, paired
from jianmu.llm.in_flight import watch_stream
from jianmu.llm.messages import (
    OPENAI_REASONING_FIELDS,
    REASONING_DETAILS,
    Message,
    messages_to_openai,
)
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
    from openai import AsyncOpenAI, Timeout

    from jianmu.config import LLMConfig
    from jianmu.llm.provider import ChatRequest, StreamEvent

__all__ = ("OpenAIProvider",)

_log = logging.getLogger(__name__)
_T = TypeVar("_T")
_CLIENT_OPTIONS = (*CLIENT_OPTIONS, "organization", "project")
_STATUS_HINTS = {
    401: "; check llm.api_key",
    403: "; check llm.api_key and its permissions",
    404: "; check llm.model and llm.base_url",
}


class OpenAIProvider(SDKProvider):
    """A chat model behind an OpenAI-compatible ``/chat/completions`` endpoint.

    Uses the official SDK's ``AsyncOpenAI`` with its own retries off: 429, 408, 409, 5xx,
    timeouts and dropped connections are retried here, ``max_retries`` times with
    exponential backoff (``retry_backoff * 2**attempt`` seconds, or longer when the server
    asks by ``Retry-After`` or ``retry-after-ms``, at most ``max_backoff`` either way), then raise
    `LLMTransientError`; any other failure raises `LLMError` with the server's message at
    once. A stream is retried only while nothing has been yielded; an answer that broke off
    is never asked again, and a kept-alive connection the server had closed is sent on again
    once, at once (`jianmu.llm._http`).

    Args:
        model: model name sent with each request.
        base_url: server URL such as ``http://127.0.0.1:8000/v1``; the SDK's default
            (``$OPENAI_BASE_URL`` or OpenAI) when ``None``. One pasted whole (Azure's
            ``.../chat/completions?api-version=...``) is taken without the endpoint, its
            query sent with each request.
        api_key: ``$OPENAI_API_KEY`` when ``None``, else ``"not-needed"`` for local servers.
        max_retries: retries of transient failures.
        timeout: the longest wait, in seconds, for a byte: to connect, to send the request, and
            for each read of the answer (its first byte, then each next one). A read timeout,
            not a limit on the whole call: a server that keeps sending (a stream's tokens, a
            proxy's keep-alive whitespace in a long generation) is never cut off by it. The
            whole call is limited by the agent node's timeout (``llm.timeout``,
            ``create_react_node(llm_timeout=...)``), or ``asyncio.timeout`` around a call
            made directly. An httpx ``Timeout`` sets the waits apart (``Timeout(60,
            connect=5)``: a shorter wait to connect); its errors say its read wait.
        retry_backoff: first backoff delay in seconds.
        max_backoff: longest delay between attempts.
        images: send the images of tool results (MCP screenshots, charts) as image parts;
            off for a model that reads no images (they stay as text stand-ins).
        send_reasoning: send each assistant turn's reasoning back with it, under the field
            the server gave it in (``reasoning_content``, ``reasoning``), on the turns since
            the last user message: DeepSeek's thinking mode with tool calls (and Kimi's)
            requires it there. Off by default, which is what the official OpenAI API takes
            (it refuses fields it does not know; refused here for ``api.openai.com``) and
            what DeepSeek's older ``deepseek-reasoner`` wants. OpenRouter's
            ``reasoning_details`` go back whole in their own field instead of the text. The
            reasoning is kept on the message (`Message.reasoning`) either way.
        **default_params: request parameters sent every time (``temperature``...), but for
            the SDK client's own settings, which go to the client: ``default_headers``,
            ``default_query`` (Azure's ``api-version``), ``organization``, ``project``, and
            ``http_client``, your own ``httpx.AsyncClient`` (its event hooks get Jianmu's;
            used on every event loop the provider runs on, and never closed by it: yours
            to close).

    Raises:
        MissingExtraError: the ``openai`` package is not installed.
        ValueError: an argument is out of range.
    """

    provider_name = "openai"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        max_retries: int = 3,
        timeout: float | Timeout = 60,
        retry_backoff: float = 0.5,
        max_backoff: float = 8.0,
        images: bool = True,
        send_reasoning: bool = False,
        **default_params: Any,
    ) -> None:
        check_common(model, max_retries, timeout)
        if retry_backoff < 0 or max_backoff < 0:
            raise ValueError(
                f"retry_backoff and max_backoff must be >= 0, got {retry_backoff!r} and "
                f"{max_backoff!r}"
            )
        self.model = model
        self.max_retries = max_retries
        self.timeout = read_wait(timeout)
        self._timeout = timeout  # seconds, or an httpx Timeout (connect apart from read...)
        self.retry_backoff = float(retry_backoff)
        self.max_backoff = float(max_backoff)
        self.images = bool(images)
        self.default_params = dict(default_params)
        base_url, query = split_url(base_url, "/chat/completions")
        self._client_options: dict[str, Any] = dict(
            base_url=base_url,
            api_key=api_key or os.environ.get("OPENAI_API_KEY") or "not-needed",
            **self._client_settings(self.default_params, _CLIENT_OPTIONS, query),
        )
        self._stream_usage = True  # ask streams for their usage, unless the server refuses
        self._start_clients()
        if not isinstance(send_reasoning, bool):
            raise ValueError(f"send_reasoning must be true or false, got {send_reasoning!r}")
        if send_reasoning and _official(self.base_url):
            raise ValueError(
                f"send_reasoning=True with {self.base_url}: api.openai.com refuses the "
                "reasoning_content field; it is for DeepSeek-style servers that want it back")
        self.send_reasoning = send_reasoning

    def _make_client(self) -> AsyncOpenAI:
        """An SDK client with its own retries off (retried here, with our policy and errors)."""
        try:
            import openai
        except ImportError:
            raise MissingExtraError("openai", "openai") from None
        return openai.AsyncOpenAI(**self._client_options, max_retries=0,
                                  timeout=sdk_timeout(openai, self._timeout),
                                  http_client=http_client(openai, self._http_given))

    @classmethod
    def from_llm_config(cls, llm: LLMConfig) -> Self:
        """The provider that the ``llm:`` config section describes (``provider: openai``).

        Raises:
            ConfigError: ``llm.model`` is not set.
        """
        if not llm.model:
            raise ConfigError(
                "llm.model is not set; name the model the server should run, "
                "e.g. llm.model: gpt-4o-mini"
            )
        params = dict(llm.params)
        backoff = params.pop("retry_backoff", None)
        extra: dict[str, Any] = {} if backoff is None else {"retry_backoff": float(backoff)}
        return cls._from_llm(llm, params, **extra)

    # -- requests ----------------------------------------------------------------------------

    def output_format_params(
        self, *, name: str, schema: dict[str, Any], strict: bool
    ) -> dict[str, Any]:
        """The request parameter that asks for JSON of ``schema`` (structured outputs):
        ``response_format`` with a ``json_schema``, ``strict`` when the schema allows it."""
        return {"response_format": {"type": "json_schema", "json_schema": {
            "name": name, "schema": schema, "strict": strict,
        }}}

    def _request(self, request: ChatRequest, *, stream: bool) -> dict[str, Any]:
        params = request.params
        merged = {**self.default_params, **params}
        options = {k: merged.pop(k) for k in REQUEST_OPTIONS if k in merged}
        body = dict(merged.pop("extra_body", None) or {})
        body_request: dict[str, Any] = {
            "model": merged.pop("model", self.model),
            "messages": messages_to_openai(request.messages, images=self.images,
                                           reasoning=self.send_reasoning),
            **options,
        }
        if request.tools:
            body_request["tools"] = list(request.tools)
            if request.tool_choice is not None:
                body_request["tool_choice"] = request.tool_choice
        elif request.tool_choice is not None:
            raise ValueError(
                f"tool_choice={request.tool_choice!r} was given but no tools; pass tools=... "
                "or drop it"
            )
        if stream:
            body_request["stream"] = True
            if self._stream_usage:
                body_request["stream_options"] = {"include_usage": True}
        # Vendor parameters (top_k, repetition_penalty...) are not SDK arguments: send every
        # parameter in the body so that the SDK never refuses one.
        body.update(merged)
        if body:
            body_request["extra_body"] = body
        return body_request

    @contextmanager
    def _map_errors(self) -> Iterator[None]:
        """Translate the SDK's exceptions into `LLMError` / `LLMTransientError`."""
        import openai

        where = f"{self.base_url} (model {self.model!r})"
        try:
            yield
        except openai.APIStatusError as exc:
            raise self._refused(exc.status_code, server_message(exc, *self._secrets),
                                exc.body, exc.response.headers) from exc
        except openai.APIConnectionError as exc:  # its timeout too
            refused = refused_unread(exc, self.timeout)
            if refused is not None:  # an error status whose body could not be read
                raise self._refused(refused.status, refused.said, None,
                                    refused.headers) from exc
            cause = exc.__cause__ or exc
            if isinstance(exc, openai.APITimeoutError) or timed_out(exc):
                raise LLMTransientError(
                    silent(where, self.timeout, begun=broke_off(exc))) from exc
            if broke_off(exc):  # never sent again: the server answered, and billed it
                raise LLMTransientError(
                    f"the answer from {where} broke off midway (not asked again): "
                    f"{told(cause)}"
                ) from exc
            raise LLMTransientError(
                f"connection to {where} failed: {told(cause)}"
            ) from exc
        except openai.APIError as exc:  # an error sent inside a 200: a stream's error chunk
            raise _sent_error(f"{where} sent an error", exc.body) or LLMError(
                f"{where}: {server_message(exc, *self._secrets)}") from exc
        except openai.OpenAIError as exc:
            raise LLMError(f"{where}: {server_message(exc, *self._secrets)}") from exc
        except json.JSONDecodeError as exc:  # a body or a chunk the SDK could not parse
            raise not_json(where, exc, self._secrets) from exc
        except UnicodeDecodeError as exc:  # a whole body (a stream is read with U+FFFD)
            raise not_utf8(where, exc, self._secrets) from exc

    def _refused(self, status: int, said: str, body: Any, headers: Any) -> LLMError:
        """The error of an error ``status`` (``said``: the server's message), transient when
        asking again may help."""
        text = f"HTTP {status} from {self.base_url} (model {self.model!r}): {said}"
        if status == 429 and _out_of_quota(body):
            # transient for a `FallbackLLM` (another model, another account may answer), but
            # asking this one again only waits: no retry
            error: LLMError = LLMTransientError(
                text + " (the account is out of quota: not asked again)")
            error.ask_again = False  # type: ignore[attr-defined]
        elif status in TRANSIENT_STATUSES or status >= 500:
            error = LLMTransientError(text)
            error.retry_after = _retry_after(headers)  # type: ignore[attr-defined]
        else:
            error = too_long(status, said, text) or LLMError(
                text + _STATUS_HINTS.get(status, "") + _unversioned_hint(status, self.base_url))
        error.status_code = status
        return error

    async def _with_retries(self, attempt: Callable[[], Awaitable[_T]]) -> _T:
        """Run ``attempt``, retrying transient failures with backoff; one failure on a
        connection the server had closed unanswered is sent again at once, uncounted, and no
        failure of an answer that had begun is retried."""
        resent = False
        number = 0
        while True:
            try:
                with self._map_errors():
                    return await attempt()
            except LLMTransientError as exc:
                if not resent and unanswered(exc):  # a kept-alive connection gone stale
                    resent = True
                    _log.debug("%s; sent again on a new connection", self.secret_free(str(exc)))
                    continue
                if broke_off(exc) or getattr(exc, "ask_again", True) is False:
                    raise  # the server answered (and billed), or it never will: not again
                if number >= self.max_retries:
                    last = LLMTransientError(
                        f"chat completion failed after {number + 1} attempt(s) "
                        f"(max_retries={self.max_retries}): {exc}")
                    last.status_code = exc.status_code  # the last attempt's
                    raise last from exc
                delay = min(self.max_backoff, self.retry_backoff * 2**number)
                retry_after = getattr(exc, "retry_after", None)
                if retry_after is not None:
                    delay = min(self.max_backoff, max(delay, retry_after))
                _log.warning("%s; retry %d/%d in %.2fs", self.secret_free(str(exc)), number + 1,
                             self.max_retries, delay)
                await _backoff(delay)
                number += 1

    async def _send(self, request: ChatRequest) -> LLMResponse:
        """Ask the server for one reply.

        Raises:
            LLMTransientError: a transient failure outlasted ``max_retries``, or the server
                ended the reply as failed midway (finish reason ``error``, ``abort``).
            LLMError: the server refused the request or answered without a choice.
        """
        body = self._request(request, stream=False)
        create: Any = self._client.chat.completions.create
        return self._reply(await self._with_retries(lambda: sent(create, body)))

    def _reply(self, completion: Any) -> LLMResponse:
        """The reply a whole completion holds."""
        # the SDK hands over whatever a 200 carried: a proxy's HTML page is a str
        choices = getattr(completion, "choices", None)
        sent_error = _sent_error(f"{self.base_url} answered with an error",
                                 getattr(completion, "error", None))
        if sent_error is not None and not choices:  # a proxy's error, sent with a 200
            raise sent_error
        if not isinstance(choices, list):
            raise unreadable(self.base_url, "something other than a chat completion", completion)
        if not choices:
            raise LLMError(f"{self.base_url} answered without any choice: {completion!r}")
        choice = choices[0]
        raw = getattr(choice, "message", None)
        if not isinstance(raw, BaseModel):
            raise unreadable(self.base_url, "a choice without a message", choice)
        try:
            # warnings off: some servers send a call's arguments as a JSON object, not the
            # string the SDK's model declares; `Message.from_openai` takes either
            data = raw.model_dump(warnings=False)
            data["role"] = "assistant"  # a choice's message is, whatever role it names
            thought = ""
            if isinstance(data.get("content"), list):  # parts: the text, reasoning apart
                thought = _thinking(data["content"])
                data["content"] = _text(self.base_url, data["content"]) or None
            message = Message.from_openai(data)
            if thought:
                message.reasoning.append({"type": THINKING_PARTS, "text": thought})
        except ValidationError as exc:
            raise LLMError(f"{self.base_url} answered with a message that cannot be read: "
                           f"{exc}") from exc
        response = LLMResponse(
            message=message,
            usage=_usage(getattr(completion, "usage", None)),
            finish_reason=getattr(choice, "finish_reason", None),
            model=getattr(completion, "model", None) or self.model,
            response_id=reply_id(getattr(completion, "id", None)),
        )
        if response.finish_reason in _FAILED_FINISHES:
            watch_stream(_Spent(response))  # billed: what it spent counts, as a stream's
            raise self._failed_midway(response.finish_reason)
        return response

    def _failed_midway(self, finish: Any) -> LLMTransientError:
        """The error of a reply that the server ended as failed midway (`_FAILED_FINISHES`)."""
        return LLMTransientError(
            f"{self.base_url} (model {self.model!r}) ended the reply with finish_reason "
            f"{finish!r}: it failed midway, and its text so far is no answer (not asked "
            "again: it was billed)")

    async def _send_stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Stream one reply: text deltas, each tool call once whole, then `StreamDone`.

        Tool-call fragments are assembled by their index; usage comes from the final chunk
        (``stream_options.include_usage``).

        Raises:
            LLMTransientError: the request failed transiently past ``max_retries``, or the
                connection broke mid-stream, or the stream ended without a finish reason or
                with one that says it failed midway (not retried: the server answered).
            LLMError: the server refused the request.
        """
        body = self._request(request, stream=True)
        create: Any = self._client.chat.completions.create
        try:
            chunks = await self._with_retries(lambda: sent(create, body))
        except LLMError as exc:
            if "stream_options" not in body or not _refused(exc, "stream_options"):
                raise
            # a server that refuses it (older Azure API versions, some proxies): a refusal
            # bills nothing; streams go without it, their usage unknown
            self._stream_usage = False
            body = {k: v for k, v in body.items() if k != "stream_options"}
            chunks = await self._with_retries(lambda: sent(create, body))
        with self._map_errors():
            whole = await self.whole_body(chunks)
        if whole is not None:  # a server that ignored ``stream``: its whole reply, replayed
            import openai

            completion = openai.types.chat.ChatCompletion.construct(**whole) if isinstance(
                whole, dict) else whole
            for event in replayed(self._reply(completion)):
                yield event
            return
        last_event_kept(chunks)
        _with_data_only(chunks)
        assembler = _StreamAssembler(self.base_url)
        watch_stream(assembler)
        each = aiter(chunks)
        try:
            with self._map_errors():
                async for chunk in each:
                    for event in assembler.feed(chunk):
                        yield event
                    if assembler.ended:  # not waited on: a body held open after its end
                        break
            await drained(chunks)
        except LLMTransientError as exc:
            # broken after the finish reason (a proxy that drops the connection): the reply
            # is whole, only the usage chunk may be lost (unknown usage, said so)
            if assembler.finish_reason is None or assembler.finished_early or not broke_off(
                    exc):
                raise
            _log.debug("%s after the reply's end; the reply is kept",
                       self.secret_free(str(exc)))
        finally:
            await each.aclose()
            await chunks.close()
        if not assembler.chunks:  # an answer that was no event stream (an HTML page...)
            raise self.no_events(chunks, "any chunk")
        if assembler.finish_reason is None:
            # the body ended cleanly but the reply had not (a proxy's timeout, a server that
            # lost its worker): its text so far is no answer, and was billed
            raise LLMTransientError(
                f"the stream from {self.base_url} (model {self.model!r}) ended before the "
                "reply did (no finish_reason): an incomplete reply, not asked again")
        if assembler.finish_reason in _FAILED_FINISHES:
            raise self._failed_midway(assembler.finish_reason)
        for event in (*assembler.rest(), *assembler.flush()):
            yield event
        yield StreamDone(response=assembler.response(self.model))


def _with_data_only(chunks: Any) -> None:
    """Skip the events of ``chunks`` (the SDK's stream) that carry no data: legal in an event
    stream (a ``retry:`` or ``id:`` line alone, ``event: ping``, an empty ``data:`` sent to
    keep the connection alive), and no chunk; the SDK parsed each as JSON, and the reply
    failed as "not JSON"."""
    read = getattr(chunks, "_iter_events", None)
    if read is None:  # an SDK that reads its events otherwise: left as it is
        return

    async def with_data() -> AsyncIterator[Any]:
        async for sse in read():
            if sse.data.strip():
                yield sse

    chunks._iter_events = with_data


async def _backoff(delay: float) -> None:
    """Wait between attempts (a seam that tests replace to record the delays)."""
    await asyncio.sleep(delay)


def _unversioned_hint(status: int, url: str) -> str:
    """A 404's hint when ``url``'s path names no API version: vLLM, Ollama and most other
    OpenAI-compatible servers serve ``/v1/chat/completions`` only."""
    from urllib.parse import urlsplit

    path = urlsplit(url).path.lower()
    if status != 404 or "/v1" in path or "/openai" in path or _official(url):
        return ""
    return f" (the URL names no API version: most servers want {url.rstrip('/')}/v1)"


def _official(url: str) -> bool:
    """Whether ``url`` is the official OpenAI API's."""
    from urllib.parse import urlsplit

    host = (urlsplit(url).hostname or "").lower().rstrip(".")
    return host == "api.openai.com"


def _usage(usage: Any) -> Usage | None:
    """`Usage` from an OpenAI ``usage`` object; cached prompt tokens when the server says;
    reasoning tokens in the output also when a gateway counts them apart (`_reasoning_apart`);
    ``None`` (unknown) when the server sent none."""
    if not usage:
        return None
    if isinstance(usage, Mapping):  # one the SDK left as it came (``x_groq``'s)
        usage = SimpleNamespace(**{k: v for k, v in usage.items() if isinstance(k, str)})
    input_tokens = token_count(getattr(usage, "prompt_tokens", None))
    output_tokens = token_count(getattr(usage, "completion_tokens", None))
    if input_tokens is None or output_tokens is None:  # a count missing or not a count
        return None
    output_tokens += _reasoning_apart(usage, input_tokens, output_tokens)
    details = getattr(usage, "prompt_tokens_details", None)
    if isinstance(details, Mapping):  # one the SDK left as it came
        details = SimpleNamespace(**{k: v for k, v in details.items() if isinstance(k, str)})
    cached = token_count(getattr(details, "cached_tokens", None))
    if cached is None:  # DeepSeek's name for them (its prompt_tokens holds them too)
        cached = token_count(getattr(usage, "prompt_cache_hit_tokens", None))
    return Usage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cache_read_tokens=min(cached or 0, input_tokens),
    )


def _reasoning_apart(usage: Any, prompt: int, completion: int) -> int:
    """The reasoning tokens that ``completion_tokens`` leaves out, else 0. OpenAI counts them
    in it (``completion_tokens_details.reasoning_tokens`` a part of it); some gateways (Gemini
    through several) count only the visible answer there, the reasoning apart and in
    ``total_tokens``: billed output all the same, which a budget must see. Told apart by the
    total holding them beside the completion, or, without a total, by a completion smaller
    than its part."""
    details = getattr(usage, "completion_tokens_details", None)
    if isinstance(details, Mapping):
        details = SimpleNamespace(**{k: v for k, v in details.items() if isinstance(k, str)})
    reasoning = token_count(getattr(details, "reasoning_tokens", None))
    if not reasoning:
        return 0
    total = token_count(getattr(usage, "total_tokens", None))
    if total is None:
        return reasoning if completion < reasoning else 0
    return reasoning if total >= prompt + completion + reasoning else 0


_FAILED_FINISHES = frozenset({"error", "abort"})
"""Finish reasons that say the reply failed midway: ``error`` (OpenRouter's and Mistral's,
the provider failing mid-generation), ``abort`` (vLLM's, the request aborted in the engine)."""


class _Spent:
    """A whole reply's usage and size, as a stream's assembler tells them (`watch_stream`):
    what a reply that failed midway spent."""

    def __init__(self, response: LLMResponse) -> None:
        self._response = response

    def received(self) -> tuple[Usage | None, int]:
        message = self._response.message
        return self._response.usage, len(message.content or "") + sum(
            len(call.name) + len(call.arguments_json()) for call in message.tool_calls)


_TRANSIENT_KINDS = frozenset({"server_error", "overloaded_error", "rate_limit_error",
                              "rate_limit_exceeded", "api_error", "timeout_error"})


def _sent_error(what: str, error: Any) -> LLMError | None:
    """The error a server sent in a 200's body or a stream's chunk (``{"message", "type",
    "code"}``), transient when its type or code is; ``None`` when it is no such error."""
    if not isinstance(error, Mapping):
        return None
    code = token_count(error.get("code"))
    kind = str(error.get("type") or "")
    said = error.get("message") or kind or error
    text = f"{what}: {f'{kind}: ' if kind else ''}{said}"
    if kind in _TRANSIENT_KINDS or code in TRANSIENT_STATUSES or (code or 0) >= 500:
        return LLMTransientError(text)
    return LLMError(text)


_REASONING_PARTS = frozenset({"thinking", "reasoning", "redacted_thinking"})

THINKING_PARTS = "thinking_parts"
"""The type of the `Message.reasoning` block that holds the text of a reply's reasoning content
parts (Mistral's ``{"type": "thinking", "thinking": [{"type": "text", ...}]}``): kept, never
sent back (no server asks for it), never sent to Anthropic."""


def _thinking(given: Any) -> str:
    """The text of the reasoning parts among content parts (none for plain text)."""
    if not isinstance(given, list):
        return ""
    pieces: list[str] = []
    for part in given:
        if not isinstance(part, Mapping) or part.get("type") not in _REASONING_PARTS:
            continue
        said = next((part[k] for k in ("thinking", "reasoning", "text") if k in part), None)
        if isinstance(said, str):
            pieces.append(said)
        elif isinstance(said, list):
            pieces += [c["text"] for c in said
                       if isinstance(c, Mapping) and isinstance(c.get("text"), str)]
    return "".join(pieces)


def _text(where: str, given: Any) -> str:
    """A reply's text: a string, or content parts (``[{"type": "text", "text": ...}]``, a
    refusal part), reasoning parts (Mistral's ``thinking``) left out; else unreadable."""
    if not given or isinstance(given, str):
        return given or ""
    if isinstance(given, list) and all(isinstance(p, dict) for p in given):
        pieces = []
        for part in given:
            kind = part.get("type", "text")
            said = part.get("refusal" if kind == "refusal" else "text")
            if kind in ("text", "refusal") and isinstance(said, str):
                pieces.append(said)
            elif kind not in _REASONING_PARTS:
                break
        else:
            return "".join(pieces)
    raise unreadable(where, "content that is not text", given)


def _refused(exc: LLMError, name: str) -> bool:
    """Whether ``exc`` is the server refusing the request parameter ``name`` (HTTP 400/422)."""
    status = getattr(exc.__cause__, "status_code", None)
    return status in (400, 422) and name in str(exc)


def _says_something(delta: Any) -> bool:
    """Whether a chunk's delta holds a piece of the reply (text, a refusal, reasoning, a
    tool call's), not only its role or nothing."""
    return any(getattr(delta, key, None) for key in (
        "content", "refusal", "tool_calls", "function_call", *OPENAI_REASONING_FIELDS))


def _whole(arguments: str) -> bool:
    """Whether a call's arguments so far are none or a whole JSON value."""
    stripped = arguments.strip()
    if not stripped:
        return True
    try:
        json.loads(stripped)
    except ValueError:
        return False
    return True


class _Call:
    """One streamed tool call as it comes: its id, its name and its arguments' pieces, joined
    when read (added to one string piece by piece, a long call was copied quadratically)."""

    __slots__ = ("_depth", "_pieces", "_unread", "id", "name")

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self._pieces: list[str] = []
        self._unread: list[str] = []  # pieces `whole` has not read yet
        # where `whole`'s reading stands: brackets open; in a string; after a backslash
        self._depth = [0, False, False]

    @property
    def arguments(self) -> str:
        """The arguments so far."""
        if len(self._pieces) > 1:
            self._pieces[:] = ["".join(self._pieces)]
        return self._pieces[0] if self._pieces else ""

    @arguments.setter
    def arguments(self, value: str) -> None:
        self._pieces, self._unread, self._depth = [value], [value], [0, False, False]

    def add(self, piece: str) -> None:
        """Add a piece of the arguments."""
        self._pieces.append(piece)
        self._unread.append(piece)

    def blank(self) -> bool:
        """Whether no arguments came yet but white space (read without joining them)."""
        return all(piece.isspace() for piece in self._pieces if piece)

    def whole(self) -> bool:
        """Whether the arguments so far are none or a whole JSON value.

        A server that names the tool in every piece asks this of each: the pieces are read
        once each, brackets counted outside strings, and the arguments parsed only when an
        object or array they open has closed (parsed each time, a long call was quadratic).
        """
        first = next((p.lstrip() for p in self._pieces if p and not p.isspace()), "")
        if not first:
            return True
        if first[0] not in "{[":
            return _whole(self.arguments)  # a bare value: rare, parsed
        depth, quoted, escaped = self._depth
        for piece in self._unread:
            start, escaped = (1, False) if escaped and piece else (0, escaped)
            for mark in _MARKS.finditer(piece, start):
                char = mark.group()
                if char[0] == "\\":  # an escape: the character after it is no mark
                    escaped = len(char) == 1  # ...and that character is in the next piece
                elif char == '"':
                    quoted = not quoted
                elif not quoted:
                    depth += 1 if char in "{[" else -1
        self._unread = []
        self._depth = [depth, quoted, escaped]
        return depth <= 0 and not quoted and _whole(self.arguments)

    def size(self) -> int:
        """The characters of its name and arguments so far."""
        return len(self.name) + sum(map(len, self._pieces))


_MARKS = re.compile(r'\\.|\\$|["{}\[\]]', re.DOTALL)
"""What `_Call.whole` counts: brackets, and quotes and backslashes that say where strings are."""


def _repeated(held: _Call, piece: str) -> bool:
    """Whether ``piece`` is whole JSON arguments that come after whole ones (``held``'s): added
    to them, they would be no JSON at all. The piece is checked first, and alone: a piece of a
    stream is rarely whole, so the arguments so far are seldom parsed again."""
    stripped = piece.lstrip()
    return stripped[:1] in ("{", "[") and _whole(piece) and not held.blank() and held.whole()


def _another(slot: _Call, ident: str | None, name: str | None, arguments: Any) -> bool:
    """Whether a fragment naming a tool starts another call rather than adding to ``slot``:
    its id differs, the call being whole; or, without ids (servers that send each call whole),
    it names another tool or brings arguments of its own after whole ones."""
    if not name or not slot.name:
        return False
    if ident and slot.id:
        return ident != slot.id and slot.whole()
    return not slot.blank() and slot.whole() and (
        name != slot.name or bool(arguments.strip() if isinstance(arguments, str)
                                  else arguments))


def _out_of_quota(body: Any) -> bool:
    """Whether a 429's ``body`` says the account's quota or credit is spent (OpenAI's
    ``insufficient_quota``), not that it asked too fast: waiting does not help."""
    error = body.get("error", body) if isinstance(body, Mapping) else None
    if not isinstance(error, Mapping):
        return False
    return "insufficient_quota" in (error.get("code"), error.get("type"))


def _retry_after(headers: Any) -> float | None:
    """Seconds the server asked to wait, by its response's ``headers``: ``retry-after-ms``
    (OpenAI's, Azure's), or ``Retry-After`` in seconds or as an HTTP date; ``None`` when it
    said nothing usable."""
    headers = {} if headers is None else headers
    seconds: float | None = None
    try:
        if headers.get("retry-after-ms") is not None:
            seconds = float(headers["retry-after-ms"]) / 1000
        elif headers.get("retry-after") is not None:
            value = headers["retry-after"]
            try:
                seconds = float(value)
            except ValueError:  # an HTTP date
                seconds = (parsedate_to_datetime(value) - datetime.now(UTC)).total_seconds()
    except (TypeError, ValueError, OverflowError):
        return None
    if seconds is None or not math.isfinite(seconds) or seconds < 0:  # a date gone by
        return None
    return seconds


class _StreamAssembler:
    """Collects chunks of a streamed completion into text, whole tool calls and usage."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.chunks = 0
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.reasoning_key = ""  # the field the server sends it in (`OPENAI_REASONING_FIELDS`)
        self.details: dict[int, dict[str, Any]] = {}  # OpenRouter's, by their index
        self.thinking: list[str] = []  # reasoning content parts' text (Mistral's)
        self.calls: dict[tuple[int, int], _Call] = {}  # by index, then arrival
        self._open: dict[int, tuple[int, int]] = {}  # the call each index now adds to
        self.finish_reason: str | None = None
        self.usage: Usage | None = None  # unknown until the server's usage chunk
        self.model = ""
        self.response_id = ""
        self._emitted = False
        self._paired = PairedText()  # an emoji's JSON escapes split between two chunks
        self.finished_early = False  # more of the reply came after a finish reason
        # the usage chunk (``choices: []``) after the finish reason: the last of the reply,
        # only ``data: [DONE]`` after it
        self.ended = False

    def feed(self, chunk: Any) -> list[StreamEvent]:
        self.chunks += 1
        events: list[StreamEvent] = []
        choices = getattr(chunk, "choices", None)
        if not isinstance(chunk, BaseModel) or (not isinstance(choices, list) and (
            choices is not None or not getattr(chunk, "usage", None)  # usage alone is one
        )):
            raise unreadable(self.where, "a stream chunk that is not a completion's", chunk)
        model = getattr(chunk, "model", None)
        self.model = model if isinstance(model, str) and model else self.model
        self.response_id = reply_id(getattr(chunk, "id", None)) or self.response_id
        # Groq gives its usage in the last chunk's ``x_groq``, not in ``usage``
        groq = getattr(chunk, "x_groq", None)
        sent_usage = getattr(chunk, "usage", None) or (
            groq.get("usage") if isinstance(groq, Mapping) else None)
        if sent_usage:
            self.usage = _usage(sent_usage)
        self.ended = bool(sent_usage) and not choices and self.finish_reason is not None and (
            not self.finished_early)
        for choice in choices or ():
            if not isinstance(choice, BaseModel):
                raise unreadable(self.where, "a stream chunk's choice that is not one", choice)
            if (getattr(choice, "index", None) or 0) != 0:
                continue  # n > 1: only the first choice is assembled
            delta = getattr(choice, "delta", None)
            if self.finish_reason is not None and not self.finished_early:
                # a finish reason before more of the reply (a proxy that sends one on every
                # chunk) was no end: a break after it is not after the reply's end
                self.finished_early = _says_something(delta)
            self._add_reasoning(delta)
            # a refusal (structured outputs) is the answer's text: the reader must see it
            said = (getattr(delta, "content", None), getattr(delta, "refusal", None))
            for given in said:
                if isinstance(given, list):  # parts: reasoning ones kept apart (Mistral's)
                    self.thinking.append(_thinking(given))
                text = _text(self.where, given)
                text = self._paired.piece(text) if text else text
                if text:
                    self.text.append(text)
                    events.append(TextDelta(text=text))
            fragments = getattr(delta, "tool_calls", None) or []
            if not isinstance(fragments, list):
                raise unreadable(self.where, "tool-call fragments that are not a list", fragments)
            for fragment in fragments:
                if not isinstance(fragment, BaseModel):
                    raise unreadable(self.where, "a tool-call fragment that is not one", fragment)
                self._add_fragment(fragment)
            legacy = getattr(delta, "function_call", None)
            if legacy is not None and not fragments:  # the older shape of one call
                self._add_fragment(SimpleNamespace(index=0, id=None, function=legacy))
            finish = getattr(choice, "finish_reason", None)
            if finish:
                # the calls are made ready at the stream's end (`flush`), not here: a gateway
                # may send the finish reason early (on a call's first chunk), then more calls
                self.finish_reason = finish
        return events

    def received(self) -> tuple[Usage | None, int]:
        """The usage sent so far and the characters of the reply received (a stopped call's
        count, `jianmu.llm.in_flight`)."""
        chars = sum(map(len, self.text)) + sum(map(len, self.reasoning)) + sum(
            map(len, self.thinking)) + sum(c.size() for c in self.calls.values())
        return self.usage, chars

    def _add_reasoning(self, delta: Any) -> None:
        """Keep a delta's reasoning (``reasoning_content`` or ``reasoning``): of one field
        only, the first that came (a server that sends both sends the same text twice); and
        OpenRouter's ``reasoning_details`` pieces, joined by their index."""
        for detail in getattr(delta, REASONING_DETAILS, None) or ():
            if isinstance(detail, Mapping):
                self._add_detail(detail)
        for key in (self.reasoning_key,) if self.reasoning_key else OPENAI_REASONING_FIELDS:
            piece = getattr(delta, key, None)
            if isinstance(piece, str) and piece:
                self.reasoning_key = key
                self.reasoning.append(piece)
                return

    def _add_detail(self, piece: Mapping[str, Any]) -> None:
        """One streamed piece of a reasoning detail: its text, summary or encrypted data
        added to what its index holds, its other fields (type, id, format, signature) set."""
        index = piece.get("index")
        index = index if isinstance(index, int) else len(self.details)
        held = self.details.setdefault(index, {})
        for key, value in piece.items():
            if key in ("text", "summary", "data") and isinstance(value, str):
                held[key] = held.get(key, "") + value
            elif value is not None:
                held[key] = value

    def _add_fragment(self, fragment: Any) -> None:
        index = getattr(fragment, "index", None)
        ident, function = getattr(fragment, "id", None), getattr(fragment, "function", None)
        name = getattr(function, "name", None)
        if not all(isinstance(v, t) for v, t in ((index, int), (ident, str), (name, str))
                   if v is not None):
            raise unreadable(self.where, "a tool-call fragment of the wrong types", fragment)
        if index is None:  # some servers omit it: a new id starts a new call
            known = {slot.id for slot in self.calls.values()}
            if (ident and ident not in known) or not self.calls:
                index = max(self._open, default=-1) + 1
            else:
                index = max(self._open)
        key = self._open.get(index)
        slot = None if key is None else self.calls[key]
        arguments = getattr(function, "arguments", None)
        if slot is None or _another(slot, ident, name, arguments):
            # a new call; or one more at an index a whole call holds (servers that number
            # every call 0): joined to it, both calls were lost
            key = self._open[index] = (index, len(self.calls))
            slot = self.calls[key] = _Call()
        if ident:
            slot.id = ident
        if function is not None:
            # The name normally arrives whole in the first fragment; some servers repeat it.
            if name and name != slot.name:
                slot.name += name
            if arguments and not isinstance(arguments, str):
                # a server that sends the arguments as a JSON object sends them whole
                slot.arguments = json.dumps(arguments)
            elif arguments and _repeated(slot, arguments):
                # whole arguments again (a server that repeats the call at its end, or sent a
                # ``{}`` first): they replace what came; joined, both were lost
                slot.arguments = arguments
            elif arguments:
                slot.add(arguments)

    def rest(self) -> list[StreamEvent]:
        """The text still held at the stream's end (half a character: `PairedText`)."""
        text = self._paired.rest()
        if not text:
            return []
        self.text.append(text)
        return [TextDelta(text=text)]

    def _tool_calls(self) -> list[ToolCall]:
        return [
            # an emoji's JSON escapes split between two fragments: one character again
            ToolCall.from_dict({"id": s.id, "name": s.name, "arguments": paired(s.arguments)})
            for _, s in sorted(self.calls.items())
        ]

    def flush(self) -> list[StreamEvent]:
        """The finished tool calls, once, at the stream's end."""
        if self._emitted:
            return []
        self._emitted = True
        calls = self._tool_calls()
        # Fix the generated ids of id-less calls so the events and the response agree.
        for slot, call in zip((s for _, s in sorted(self.calls.items())), calls, strict=True):
            slot.id = call.id
        return [ToolCallReady(call=call, index=i) for i, call in enumerate(calls)]

    def response(self, model: str) -> LLMResponse:
        text = "".join(self.text)
        thought = paired("".join(self.reasoning))  # an emoji's escapes split between chunks
        reasoning: list[dict[str, Any]] = (
            [{"type": self.reasoning_key, "text": thought}] if thought else [])
        if self.details:
            details = [self.details[i] for i in sorted(self.details)]
            reasoning.append({"type": REASONING_DETAILS, "details": details})
        parts = paired("".join(self.thinking))
        if parts:
            reasoning.append({"type": THINKING_PARTS, "text": parts})
        message = Message(
            role="assistant", content=text or None, tool_calls=self._tool_calls(),
            reasoning=reasoning,
        )
        return LLMResponse(
            message=message,
            usage=self.usage,
            finish_reason=self.finish_reason,
            model=self.model or model,
            response_id=self.response_id,
        )
