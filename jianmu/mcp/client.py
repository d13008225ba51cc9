"""`MCPClient`: one connection to an MCP server, owned by one event loop.

The SDK's transports and `ClientSession` are async context managers whose task groups must
be entered and exited in the same task, while a tool call may come from any task (a
`ReactiveRunner`'s task group, a test) and ``close()`` from yet another. So one background
task owns the session (enters the transport and the session, waits for a stop signal, exits
them) inside a task group that lives on one loop:

- the loop of the first caller, when it is asyncio: calls from that loop (the runner's) go
  straight to the session, with no thread hop;
- a private asyncio loop in a daemon thread, when the caller has no running asyncio loop
  (``asyncio.get_running_loop()`` fails: a trio caller, say).

A call from any other loop is handed over (``asyncio.run_coroutine_threadsafe``) and
cancelling the caller cancels it there. When the loop that held the session has ended (an
``asyncio.run`` that returned), the next call opens a new session on its own loop.

A call that finds the connection closed marks it broken and fails; the next call
reconnects once (a new process for stdio, a new session for HTTP) before it runs. A server
whose messages ended while no call was waiting (a stdio process that exited between two
turns) is marked broken then (`WatchedStream`), so the next call starts it again rather than
failing on it. An HTTP
server that answers ``404`` to our session has forgotten it (restarted, expired): as the MCP
transport spec asks, a new session is started, and the request it refused, which it never ran,
is sent once more on it (a request whose connection dropped is not: it may have run).

Jianmu is asyncio inside. anyio appears here in two places only: where a caller of any async
library meets the client (waiting for a handed-over call, starting the private loop from a
trio caller), and on the session's side, which drives the SDK: the SDK is built on anyio, and
its task groups and cancel scopes are what it requires.

The session's side (its task group, the session's task, the callbacks the SDK holds) holds
the client weakly, so a client dropped without ``close()`` is collected: its finalizer warns
and stops what the session left (`jianmu.mcp._dropped`).

Header values (a bearer token among them) live in `SecretHeaders`
(`jianmu.mcp._transport`), whose repr and str show only the header names, so a client's repr,
an error or a log line never carries them. The SDK's and the transport's errors become
Jianmu's (`MCPError`, `ToolTimeoutError`) in one place, `translated`.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
import threading
import weakref
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread

from jianmu._secrets import redact_text, url_secrets
from jianmu._text import visible
from jianmu.errors import MCPError, MissingExtraError, ToolTimeoutError
from jianmu.mcp import data
from jianmu.mcp._dropped import SHUTDOWN_SECONDS, Leftovers, abandoned
from jianmu.mcp._listing import NotingStream, ToolListings
from jianmu.mcp._sdk_noise import quiet_sdk_noise, speaking
from jianmu.mcp._transport import RefusedAuth, SecretHeaders, WatchedStream, open_transport
from jianmu.mcp.data import MCPCallResult

if TYPE_CHECKING:
    from anyio.abc import TaskGroup, TaskStatus
    from mcp import ClientSession

    from jianmu.mcp.data import (
        MCPPrompt,
        MCPPromptInfo,
        MCPResourceContent,
        MCPResourceInfo,
        MCPToolInfo,
    )

__all__ = ("MCPClient", "MCPServerOptions")


logger = logging.getLogger("jianmu.mcp")

_T = TypeVar("_T")


class MCPServerOptions(TypedDict, total=False):
    """Where an MCP server is and how long it may take: `MCPClient`'s keyword arguments.

    `MCPToolProvider` takes them too and hands them on (see `MCPClient` for each one).
    """

    command: str | None
    args: Sequence[str]
    env: Mapping[str, str] | None
    url: str | None
    headers: Mapping[str, str] | None
    bearer_token: str | None
    timeout: float
    cwd: str | None
    connect_timeout: float
    secrets: Sequence[str]


class MCPClient:
    """A client of one MCP server over stdio (``command``) or streamable HTTP (``url``).

    ``await connect()``, then ``list_tools()`` / ``call_tool()``, then ``await close()``;
    or ``async with MCPClient(...) as client``. Safe to use from several tasks at once.

    Args:
        command: Executable of a stdio server.
        args: Its arguments.
        env: Extra environment variables for it (merged over a safe default set).
        url: URL of a streamable-HTTP server, e.g. ``http://127.0.0.1:8000/mcp``.
        headers: HTTP headers sent with every request to ``url`` (values never shown).
        bearer_token: Sent as ``Authorization: Bearer <token>`` with every request to ``url``.
        timeout: Seconds that each tool call may take.
        cwd: Working folder of a stdio server.
        name: Shown in error messages; defaults to the command or URL.
        connect_timeout: Seconds that starting the server, the handshake and listing the
            tools may take. Kept apart from ``timeout`` because a process start on a busy
            machine can take far longer than a short call budget.
        secrets: Values never shown in a repr or an error, wherever they stand in ``args``
            or ``url`` (a token the config read with ``${VAR}``; a URL's password and secret
            query values are never shown either).

    Raises:
        ValueError: neither or both of ``command`` and ``url``, a URL that is not http(s),
            headers or a token for a stdio server, or a timeout that is not positive.
    """

    def __init__(
        self,
        *,
        command: str | None = None,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        url: str | None = None,
        headers: Mapping[str, str] | None = None,
        bearer_token: str | None = None,
        timeout: float = 30.0,
        cwd: str | None = None,
        name: str | None = None,
        connect_timeout: float = 30.0,
        secrets: Sequence[str] = (),
    ) -> None:
        if (command is None) == (url is None):
            raise ValueError(
                "MCPClient needs exactly one of command= (a stdio server) or url= (a "
                f"streamable-HTTP server); got command={command!r}, url={url!r}"
            )
        quiet_sdk_noise()  # a banner on a stdio server's stdout: one line, not a traceback
        if command is not None and not command.strip():
            raise ValueError("MCPClient command= is empty; give the server's executable")
        if url is not None and not url.startswith(("http://", "https://")):
            raise ValueError(f"MCP server url {url!r} must start with http:// or https://")
        if command is not None and (headers or bearer_token is not None):
            raise ValueError(
                "MCPClient headers= and bearer_token= are for streamable-HTTP servers (url=); "
                "give a stdio server its secrets through env="
            )
        if isinstance(args, str):
            raise ValueError(f"MCPClient args= must be a list of strings, not the string {args!r}")
        for label, value in (("timeout", timeout), ("connect_timeout", connect_timeout)):
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
                raise ValueError(
                    f"MCPClient {label}= must be a positive number of seconds, got {value!r}"
                )
        self.command = command
        self.args = [str(a) for a in args]
        self.env = dict(env or {})
        self.url = url
        self._headers = SecretHeaders(headers, bearer_token=bearer_token)
        self._refused = RefusedAuth()
        self._tools_listeners: list[Callable[[], None]] = []
        self.timeout = float(timeout)
        self.connect_timeout = float(connect_timeout)
        self.cwd = cwd
        # an error reaches the model and the logs: it names the server by its command line
        # or URL, without the tokens they may hold
        self._secrets = (*map(str, secrets), *(url_secrets(url) if url else ()))
        self.name = name or command or (url and self.masked(url)) or "mcp"
        self.connections = 0
        """How many times a session was opened (1 after ``connect``; more after reconnects)."""
        self.skipped_tools: tuple[str, ...] = ()
        """Why each tool the last ``list_tools`` left out is not a valid MCP tool (a server's
        broken tool fails no other)."""
        # Caller side. The session lives on ``_loop``: the first caller's own event loop
        # (calls from it go straight to the session), or a private loop in ``_thread`` when
        # the caller's is not asyncio. Calls from any other loop are handed over to it.
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._host: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[None] | None = None
        self._start_lock = threading.Lock()
        self._closed = False
        # What the session holds on its loop, for the finalizer of a client dropped unclosed
        # (`jianmu.mcp._dropped`): the loop side holds the client weakly, so it is collected.
        self._left = Leftovers()
        self._finalizer: weakref.finalize[Any, Any] | None = None
        # Loop side: touched only by code running in the session's event loop.
        self._tg: TaskGroup | None = None
        self._lock: anyio.Lock | None = None
        self._session: ClientSession | None = None
        self._broken = False
        self._forgotten = 0  # the session the HTTP server answered 404 for (it forgot it)

    @property
    def transport(self) -> str:
        """``"stdio"`` or ``"http"``."""
        return "stdio" if self.command is not None else "http"

    def masked(self, text: str) -> str:
        """``text`` without the client's secrets (`redact_text`: URL passwords too)."""
        return redact_text(text, *self._secrets)

    def where(self) -> str:
        """The server's command line or URL, as shown: its secrets masked."""
        return self.masked(self.url or " ".join([self.command or "", *self.args]))

    def __repr__(self) -> str:
        return f"<MCPClient {self.name!r} {self.transport} {self.where()!r}>"

    def on_tools_changed(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` when the server says its tools changed (``list_changed``).

        It runs on the session's event loop and must not block; list the tools again later.
        """
        self._tools_listeners.append(listener)

    # -- caller side ------------------------------------------------------------------------

    async def connect(self) -> None:
        """Start the server (stdio) or open the session (HTTP) and run the handshake.

        Raises:
            MissingExtraError: the ``mcp`` extra is not installed.
            MCPError: the server could not be started, reached or initialised.
        """
        require_mcp()
        await self._submit(self._ensure_session)

    async def list_tools(self) -> list[MCPToolInfo]:
        """The server's valid tools (every page); why each other one was left out is in
        ``skipped_tools``.

        Raises:
            MCPError: the server could not be reached or answered badly.
        """
        skipped: list[str] = []
        infos = await self._submit(
            self._request, "tools/list", data.list_tools, skipped, self.name
        )
        self.skipped_tools = tuple(skipped)
        for line in skipped:
            logger.info("%s; skipped", line)
        return infos

    async def list_resources(self, *, templates: bool = False) -> list[MCPResourceInfo]:
        """The server's resources (every page), or its resource templates; `MCPError` as for
        ``list_tools``."""
        if templates:
            fn = data.list_resource_templates
            return await self._submit(self._request, "resources/templates/list", fn)
        return await self._submit(self._request, "resources/list", data.list_resources)

    async def read_resource(self, uri: str) -> list[MCPResourceContent]:
        """The parts of the resource at ``uri``: text, or decoded binary data.

        Raises:
            MCPError: the server could not be reached or refused the read.
        """
        return await self._submit(
            self._request, f"resources/read {uri!r}", data.read_resource, str(uri)
        )

    async def list_prompts(self) -> list[MCPPromptInfo]:
        """The server's prompts (every page); `MCPError` as for ``list_tools``."""
        return await self._submit(self._request, "prompts/list", data.list_prompts)

    async def get_prompt(self, name: str, arguments: Mapping[str, Any] | None = None) -> MCPPrompt:
        """The prompt ``name`` filled in with ``arguments`` (sent as strings).

        Raises:
            MCPError: the server could not be reached, or refused (unknown prompt, a
                required argument missing).
        """
        args = {str(k): str(v) for k, v in (arguments or {}).items()}
        return await self._submit(
            self._request, f"prompts/get {name!r}", data.get_prompt, name, args
        )

    async def call_tool(
        self, name: str, arguments: Mapping[str, Any] | None = None, *, timeout: float | None = None
    ) -> MCPCallResult:
        """Call a tool; a tool failure comes back as ``is_error``, not as an exception.

        Raises:
            MCPError: the connection closed (the next call reconnects) or the server
                refused the request.
            ToolTimeoutError: no answer within ``timeout`` (default: the client's).
        """
        return await self._submit(self._call_tool, name, dict(arguments or {}), timeout)

    async def close(self) -> None:
        """Stop the session and the server process; idempotent. A closed client stays closed."""
        self._closed = True
        if self._finalizer is not None:
            self._finalizer.detach()  # closed as it should be: no warning, no second stop
        loop, thread, host = self._loop, self._thread, self._host
        if loop is None:
            return
        self._loop = self._thread = self._host = None
        if loop is running_loop():
            await self._wind_down(host)
            return
        if loop.is_closed():
            return  # the loop ended and took the session with it
        if thread is None and not loop.is_running():
            # run_sync()'s loop between two runs: nothing would take a shutdown handed to it,
            # so it is run here until the session is down, in a worker (this thread has a
            # loop of its own running)
            wind_down = self._wind_down(host)
            try:
                await anyio.to_thread.run_sync(loop.run_until_complete, wind_down)
                return
            except RuntimeError:  # its owner runs it again, or closed it, meanwhile
                wind_down.close()
                if not loop.is_running():
                    return
        with contextlib.suppress(Exception):
            await wait_future(hand_over(self._shutdown(), loop))
        if thread is not None:
            await anyio.to_thread.run_sync(thread.join, SHUTDOWN_SECONDS)

    async def _wind_down(self, host: asyncio.Task[None] | None) -> None:
        """Stop the session on its own loop and wait for ``host``'s task group to end."""
        if host is not None and not host.done():
            with contextlib.suppress(Exception):
                await self._shutdown()
            with contextlib.suppress(BaseException):
                await host  # its task group has ended: the server process is gone

    async def __aenter__(self) -> MCPClient:
        await self.connect()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def _submit(self, fn: Callable[..., Coroutine[Any, Any, _T]], *args: Any) -> _T:
        if self._closed:
            raise MCPError(f"MCP client {self.name!r} is closed; make a new one")
        loop, current = self._loop, running_loop()
        if loop is not None and loop is not current and self._thread is None and (
            loop.is_closed() or not loop.is_running()
        ):
            self._abandon(loop)  # the loop that held the session has ended
            loop = None
        if loop is None:
            if current is not None:
                loop = self._adopt(current)
            else:  # no asyncio loop (trio): the session gets a loop of its own in a thread
                loop = await anyio.to_thread.run_sync(self._start_loop)
        if loop is current:  # the session lives here: no hand-over
            ready = self._ready
            if ready is not None and not ready.done():
                await asyncio.shield(ready)
            return await fn(*args)
        coro = fn(*args)
        try:
            # Hands the coroutine over without waiting for the other loop to take it.
            future = hand_over(coro, loop)
        except RuntimeError as exc:  # its loop ended under a concurrent close()
            coro.close()
            raise MCPError(f"MCP client {self.name!r} is closed; make a new one") from exc
        return await wait_future(future)

    def _adopt(self, loop: asyncio.AbstractEventLoop) -> asyncio.AbstractEventLoop:
        """Host the session on the caller's own ``loop`` (a task that holds its task group)."""
        ready: asyncio.Future[None] = loop.create_future()
        self._loop, self._ready = loop, ready
        self._left.loop = loop
        self._watch()
        self._host = loop.create_task(
            host_main(weakref.ref(self), self._left, ready), name=f"jianmu-mcp-{self.name}"
        )
        return loop

    def _watch(self) -> None:
        """Warn and stop the session if this client is dropped unclosed (`abandoned`)."""
        if self._finalizer is None:
            self._finalizer = weakref.finalize(self, abandoned, self._left, self.name)
            self._finalizer.atexit = False  # an exiting interpreter closes the server's stdin

    def _abandon(self, loop: asyncio.AbstractEventLoop) -> None:
        """Forget a session whose loop ended or stopped; the next call reconnects here."""
        host = self._host
        self._loop = self._host = self._ready = None
        self._session = None
        self._left.forget()
        logger.debug("MCP client %r: its event loop ended; reconnecting on this one", self.name)
        if host is not None and not loop.is_closed():
            # a stopped loop that runs again winds the old session down
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(host.cancel)

    def _start_loop(self) -> asyncio.AbstractEventLoop:
        """Start the private event loop (in a daemon thread) and return it."""
        with self._start_lock:
            if self._loop is not None:
                return self._loop
            ready: Future[asyncio.AbstractEventLoop] = Future()
            thread = threading.Thread(
                target=thread_main, args=(weakref.ref(self), self._left, self.name, ready),
                name=f"jianmu-mcp-{self.name}",
                daemon=True,  # a client never closed must not keep the interpreter alive
            )
            thread.start()
            self._loop, self._thread = ready.result(), thread
            self._left.loop = self._loop
            self._watch()
            return self._loop

    async def _shutdown(self) -> None:
        await self._stop_owner()
        if self._left.quit is not None:
            self._left.quit.set()

    # -- loop side ------------------------------------------------------------------------

    def _server_gone(self, generation: int) -> None:
        """The server's messages ended (a stdio server's process exited): the next call
        starts it again instead of failing on the dead one."""
        if generation == self.connections and self._session is not None:
            logger.info("MCP client %r: the server closed the connection; the next call "
                        "reconnects", self.name)
        self._mark_broken(generation)

    def _session_forgotten(self, generation: int) -> None:
        """The HTTP server answered ``404`` to a request naming session ``generation``: it no
        longer knows it (restarted, expired), so the next request starts a new session."""
        if generation == self.connections:
            self._forgotten = generation
            self._broken = True

    def _mark_broken(self, generation: int) -> None:
        """Mark the session broken, unless a newer one already replaced the failed one.

        A late failure from a session that a reconnect has replaced must not condemn the
        new session (and the calls running on it).
        """
        if generation == self.connections:
            self._broken = True

    async def _stop_owner(self) -> None:
        self._session = None
        # shielded so a cancelled caller still waits for the process to go, but bounded
        await self._left.stop_session()

    async def _ensure_session(self) -> ClientSession:
        """The live session; (re)connect when there is none or it is broken."""
        assert self._lock is not None and self._tg is not None
        session = self._session
        if session is not None and not self._broken:
            return session  # the usual case: no lock (each acquire yields to the loop)
        async with self._lock:
            if self._session is not None and not self._broken:
                return self._session
            await self._stop_owner()
            self._broken = False
            try:
                session, stop, done = await self._tg.start(functools.partial(
                    own_session, weakref.ref(self), self._left, self.connections + 1
                ))
            except Exception as exc:
                raise MCPError(connect_failure(self, exc)) from first_leaf(exc)
            self._session, self._left.stop, self._left.done = session, stop, done
            self._left.opened = True
            self.connections += 1
            return session  # type: ignore[no-any-return]

    async def _request(
        self, what: str, fn: Callable[..., Coroutine[Any, Any, _T]], *args: Any
    ) -> _T:
        """``fn(session, *args)`` on the live session, its errors translated; the whole of it
        within ``connect_timeout`` (a listing's pages each came just in time, forever)."""
        with anyio.move_on_after(self.connect_timeout):
            for attempt in (1, 2):
                session = await self._ensure_session()
                generation = self.connections
                try:
                    with translate(self, what, generation, timeout=self.connect_timeout):
                        return await fn(session, *args)
                except MCPError as exc:
                    if attempt == 2 or not refused_as_forgotten(self, generation, exc.__context__):
                        raise
                    # the server refused the session, not the request: once on a new one
        raise MCPError(
            f"MCP server {self.name!r} did not finish {what} within {self.connect_timeout:g}s "
            "(connect_timeout); raise it if the server is only slow"
        )

    async def _call_tool(
        self, name: str, arguments: dict[str, Any], timeout: float | None
    ) -> MCPCallResult:
        limit = timeout or self.timeout
        for attempt in (1, 2):
            session = await self._ensure_session()
            generation = self.connections
            try:  # not `translate`: a context manager per call costs more than the rest here
                result = await session.call_tool(name, arguments, read_timeout_seconds=limit)
            except Exception as exc:
                if attempt == 1 and refused_as_forgotten(self, generation, exc):
                    # the server never ran it (MCP: a forgotten session is answered 404 and
                    # the client starts a new one): once more, on a new session
                    continue
                mapped = translated(self, f"tools/call {name!r}", generation, exc, timeout=limit)
                if mapped is None:
                    raise
                raise mapped from None
            return data.call_result(result)
        raise AssertionError("unreachable: the second attempt returns or raises")

# -- the session's side: it holds the client weakly (`jianmu.mcp._dropped`) --------------------


def weakly(ref: weakref.ref[Any], method: str, *args: Any) -> Callable[[], None]:
    """A callback calling ``ref()``'s ``method(*args)``; nothing once that is gone."""

    def call() -> None:
        target = ref()
        if target is not None:
            getattr(target, method)(*args)

    return call


async def home(ref: weakref.ref[MCPClient], left: Leftovers, started: Callable[[], Any]) -> None:
    """The client's task group on its loop, until ``left.quit``: on close, or once the
    client was dropped unclosed (then it ends the session first)."""
    left.quit = quit_ = anyio.Event()
    async with anyio.create_task_group() as tg:
        client = ref()
        if client is not None:  # its caller holds it
            client._tg, client._lock = tg, anyio.Lock()
        del client
        started()
        await quit_.wait()
        await left.stop_session()  # a dropped client's; close() stopped it already
        tg.cancel_scope.cancel()  # an owner that outlived its shutdown window


async def host_main(
    ref: weakref.ref[MCPClient], left: Leftovers, ready: asyncio.Future[None]
) -> None:
    """The client's `home` on the caller's loop."""
    try:
        await home(ref, left, lambda: ready.set_result(None))
    except BaseException as exc:
        if not ready.done():
            ready.set_exception(exc)
        raise


def thread_main(
    ref: weakref.ref[MCPClient], left: Leftovers, name: str,
    ready: Future[asyncio.AbstractEventLoop],
) -> None:
    """The client's private loop (a thread's), running its `home`."""
    try:
        asyncio.run(home(ref, left, lambda: ready.set_result(asyncio.get_running_loop())))
    except BaseException as exc:
        if not ready.done():
            ready.set_exception(exc)
        else:
            logger.warning("MCP client %r: its event loop failed: %s", name,
                           visible(describe(exc)))  # a server's words: by their escapes


async def own_session(
    ref: weakref.ref[MCPClient], left: Leftovers, generation: int, *,
    task_status: TaskStatus[tuple[Any, anyio.Event, anyio.Event]],
) -> None:
    """Enter the transport and the session (number ``generation``) of ``ref``'s client, hand
    them out, exit them when told to."""
    from mcp.types import ToolListChangedNotification

    stop, done = anyio.Event(), anyio.Event()
    started = False
    client = ref()
    assert client is not None  # its caller (`_ensure_session`) holds it
    name, connect_timeout = client.name, client.connect_timeout
    speaking.set(name)  # this task's own context: the SDK's reader task inherits it
    client._refused = refused = RefusedAuth()
    transport = open_transport(
        command=client.command, args=client.args, env=client.env, cwd=client.cwd,
        url=client.url, headers=client._headers, refused=refused,
        forgotten=weakly(ref, "_session_forgotten", generation),
        spawned=lambda process: setattr(left, "process", process),
    )
    del client  # this frame lasts as long as the session
    process = None

    async def on_message(message: Any) -> None:
        # Transport-level exceptions (an HTTP POST that failed) mean the link is gone;
        # a line that is not JSON-RPC (ValueError) is the server's noise, not a failure.
        if isinstance(message, Exception) and not isinstance(message, ValueError):
            logger.debug("MCP client %r: transport error: %s", name, message)
            weakly(ref, "_mark_broken", generation)()
        elif isinstance(message, ToolListChangedNotification):
            listeners = getattr(ref(), "_tools_listeners", ())
            for listener in list(listeners):
                try:
                    listener()
                except Exception:  # one bad listener must not stop the session
                    logger.exception("MCP client %r: a tools listener failed", name)
        await anyio.lowlevel.checkpoint()

    try:
        async with contextlib.AsyncExitStack() as stack:
            read, write = await stack.enter_async_context(transport)
            process = left.process
            listings = ToolListings(name)  # one broken tool fails no other
            read = WatchedStream(
                read, weakly(ref, "_server_gone", generation), listings.received
            )
            write = NotingStream(write, listings.sent)
            session = await stack.enter_async_context(
                # requests without their own timeout (the handshake, tools/list) are
                # connection work; tool calls pass the call timeout explicitly
                checked_session_class()(
                    read, write, read_timeout_seconds=connect_timeout,
                    message_handler=on_message,
                )
            )
            with anyio.fail_after(connect_timeout):
                await session.initialize()
            task_status.started((session, stop, done))
            started = True
            await stop.wait()
    except Exception as exc:
        if not started:
            raise
        # A transport that died says so again on the way out; nothing is waiting for it.
        logger.debug("MCP client %r: session closed with %s", name, describe(exc))
    finally:
        if left.process is process:  # the transport stopped it (a newer one is another's)
            left.process = None
        done.set()

@functools.cache
def checked_session_class() -> Any:
    """The SDK's `ClientSession`, checking a tool's result against its output schema as Jianmu
    checks a tool's arguments.

    The SDK checks each result against the output schema the server listed, on the event
    loop, with Python's ``re`` for ``pattern``: a server's ``^(a+)+$`` and its own answer
    ``'a' * 40 + '!'`` stopped the loop, and every timeout of the run, for ages. Here patterns
    are matched by RE2 (linear time), references resolve inside the schema only, and a tool
    that was not listed is not listed again to check it (the server may answer otherwise).
    """
    from mcp import ClientSession

    from jianmu.errors import ToolDefinitionError
    from jianmu.tools._arguments import value_problems

    class CheckedSession(ClientSession):
        """`ClientSession` whose results are checked safely (see `checked_session_class`)."""

        async def validate_tool_result(self, name: str, result: Any) -> None:
            """Check ``result``'s structured content against the tool's listed output schema.

            Raises:
                RuntimeError: it has none, or breaks the schema, or the schema is invalid.
            """
            # the SDK's cache of the last listing; without it, nothing is checked (safe)
            schema = getattr(self, "_tool_output_schemas", {}).get(name)
            if schema is None:
                return
            content = result.structured_content
            if content is None and "structured_content" not in result.model_fields_set:
                raise RuntimeError(
                    f"Tool {name} has an output schema but did not return structured content"
                )
            try:
                problems = value_problems(name, schema, content)
            except ToolDefinitionError as exc:
                raise RuntimeError(f"Invalid schema for tool {name}: {exc}") from None
            if problems:
                more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
                raise RuntimeError(
                    f"Invalid structured content returned by tool {name}: {problems[0]}{more}"
                )

    return CheckedSession

# -- between event loops -----------------------------------------------------------------------


def require_mcp() -> None:
    """Import the SDK or raise `MissingExtraError` naming the ``mcp`` extra."""
    try:
        import mcp  # noqa: F401
    except ImportError as exc:
        raise MissingExtraError("mcp", "mcp") from exc


def first_leaf(exc: BaseException) -> BaseException:
    """The first leaf of an exception group (the SDK's task groups wrap errors)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def describe(exc: BaseException) -> str:
    """``Type: message`` of the error inside ``exc`` (groups unwrapped)."""
    inner = first_leaf(exc)
    text = str(inner)
    return f"{type(inner).__name__}: {text}" if text else type(inner).__name__


async def wait_future(future: Future[_T]) -> _T:
    """Await a `concurrent.futures.Future` from any anyio loop; cancelling cancels it."""
    if not future.done():
        done = anyio.Event()
        token = anyio.lowlevel.current_token()
        loop_thread = threading.get_ident()

        def wake(_: Future[_T]) -> None:
            if threading.get_ident() == loop_thread:
                done.set()
                return
            with contextlib.suppress(RuntimeError):  # the caller's loop has ended
                anyio.from_thread.run_sync(done.set, token=token)

        future.add_done_callback(wake)
        try:
            await done.wait()
        except BaseException:
            future.cancel()
            raise
    return future.result()


def hand_over(coro: Coroutine[Any, Any, _T], loop: asyncio.AbstractEventLoop) -> Future[_T]:
    """Run ``coro`` on ``loop`` (another thread's), in a copy of the caller's context.

    A caller with no running asyncio loop (trio) hands over a fresh context instead: its own
    names its async library, which anyio would read on the session's asyncio loop and take
    for the library running there.
    """
    context = contextvars.copy_context() if running_loop() is not None else contextvars.Context()
    return context.run(asyncio.run_coroutine_threadsafe, coro, loop)


def running_loop() -> asyncio.AbstractEventLoop | None:
    """The caller's asyncio loop; None when it has none (a trio caller)."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def connect_failure(client: Any, exc: BaseException) -> str:
    """Why `MCPClient` ``client`` could not connect, and what to check."""
    leaf = first_leaf(exc)
    refusal = client._refused.explain(client.name, client._headers)
    if refusal is not None:
        return (f"could not connect to MCP server {client.name!r} (url {client.where()!r}): "
                f"{refusal}")
    if isinstance(leaf, TimeoutError):
        detail = (
            f"no answer to the handshake within {client.connect_timeout:g}s "
            "(connect_timeout)"
        )
    else:
        detail = client.masked(describe(leaf))
    where = f"{'command' if client.command is not None else 'url'} {client.where()!r}"
    fix = (
        "check that the command starts an MCP stdio server"
        if client.command is not None
        else "check that the server is running and the URL ends with its MCP path (often /mcp)"
    )
    return f"could not connect to MCP server {client.name!r} ({where}): {detail}; {fix}"

# -- errors ------------------------------------------------------------------------------------


_UNREACHABLE = (
    anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError
)


def translated(
    client: Any, what: str, generation: int, exc: Exception, *, timeout: float | None = None
) -> Exception | None:
    """Jianmu's error for ``exc`` raised by ``client``'s (an `MCPClient`) request ``what``.

    Returns ``None`` for an error that is not the SDK's or the transport's (raise it as is).
    """
    from mcp.shared.exceptions import MCPError as SDKError
    from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT

    if isinstance(exc, SDKError):
        if exc.code == CONNECTION_CLOSED:
            client._mark_broken(generation)
            return MCPError(
                f"MCP server {client.name!r} closed the connection during {what} "
                f"({exc.message}); the next call reconnects"
            )
        if exc.code == REQUEST_TIMEOUT:
            if client._broken and generation == client.connections:
                # the transport failed under the request (HTTP): not a slow tool
                return MCPError(
                    f"MCP server {client.name!r} could not be reached during {what}; "
                    "the next call reconnects"
                )
            return ToolTimeoutError(
                f"MCP server {client.name!r} did not answer {what} within "
                f"{timeout or client.timeout:g}s; raise the server's timeout"
            )
        refusal = client._refused.explain(client.name, client._headers)
        detail = refusal or f"{exc.message} (code {exc.code})"
        return MCPError(f"MCP server {client.name!r} refused {what}: {detail}")
    if isinstance(exc, _UNREACHABLE):
        client._mark_broken(generation)
        return MCPError(
            f"MCP server {client.name!r} is not reachable during {what} "
            f"({client.masked(describe(exc))}); "
            "the next call reconnects"
        )
    if isinstance(exc, (RuntimeError, ValueError)):
        # structured content that breaks its output schema; an answer the SDK's models refuse
        # (a pydantic ValidationError: a listing whose $schema is a number, say)
        return MCPError(f"MCP server {client.name!r} answered {what} badly: {exc}")
    return None


def refused_as_forgotten(client: Any, generation: int, exc: BaseException | None) -> bool:
    """Whether ``exc`` is the server's refusal of a request on session ``generation`` of
    ``client`` that it answered ``404`` to: it never ran the request.

    A JSON-RPC error answer only: a request whose connection dropped (the server died under
    it) may have run, and is not sent again.
    """
    from mcp.shared.exceptions import MCPError as SDKError
    from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT

    return (
        client._forgotten == generation
        and isinstance(exc, SDKError)
        and exc.code not in (CONNECTION_CLOSED, REQUEST_TIMEOUT)
    )


@contextlib.contextmanager
def translate(
    client: Any, what: str, generation: int, *, timeout: float | None = None
) -> Iterator[None]:
    """Turn errors of ``client``'s request ``what`` into Jianmu's (see `translated`)."""
    try:
        yield
    except Exception as exc:
        mapped = translated(client, what, generation, exc, timeout=timeout)
        if mapped is None:
            raise
        raise mapped from None
