"""A real model server for tests: uvicorn + starlette on 127.0.0.1, keep-alive on, speaking
the OpenAI chat-completions API and the Anthropic messages API, streamed (SSE) or not.

Unlike `tests.support.fake_openai` (``http.server``, one connection per request), this server
keeps connections alive as every real one does, so a client that reuses a pooled connection
on another event loop is caught. It runs in a background thread with its own loop; `start`
and `stop` wait on readiness and the thread's end, never on sleeps.

Usage::

    from tests.support.model_server import ModelServer, Turn

    with ModelServer() as server:
        server.add(Turn(calls=[{"name": "add", "arguments": {"a": 1}}]), "The sum is 1.")
        llm = OpenAIProvider("m", base_url=server.openai_url)        # or
        llm = AnthropicProvider("m", base_url=server.anthropic_url)
        ...
        assert server.requests[0].api == "openai"

Script entries, one per request (whichever API asks): a ``str`` (a final answer), a `Turn`
(text and/or tool calls, usage or none, arguments as a JSON object), a `Raw` body or event
list sent as is (a server answering oddly, or cutting its answer short), a `Drop` (the
request read, the connection closed with no answer: a kept-alive connection the server had
closed) or a callable that takes the request (`Request`) and returns one of those (for
concurrent clients). When the script is
empty the server answers 500 and records the problem in ``problems``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import pytest

__all__ = ("MODES", "Drop", "ModelServer", "Raw", "Request", "Stall", "Turn", "strict_json")

MODES = [
    pytest.param("openai", False, id="openai"),
    pytest.param("openai", True, id="openai-stream"),
    pytest.param("anthropic", False, id="anthropic"),
    pytest.param("anthropic", True, id="anthropic-stream"),
]
"""Each API the server speaks, streamed or not: ``parametrize(("api", "stream"), MODES)``."""


def strict_json(text: str | bytes) -> Any:
    """``text`` parsed as JSON, refusing what JSON is not (``NaN``, ``Infinity``), as the real
    APIs do (Python's `json.loads` takes them)."""

    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


@dataclass(kw_only=True)
class Turn:
    """One scripted reply."""

    text: str | None = None
    """The assistant's text."""
    calls: list[dict[str, Any]] = field(default_factory=list)
    """Tool calls: ``{"name", "arguments", "id"?}`` with ``arguments`` a dict."""
    usage: tuple[int, int] | None = (10, 5)
    """Input and output tokens; ``None`` sends no usage at all."""
    object_arguments: bool = False
    """Send OpenAI tool-call arguments as a JSON object instead of a string (some servers do)."""
    reasoning: str | None = None
    """An OpenAI-compatible server's reasoning (DeepSeek, Kimi, vLLM, OpenRouter), sent under
    ``reasoning_key`` beside the text, streamed before it."""
    reasoning_key: str = "reasoning_content"
    """Where the reasoning goes: ``reasoning_content`` (DeepSeek, Kimi) or ``reasoning``."""
    needs_reasoning: bool = False
    """Refuse the request (400) as DeepSeek's thinking mode with tools does, unless every
    assistant turn with tool calls since the last user message carries, under
    ``reasoning_key``, the reasoning this server gave it."""
    cut: int | None = None
    """The reply hit the token limit: the last call's arguments stop after this many
    characters of their JSON text, and the finish reason is the limit's (OpenAI ``length``,
    Anthropic ``max_tokens``). A whole Anthropic message gives the keys written whole."""


@dataclass(kw_only=True)
class Raw:
    """A reply sent exactly as given, for servers that answer oddly."""

    body: Any = None
    """The body: JSON data, or ``str`` sent as is (with ``content_type``)."""
    events: list[dict[str, Any]] | None = None
    """For a streamed request: these events, as SSE (the API's own framing)."""
    content_type: str = "application/json"
    """The ``Content-Type`` of a ``str`` body."""
    cut: int | None = None
    """Send only the body's (or the event stream's) first ``cut`` bytes, then close the
    connection: an answer that broke off (the status and length were sent)."""
    headers: dict[str, str] = field(default_factory=dict)
    """Extra response headers."""
    status: int = 200
    """The HTTP status."""


@dataclass(frozen=True, kw_only=True)
class Drop:
    """Read the request, then close the connection without a byte of answer."""


@dataclass(frozen=True, kw_only=True)
class Stall:
    """Answer (200, or ``status``), then send no reply until the client leaves: every ``every``
    seconds one byte that means nothing (an SSE comment to a stream, whitespace to a JSON body,
    as proxies keep a long generation alive), or nothing at all when ``every`` is ``None``."""

    every: float | None = None
    status: int = 200
    """The HTTP status (an error status whose body never comes: a stalled proxy's)."""


@dataclass(frozen=True, kw_only=True)
class Request:
    """A request the server received."""

    api: str
    """``openai`` or ``anthropic``."""
    body: dict[str, Any]
    """The JSON body."""
    connection: tuple[str, int]
    """The client's address: one per TCP connection, so repeats show a kept-alive one."""

    @property
    def stream(self) -> bool:
        """Whether the client asked for a stream."""
        return bool(self.body.get("stream"))

    @property
    def last_user_text(self) -> str:
        """The text of the last user message (either API's shape)."""
        for message in reversed(self.body.get("messages", [])):
            if message.get("role") != "user":
                continue
            content = message.get("content")
            if isinstance(content, str):
                return content
            texts = [p.get("text", "") for p in content or [] if p.get("type") == "text"]
            if texts:
                return "".join(texts)
        return ""


Reply = str | Turn | Raw | Drop | Stall
Script = Reply | Callable[[Request], Reply]


class ModelServer:
    """A scripted OpenAI- and Anthropic-compatible server with keep-alive connections."""

    def __init__(self, *script: Script, model: str = "test-model") -> None:
        self.model = model
        self.requests: list[Request] = []
        self.problems: list[str] = []
        self.reasoned: set[str] = set()
        """The reasoning texts this server gave (DeepSeek wants them back, see `Turn`)."""
        self.signed: set[str] = set()
        """The signatures of the thinking blocks this server gave (Anthropic checks them)."""
        self._script: deque[Script] = deque(script)
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._server: Any = None
        self.port = 0

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> ModelServer:
        """Serve on a free port; returns once the server accepts connections."""
        import uvicorn

        # IPPROTO_TCP named: asyncio sets TCP_NODELAY only on sockets whose proto says TCP,
        # and the accepted ones inherit this one's; with 0, Nagle held each reply's body back
        # for the client's delayed ACK, some 40 ms per request on a kept-alive connection
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        ready = threading.Event()
        failed: list[BaseException] = []

        class _Server(uvicorn.Server):
            """uvicorn's server, stopped at once: its main loop looks at ``should_exit`` every
            0.1 s and its shutdown sleeps 0.1 s then polls the connections every 0.1 s (some
            0.2 s a server, a test's idle time)."""

            loop: asyncio.AbstractEventLoop
            stopping: asyncio.Event

            async def startup(self, sockets: list[socket.socket] | None = None) -> None:
                self.loop, self.stopping = asyncio.get_running_loop(), asyncio.Event()
                await super().startup(sockets=sockets)
                ready.set()

            async def main_loop(self) -> None:
                ticks = asyncio.ensure_future(super().main_loop())
                stop = asyncio.ensure_future(self.stopping.wait())
                await asyncio.wait({ticks, stop}, return_when=asyncio.FIRST_COMPLETED)
                for task in (ticks, stop):
                    task.cancel()

            async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
                # uvicorn's steps, its waits on the connections and tasks in small ones
                for server in self.servers:
                    server.close()
                for sock in sockets or []:
                    sock.close()
                for connection in list(self.server_state.connections):
                    connection.shutdown()
                state = self.server_state
                try:
                    async with asyncio.timeout(self.config.timeout_graceful_shutdown):
                        while state.connections or state.tasks:
                            await asyncio.sleep(0.002)
                except TimeoutError:
                    for task in state.tasks:
                        task.cancel()
                for server in self.servers:
                    await server.wait_closed()

        config = uvicorn.Config(
            self._app(), log_level="error", lifespan="off", timeout_keep_alive=30,
            timeout_graceful_shutdown=5,
        )
        self._server = server = _Server(config)

        def serve() -> None:
            try:
                asyncio.run(server.serve(sockets=[sock]))
            except BaseException as exc:  # reported to start(), which waits on it
                failed.append(exc)
            finally:
                sock.close()
                ready.set()

        self._thread = threading.Thread(target=serve, name="model-server", daemon=True)
        self._thread.start()
        if not ready.wait(30) or failed or not server.started:
            raise RuntimeError(f"the model server did not start: {failed!r}")
        return self

    def stop(self) -> None:
        """Stop serving and wait for the server's thread to end."""
        if self._thread is None:
            return
        server = self._server
        server.should_exit = True
        try:
            server.loop.call_soon_threadsafe(server.stopping.set)
        except RuntimeError:  # its loop already closed: the thread is ending
            pass
        self._thread.join(30)
        if self._thread.is_alive():
            raise RuntimeError("the model server did not stop")
        self._thread = None

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def openai_url(self) -> str:
        """The ``base_url`` for `OpenAIProvider`."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_url(self) -> str:
        """The ``base_url`` for `AnthropicProvider`."""
        return f"http://127.0.0.1:{self.port}"

    # -- the script --------------------------------------------------------------------------
    def add(self, *items: Script) -> None:
        """Queue replies."""
        with self._lock:
            self._script.extend(items)

    @property
    def connections(self) -> set[tuple[str, int]]:
        """The TCP connections requests came on."""
        return {r.connection for r in self.requests}

    def _next(self, request: Request) -> Turn | Raw | Drop | Stall | None:
        with self._lock:
            self.requests.append(request)
            if not self._script:
                self.problems.append(f"request {len(self.requests)} came after the script ended")
                return None
            item = self._script[0]
            if not callable(item):
                self._script.popleft()
        reply = item(request) if callable(item) else item
        return Turn(text=reply) if isinstance(reply, str) else reply

    def _id(self, prefix: str) -> str:
        return f"{prefix}_{next(self._ids)}"

    # -- the app -----------------------------------------------------------------------------
    def _app(self) -> Any:
        from starlette.applications import Starlette
        from starlette.requests import Request as HTTPRequest
        from starlette.responses import JSONResponse, Response, StreamingResponse
        from starlette.routing import Route

        async def handle(http: HTTPRequest, api: str) -> Response:
            try:
                body = strict_json(await http.body())
            except ValueError as exc:  # as the real APIs: a body that is not JSON is refused
                self.problems.append(f"a request body that is not JSON: {exc}")
                return JSONResponse({"error": {"message": f"invalid JSON body: {exc}",
                                               "type": "invalid_request_error"}},
                                    status_code=400)
            client = http.client
            request = Request(api=api, body=body,
                              connection=(client.host, client.port) if client else ("", 0))
            turn = self._next(request)
            if turn is None:
                return JSONResponse({"error": {"message": "script ended"}}, status_code=500)
            if isinstance(turn, Drop):
                await self._close(http)
                return Response(status_code=500)  # never sent: the connection is gone
            if isinstance(turn, Raw):
                return await self._raw(http, turn, named=api == "anthropic")
            if isinstance(turn, Stall):
                return StreamingResponse(
                    _stalled(http, turn, b":\n" if request.stream else b" "),
                    media_type="text/event-stream" if request.stream else "application/json",
                    status_code=turn.status)
            if api == "openai":
                refused = self._without_reasoning(body, turn)
                if refused is not None:
                    return JSONResponse({"error": {
                        "message": refused, "type": "invalid_request_error"}}, status_code=400)
                if turn.reasoning:
                    self.reasoned.add(turn.reasoning)
                if request.stream:
                    return StreamingResponse(_sse(self._openai_chunks(body, turn)),
                                             media_type="text/event-stream")
                return JSONResponse(self._openai_completion(turn))
            thinks = (body.get("thinking") or {}).get("type") == "enabled"
            if thinks:  # as Anthropic: a turn's thinking must come back beside its tool use
                refused = self._unsigned_tool_use(body)
                if refused is not None:
                    return JSONResponse({"type": "error", "error": {
                        "type": "invalid_request_error", "message": refused}}, status_code=400)
            if request.stream:
                return StreamingResponse(
                    _sse(self._anthropic_events(turn, thinks), named=True),
                    media_type="text/event-stream")
            return JSONResponse(self._anthropic_message(turn, thinks))

        async def openai(http: HTTPRequest) -> Response:
            return await handle(http, "openai")

        async def anthropic(http: HTTPRequest) -> Response:
            return await handle(http, "anthropic")

        return Starlette(routes=[
            Route("/v1/chat/completions", openai, methods=["POST"]),
            Route("/v1/messages", anthropic, methods=["POST"]),
        ])

    async def _close(self, http: Any) -> None:
        """Close the request's connection at once; return once uvicorn saw it go."""
        client = http.client
        for connection in list(self._server.server_state.connections):
            if connection.client == (client.host, client.port):
                connection.transport.close()
        while (await http.receive())["type"] != "http.disconnect":
            pass

    async def _raw(self, http: Any, raw: Raw, *, named: bool) -> Any:
        from starlette.responses import JSONResponse, Response, StreamingResponse

        events = raw.events if (await http.json()).get("stream") else None
        if raw.cut is None:
            if events is not None:
                return StreamingResponse(_sse(events, named=named), headers=raw.headers,
                                         media_type="text/event-stream", status_code=raw.status)
            if isinstance(raw.body, str):
                return Response(raw.body, media_type=raw.content_type, headers=raw.headers,
                                status_code=raw.status)
            return JSONResponse(raw.body, headers=raw.headers, status_code=raw.status)
        if events is not None:
            data = b"".join([piece async for piece in _sse(events, named=named)])
            media = "text/event-stream"
        else:
            data = (raw.body if isinstance(raw.body, str) else json.dumps(raw.body)).encode()
            media = raw.content_type if isinstance(raw.body, str) else "application/json"

        async def cut_short() -> AsyncIterator[bytes]:
            yield data[: raw.cut]
            await self._close(http)

        return StreamingResponse(cut_short(), media_type=media, status_code=raw.status,
                                 headers={**raw.headers, "content-length": str(len(data))})

    # -- OpenAI shapes -----------------------------------------------------------------------
    def _openai_calls(self, turn: Turn) -> list[dict[str, Any]]:
        out = [
            {"id": call.get("id") or self._id("call"), "type": "function",
             "function": {"name": call["name"], "arguments": (
                 call["arguments"] if turn.object_arguments else json.dumps(call["arguments"])
             )}}
            for call in turn.calls
        ]
        if turn.cut is not None and out:
            function = out[-1]["function"]
            function["arguments"] = function["arguments"][: turn.cut]
        return out

    def _without_reasoning(self, body: dict[str, Any], turn: Turn) -> str | None:
        """Why DeepSeek's thinking mode would refuse ``body`` (`Turn.needs_reasoning`)."""
        if not turn.needs_reasoning:
            return None
        messages = body.get("messages") or []
        last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"),
                        default=-1)
        for i, message in enumerate(messages[last_user + 1:], last_user + 1):
            if message.get("role") == "assistant" and message.get("tool_calls") and (
                message.get(turn.reasoning_key) not in self.reasoned
            ):
                return (f"messages[{i}]: the {turn.reasoning_key} of an assistant message with "
                        "tool calls must be passed back in thinking mode")
        return None

    def _openai_completion(self, turn: Turn) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": turn.text}
        if turn.reasoning:
            message[turn.reasoning_key] = turn.reasoning
        if turn.calls:
            message["tool_calls"] = self._openai_calls(turn)
        out: dict[str, Any] = {
            "id": self._id("chatcmpl"), "object": "chat.completion", "created": 0,
            "model": self.model,
            "choices": [{"index": 0, "message": message,
                         "finish_reason": _finish(turn)}],
        }
        if turn.usage is not None:
            out["usage"] = _openai_usage(turn.usage)
        return out

    def _openai_chunks(self, body: dict[str, Any], turn: Turn) -> list[dict[str, Any]]:
        cid = self._id("chatcmpl")

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {"id": cid, "object": "chat.completion.chunk", "created": 0,
                    "model": self.model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

        out = [chunk({"role": "assistant", "content": ""})]
        thought = turn.reasoning or ""
        out += [chunk({turn.reasoning_key: thought[i : i + 4], "content": None})
                for i in range(0, len(thought), 4)]
        text = turn.text or ""
        out += [chunk({"content": text[i : i + 4]}) for i in range(0, len(text), 4)]
        for index, call in enumerate(self._openai_calls(turn)):
            arguments = call["function"]["arguments"]
            head = {"index": index, "id": call["id"], "type": "function",
                    "function": {"name": call["function"]["name"], "arguments": ""}}
            if not isinstance(arguments, str):  # the whole object in the first fragment
                head["function"]["arguments"] = arguments
                out.append(chunk({"tool_calls": [head]}))
                continue
            out.append(chunk({"tool_calls": [head]}))
            out += [chunk({"tool_calls": [{"index": index,
                                           "function": {"arguments": arguments[i : i + 5]}}]})
                    for i in range(0, len(arguments), 5)]
        out.append(chunk({}, _finish(turn)))
        wants_usage = (body.get("stream_options") or {}).get("include_usage")
        if wants_usage and turn.usage is not None:
            out.append({"id": cid, "object": "chat.completion.chunk", "created": 0,
                        "model": self.model, "choices": [], "usage": _openai_usage(turn.usage)})
        return out

    # -- Anthropic shapes --------------------------------------------------------------------
    def _unsigned_tool_use(self, body: dict[str, Any]) -> str | None:
        """Why Anthropic would refuse a request made with thinking on: an assistant turn with
        tool use that does not start with a thinking block this server signed."""
        for i, message in enumerate(body.get("messages") or []):
            content = message.get("content")
            if message.get("role") != "assistant" or not isinstance(content, list):
                continue
            if not any(b.get("type") == "tool_use" for b in content):
                continue
            first = content[0] if content else {}
            if first.get("type") != "thinking" or first.get("signature") not in self.signed:
                return (f"messages.{i}.content.0.type: Expected `thinking` or "
                        f"`redacted_thinking`, but found `{first.get('type')}`. When `thinking` "
                        "is enabled, an assistant message with tool use must start with the "
                        "thinking block it was given")
        return None

    def _anthropic_message(self, turn: Turn, thinks: bool = False) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if thinks:
            signature = self._id("sig")
            self.signed.add(signature)
            content.append({"type": "thinking", "thinking": "Let me think about it.",
                            "signature": signature})
        if turn.text:
            content.append({"type": "text", "text": turn.text})
        content += [{"type": "tool_use", "id": call.get("id") or self._id("toolu"),
                     "name": call["name"], "input": call["arguments"]} for call in turn.calls]
        stop = "tool_use" if turn.calls else "end_turn"
        if turn.cut is not None:
            stop = "max_tokens"
            if turn.calls:  # the keys written whole before the limit
                content[-1]["input"] = _written(content[-1]["input"], turn.cut)
        out: dict[str, Any] = {
            "id": self._id("msg"), "type": "message", "role": "assistant", "model": self.model,
            "content": content, "stop_reason": stop, "stop_sequence": None,
        }
        if turn.usage is not None:
            out["usage"] = {"input_tokens": turn.usage[0], "output_tokens": turn.usage[1]}
        return out

    def _anthropic_events(self, turn: Turn, thinks: bool = False) -> list[dict[str, Any]]:
        whole = self._anthropic_message(turn, thinks)
        if turn.cut is not None and turn.calls:  # streamed as far as the limit let it
            whole["content"][-1]["input"] = json.dumps(turn.calls[-1]["arguments"])[: turn.cut]
        start = {**whole, "content": [], "stop_reason": None}
        if turn.usage is not None:
            start["usage"] = {"input_tokens": turn.usage[0], "output_tokens": 1}
        out: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
        for index, block in enumerate(whole["content"]):
            kind = block["type"]
            if kind == "thinking":
                out.append({"type": "content_block_start", "index": index,
                            "content_block": {"type": "thinking", "thinking": ""}})
                out += _deltas(index, "thinking_delta", "thinking", block["thinking"], 6)
                out.append({"type": "content_block_delta", "index": index,
                            "delta": {"type": "signature_delta",
                                      "signature": block["signature"]}})
            elif kind == "text":
                out.append({"type": "content_block_start", "index": index,
                            "content_block": {"type": "text", "text": ""}})
                out += _deltas(index, "text_delta", "text", block["text"], 4)
            else:
                out.append({"type": "content_block_start", "index": index,
                            "content_block": {**block, "input": {}}})
                given = block["input"]
                out += _deltas(index, "input_json_delta", "partial_json",
                               given if isinstance(given, str) else json.dumps(given), 5)
            out.append({"type": "content_block_stop", "index": index})
        delta: dict[str, Any] = {
            "type": "message_delta",
            "delta": {"stop_reason": whole["stop_reason"], "stop_sequence": None},
        }
        if turn.usage is not None:
            delta["usage"] = {"output_tokens": turn.usage[1]}
        out += [delta, {"type": "message_stop"}]
        return out


async def _stalled(http: Any, stall: Stall, byte: bytes) -> AsyncIterator[bytes]:
    """`Stall`'s body: a meaningless byte now and then, or none, until the client leaves."""
    while not await http.is_disconnected():
        if stall.every is None:
            await http.receive()  # nothing to send: wait for the client's disconnect
            continue
        await asyncio.sleep(stall.every)
        yield byte


def _finish(turn: Turn) -> str:
    """An OpenAI reply's finish reason."""
    if turn.cut is not None:
        return "length"
    return "tool_calls" if turn.calls else "stop"


def _written(arguments: dict[str, Any], cut: int) -> dict[str, Any]:
    """The keys of ``arguments`` whose JSON text ends within its first ``cut`` characters."""
    out: dict[str, Any] = {}
    for key, value in arguments.items():
        if len(json.dumps({**out, key: value})) - 1 > cut:
            break
        out[key] = value
    return out


def _deltas(index: int, kind: str, key: str, text: str, size: int) -> list[dict[str, Any]]:
    """``text`` as Anthropic streams it: ``content_block_delta`` events of ``size`` characters."""
    return [{"type": "content_block_delta", "index": index,
             "delta": {"type": kind, key: text[i : i + size]}}
            for i in range(0, len(text), size)]


def _openai_usage(usage: tuple[int, int]) -> dict[str, int]:
    return {"prompt_tokens": usage[0], "completion_tokens": usage[1],
            "total_tokens": usage[0] + usage[1]}


async def _sse(events: list[dict[str, Any]], *, named: bool = False) -> AsyncIterator[bytes]:
    """Server-sent events: Anthropic names each event, OpenAI ends with ``[DONE]``."""
    for event in events:
        head = f"event: {event['type']}\n" if named else ""
        yield f"{head}data: {json.dumps(event)}\n\n".encode()
    if not named:
        yield b"data: [DONE]\n\n"

