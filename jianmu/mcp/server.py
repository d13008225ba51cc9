"""Serve a `ToolSet` over MCP: `build_mcp_server` and `serve` (what ``jianmu mcp serve`` runs).

The SDK's low-level ``Server`` is used because it takes each tool's JSON Schema as it is
(``MCPServer`` derives schemas from Python signatures). The guard's policy is applied here,
on the server side, since an MCP host cannot be asked to honour it:

- a tool whose policy is deny (or admin_only without the ``admin`` role) is not listed, and
  a call naming it is answered as an unknown tool;
- a tool that needs a person's approval (policy confirm, or permission ``user_confirm`` that
  no ``tool_policy`` rule explicitly allows) is listed but every call is refused with an error
  result saying approval is needed: this server has nobody to ask; so is a call any checker
  of the guard's chain leaves waiting for a person (PENDING): only ALLOW runs;
- ``max_tool_calls`` and ``rate_limits`` count the calls of the whole server process;
- the configured tool-output guardrails (``guard.guardrails.tool_output``) read each result
  before the client does: a trip answers the call with the refusal, as our own model reads it.

Calls run through `ToolSet.execute` under a `ToolRunner` built from the execution
constraints, so failures become ``isError`` results and code runs where the config says; over
HTTP each client gets a runner, and so a sandbox, of its own (`ClientRunners`). A
tool that runs other tools (``run_bt_skill``) gets the server's own run context: the guard's
rules, ``execution.workdir`` and the rest of the constraints hold for every tool it runs, and
a call that would need a person's approval is refused (nobody here can give it).
Skills may be served beside the tools: prompt skills as MCP prompts and skill files as MCP
resources (see `jianmu.mcp.skill_content`).

Over HTTP every request must carry the bearer token given to `serve` (``Authorization: Bearer
TOKEN``, compared in constant time); anything else is answered ``401`` with a
``WWW-Authenticate: Bearer`` header, as the MCP authorization spec shapes it (the SDK's own
bearer middleware does it). There is no HTTP server without a token.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import anyio

from jianmu._secrets import same_token
from jianmu.constraints import Constraints, ExecutionConstraints, GuardConstraints
from jianmu.errors import MissingExtraError
from jianmu.execution.runner import ToolRunner
from jianmu.guard import GuardContext, GuardEnforcer, GuardLedger, ToolPolicyChecker
from jianmu.guard.guardrails import configured_guardrails, run_guardrails, withheld
from jianmu.mcp._sdk_noise import quiet_served_noise
from jianmu.mcp.client import require_mcp
from jianmu.mcp.skill_content import FileSource, PromptSource, SkillContent
from jianmu.runtime.context import RunContext, run_constraints
from jianmu.runtime.events import (
    GEN_AI_OPERATION_NAME,
    GEN_AI_TOOL_NAME,
    GEN_AI_TOOL_TYPE,
    failed,
    get_tracer,
    span,
)
from jianmu.state import StateManager
from jianmu.tools.calls import ToolCall, ToolResult, render_output, shown_name
from jianmu.tools.registry import ToolSet

if TYPE_CHECKING:
    import socket

    from mcp.server.lowlevel import Server

    from jianmu.config import AppConfig
    from jianmu.tools.base import Tool

__all__ = (
    "IDLE_S", "MAX_CLIENTS", "BearerToken", "ClientRunners", "answered_once", "build_mcp_server",
    "jianmu_version", "serve", "serve_sync", "served_tools",
)

_CLIENT_ID = "jianmu-mcp-client"
"""Who a request with the server's token is, for the SDK's session bookkeeping."""


def jianmu_version() -> str:
    """Jianmu's installed version (what ``serverInfo.version`` says), ``0+unknown`` when the
    package metadata is missing (a bare checkout on ``PYTHONPATH``)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("jianmu")
    except PackageNotFoundError:
        return "0+unknown"


def served_tools(
    toolset: ToolSet, *, guard: GuardConstraints | None = None, user_roles: Iterable[str] = ()
) -> list[Tool]:
    """The tools of ``toolset`` that a server built with this guard lists: not deprecated, not
    hidden by ``tool_policy`` (a deny rule, a deny default), admin_only ones only for admins."""
    policy = ToolPolicyChecker.from_guard_constraints(guard or GuardConstraints())
    roles = frozenset(str(r).lower() for r in user_roles)
    return [t for t in toolset.active() if not policy.hides(t, user_roles=roles)]


def _error(text: str) -> Any:
    import mcp.types as types

    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def _success(result: ToolResult) -> Any:
    import mcp.types as types

    output = result.output
    text = render_output(output)
    # a tool's images and audio (`ToolOutput`) go out as MCP image and audio content
    media: list[Any] = [
        types.ImageContent(type="image", data=part.data, mime_type=part.mime_type)
        if part.kind == "image"
        else types.AudioContent(type="audio", data=part.data, mime_type=part.mime_type)
        for part in result.media
    ]
    if isinstance(output, dict):
        # structured content without an output schema: clients validate nothing extra; the
        # models and dates a dict holds go out as their fields and ISO text, as render_output
        # writes them (the text is JSON unless the dict cannot be, e.g. nested past the stack)
        not_finite: list[str] = []  # NaN, Infinity: not JSON, so a client's JSON.parse fails
        try:
            structured = json.loads(text, parse_constant=_noted(not_finite))
        except ValueError:
            text = json.dumps(output, default=str)
            structured = json.loads(text, parse_constant=_noted(not_finite))
        if not_finite:  # both parts say null, as the structured content must (JSON)
            text = json.dumps(structured, ensure_ascii=False)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text), *media],
            structured_content=structured,
        )
    return types.CallToolResult(content=[types.TextContent(type="text", text=text), *media])


def _noted(seen: list[str]) -> Callable[[str], None]:
    """A ``parse_constant`` for `json.loads` that notes ``NaN``/``Infinity`` and reads null."""

    def constant(name: str) -> None:
        seen.append(name)

    return constant


def build_mcp_server(
    toolset: ToolSet,
    *,
    guard: GuardConstraints | None = None,
    execution: ExecutionConstraints | None = None,
    runner: ToolRunner | None = None,
    name: str = "jianmu",
    user_roles: Iterable[str] = (),
    prompts: Iterable[PromptSource] = (),
    files: Iterable[FileSource] = (),
    config: AppConfig | None = None,
) -> Server[Any]:
    """An MCP server (the SDK's low-level ``Server``) exposing the tools of ``toolset``.

    Args:
        toolset: The tools to serve (deprecated ones are left out).
        guard: The guard constraints, usually the config's ``guard``; see the module docstring.
        execution: Execution constraints for the `ToolRunner` (ignored with ``runner``).
        runner: A `ToolRunner` to use, for every client; by default one is built from
            ``execution`` (and one more for each HTTP client, its own sandbox) and closed
            when the server stops.
        name: The server's name, sent to clients (its version is Jianmu's).
        user_roles: Roles of whoever connects; ``admin`` exposes admin_only tools.
        prompts: Skills served as MCP prompts (name, description; the body as a user message).
        files: Skills whose folders' files are served as MCP resources
            ``skill://<skill>/<path>``.
        config: The configuration the served tools run under (what a tool that runs other
            tools, such as ``run_bt_skill``, reads); ``guard`` and ``execution`` default to
            its own.

    Raises:
        MissingExtraError: the ``mcp`` extra is not installed.
        ConfigError: a ``tool_policy`` rule or a limit in ``guard`` is invalid.
    """
    require_mcp()
    import mcp.types as types
    from mcp.server.lowlevel import Server

    if not isinstance(toolset, ToolSet):
        raise TypeError(f"build_mcp_server serves a ToolSet, got {toolset!r}")
    if config is not None:
        guard = guard if guard is not None else config.guard
        execution = execution if execution is not None else config.execution
    guard = guard or GuardConstraints()
    owned_runner = runner is None
    if runner is None:
        runner = ToolRunner.from_execution_constraints(execution)
    runners = ClientRunners(runner, (lambda: ToolRunner.from_execution_constraints(execution))
                            if owned_runner else None)
    # The guard resolves path arguments against the folder the tools run in (the runner's
    # workspace: execution.workdir), never the server's own working folder.
    workspace = runner.workspace
    policy = ToolPolicyChecker.from_guard_constraints(guard, workspace=workspace)
    enforcer = GuardEnforcer.from_guard_constraints(guard, workspace=workspace)
    # this server's calls, for max_tool_calls and the rate limits, in a state of its own that
    # each call's tool gets (injected by declaration, under a namespace of the call's): a BT
    # skill's tool steps count in it too (`ledger_view`), not in a fresh ledger per skill run
    counts = StateManager()
    counts.replace({"guard_ledger": GuardLedger()})
    call_numbers = itertools.count()
    roles = frozenset(str(r).lower() for r in user_roles)
    served = served_tools(toolset, guard=guard, user_roles=roles)
    listing = [types.Tool.model_validate(_descriptor(t)) for t in served]
    chosen = ToolSet.from_tools(served)  # one name resolution: exact, ASCII case, alias
    # the server's own run: its guard and execution (the runner's workspace), its roles;
    # nobody to ask (confirm is refused), events unheard. A tool that runs tools of its own
    # (run_bt_skill) runs them under these, never under a default context.
    served_execution = runner.execution.model_copy(update={"workdir": str(workspace)})
    base = config.constraints() if config is not None else Constraints()
    run_config = config if config is not None else _config_of(guard, served_execution)
    run_context = RunContext(
        config=run_config,
        constraints=run_constraints(
            base.model_copy(update={"guard": guard, "execution": served_execution})
        ),
        interaction=None, user_roles=roles,
        # each call an execute_tool span, the spans of a BT skill's nodes inside it
        tracer=get_tracer(enabled=run_config.telemetry.enabled),
    )

    @contextlib.asynccontextmanager
    async def lifespan(_server: Any) -> AsyncIterator[dict[str, Any]]:
        try:
            yield {}
        finally:
            if owned_runner:
                await runners.close()

    async def list_tools(_ctx: Any, _params: Any) -> Any:
        return types.ListToolsResult(tools=list(listing))

    async def call_tool(_ctx: Any, params: Any) -> Any:
        found = chosen.get(params.name) if isinstance(params.name, str) else None
        if found is None:
            known = ", ".join(t.name for t in served) or "none"
            return _error(
                f"unknown tool {shown_name(params.name)!r}; this server offers: {known}"
            )
        args = dict(params.arguments or {})
        call = ToolCall(name=found.name, arguments=args)
        # the arguments as the tool receives them too (`10000.0`, `"yes"`, a null path)
        received = policy.received(call, found)
        verdict, reason, _rule = policy.resolve(call, found, received=received)
        if verdict == "confirm":
            return _error(
                f"tool {found.name!r} needs a person's approval before it runs ({reason}), and "
                "this MCP server cannot ask for it; approve it by allowing the tool in the "
                f"config's guard.tool_policy (e.g. {found.name}: allow)"
            )
        ledger = GuardLedger.of(counts.get("guard_ledger"))
        decision = enforcer.check(
            "tool_call",
            GuardContext(
                call=call, tool=found, run=run_context, received=received,
                calls_made=ledger.calls_made, call_times=ledger.call_times,
            ),
        )
        if decision.awaiting_approval:  # a checker of the chain asks a person: nobody here
            return _error(
                f"tool {found.name!r} needs a person's approval before it runs "
                f"({decision.reason}), and this MCP server cannot ask for it"
            )
        if not decision.allowed:  # anything but ALLOW refuses: a kind added later included
            return _error(f"tool {found.name!r} refused by the guard: {decision.reason}")
        # counted before the await: a concurrent call sees it (nothing awaits in between)
        counts.replace({"guard_ledger": ledger.after(
            [found.name], enforcer.clock(), timed=enforcer.rate_limited(found.name))})
        scope = f"mcp_call.{next(call_numbers)}"
        # only a tool that declares a run-context parameter gets it (injection by declaration)
        attributes = {GEN_AI_OPERATION_NAME: "execute_tool", GEN_AI_TOOL_NAME: found.name,
                      GEN_AI_TOOL_TYPE: "function"}  # never its arguments nor result
        async with runners.runner_for(_ctx.request) as client_runner:
            with span(run_context.tracer, f"execute_tool {found.name}", attributes) as current:
                try:
                    result = await chosen.execute(
                        found.name, args, runner=client_runner,
                        injected={"ctx": run_context, "state": counts.scope(scope)})
                finally:
                    counts.clear_namespace(scope)
                if not result.ok:
                    failed(current, "_OTHER")
        # the configured tool-output guardrails, as for a model of our own: the client's
        # model reads the result (a BT skill's steps pass them inside the skill already)
        guardrails = configured_guardrails("tool_output", (), run_context.constraints)
        if guardrails:
            tripped = await run_guardrails(
                "tool_output", guardrails, run_context, result, run_context.events,
                timeout=guard.guardrails.timeout_s, tool=found.name)
            if tripped is not None:
                result = withheld(result, f"guardrail {tripped[0]!r} tripped "
                                          f"({tripped[1].reason})")
        if not result.ok:
            return _error(result.error or f"tool {found.name!r} failed")
        return _success(result)

    # prompts and resources are advertised only when there are some (the SDK derives the
    # server's capabilities from the handlers it is given)
    content = SkillContent(prompts=prompts, files=files)
    return Server(
        name,
        version=jianmu_version(),
        lifespan=lifespan,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_prompts=content.list_prompts if content.prompts else None,
        on_get_prompt=content.get_prompt if content.prompts else None,
        on_list_resources=content.list_resources if content.folders else None,
        on_read_resource=content.read_resource if content.folders else None,
        on_list_resource_templates=(
            content.list_resource_templates if content.folders else None
        ),
        get_tool_input_schema=lambda n: (
            found.parameters if (found := chosen.get(n)) is not None else None
        ),
    )


def _config_of(guard: GuardConstraints, execution: ExecutionConstraints) -> AppConfig:
    from jianmu.config import AppConfig

    return AppConfig(guard=guard, execution=execution)


def _descriptor(tool: Any) -> dict[str, Any]:
    """The tool's MCP definition without ``outputSchema``.

    A declared output schema obliges every result to carry matching structured content, and
    a result cut to ``max_result_length`` would break it; clients get text (and structured
    content for dict results) instead.
    """
    out = dict(tool.to_mcp())
    out.pop("outputSchema", None)
    return out


async def serve(
    toolset: ToolSet,
    *,
    transport: Literal["stdio", "http"] = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str = "/mcp",
    guard: GuardConstraints | None = None,
    execution: ExecutionConstraints | None = None,
    name: str = "jianmu",
    user_roles: Iterable[str] = (),
    prompts: Iterable[PromptSource] = (),
    files: Iterable[FileSource] = (),
    token: str | None = None,
    config: AppConfig | None = None,
    listener: socket.socket | None = None,
) -> None:
    """Serve ``toolset`` over MCP until the client disconnects (stdio) or the task is cancelled.

    Args:
        toolset: The tools to serve.
        transport: ``stdio`` (the process's stdin/stdout) or ``http`` (streamable HTTP at
            ``http://host:port/path``).
        host: Interface to listen on (http).
        port: Port to listen on (http).
        path: The MCP endpoint's path (http).
        guard: The guard constraints applied on the server side (see `build_mcp_server`).
        execution: Execution constraints for running the tools.
        name: The server's name.
        user_roles: Roles of whoever connects.
        prompts: Skills served as MCP prompts.
        files: Skills whose files are served as MCP resources.
        token: http: the bearer token every request must carry (``jianmu._secrets.new_token``
            makes one); required, on every interface, loopback included.
        config: The configuration the tools run under (see `build_mcp_server`).
        listener: http: a socket already bound to ``host:port`` (`jianmu._net.bind_listener`)
            to serve on; default: one bound here.

    Raises:
        ValueError: an unknown transport, a port outside 1..65535, or http without a token.
        OSError: http: ``host:port`` cannot be listened on (in use, not this machine's).
        MissingExtraError: the ``mcp`` extra (or uvicorn, for http) is not installed.
    """
    if transport not in ("stdio", "http"):
        raise ValueError(f"unknown MCP transport {transport!r}; use 'stdio' or 'http'")
    if transport == "http" and not (isinstance(port, int) and 0 < port < 65536):
        raise ValueError(f"port must be an integer in 1..65535, got {port!r}")
    if transport == "http" and not (isinstance(token, str) and token.strip()):
        where = f"{host}:{port}"
        raise ValueError(
            f"MCP over HTTP ({where}) needs a bearer token: anyone who can reach the port "
            "would run the tools; pass token= (jianmu._secrets.new_token() makes one)"
        )
    server = build_mcp_server(
        toolset, guard=guard, execution=execution, name=name, user_roles=user_roles,
        prompts=prompts, files=files, config=config,
    )
    if transport == "stdio":
        from mcp.server.stdio import stdio_server

        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
        return
    try:
        import uvicorn
    except ImportError as exc:
        raise MissingExtraError("uvicorn", "mcp") from exc
    from mcp.server.auth.settings import AuthSettings
    from pydantic import AnyHttpUrl

    assert token is not None
    shown = f"[{host}]" if ":" in host else host
    app = server.streamable_http_app(
        streamable_http_path=path, host=host,
        # the SDK's bearer middleware: 401 and WWW-Authenticate: Bearer without the token
        auth=AuthSettings(issuer_url=AnyHttpUrl(f"http://{shown}:{port}"),
                          resource_server_url=None),
        token_verifier=BearerToken(token),
    )
    quiet_served_noise()
    settings = uvicorn.Config(answered_once(app), host=host, port=port, log_level="warning")
    if listener is None:
        from jianmu._net import bind_listener

        listener = bind_listener(host, port)
    await uvicorn.Server(settings).serve(sockets=[listener])


def answered_once(app: Any) -> Any:
    """The ASGI ``app``, whose answer to a request, once complete, is its only one.

    The SDK's transport answers a notification ``202`` before it hands it to the session; a
    session that ended in between (a client that gave a call up, ``notifications/cancelled``,
    and left at once, ``DELETE``) fails the hand-over, and the SDK answered the request again
    (``500``) and raised: the HTTP server refused the second answer, and each such call printed
    tracebacks though nothing was wrong. Here a message sent after the answer is complete is
    dropped (the client has its answer), and the closed session's error after it is the end of
    that request, not a failure. An error before any answer is raised as it comes.
    """

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await app(scope, receive, send)
            return
        complete = False

        async def send_once(message: Any) -> None:
            nonlocal complete
            if complete:
                return
            if message.get("type") == "http.response.body" and not message.get("more_body"):
                complete = True
            await send(message)

        try:
            await app(scope, receive, send_once)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            if not complete:
                raise

    return guarded


@dataclass(frozen=True, repr=False)
class BearerToken:
    """The SDK's ``TokenVerifier`` for one static token, compared in constant time."""

    token: str

    async def verify_token(self, token: str) -> Any:
        """The access of a request carrying ``token``: all of it, or none."""
        from mcp.server.auth.provider import AccessToken

        if not same_token(token, self.token):
            return None
        return AccessToken(token="", client_id=_CLIENT_ID, scopes=[])

    def __repr__(self) -> str:
        return "BearerToken(***)"


def serve_sync(toolset: ToolSet, **options: Any) -> None:
    """Run `serve` in a new event loop (for the CLI); refuses to run inside one.

    Raises:
        RuntimeError: called from a running event loop; ``await serve(...)`` there.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # no loop running: the expected case
        asyncio.run(serve(toolset, **options))
        return
    raise RuntimeError("serve_sync() was called inside an event loop; use await serve(...)")


# -- one runner per client ---------------------------------------------------------------------

IDLE_S = 600.0
"""Seconds without a call after which a client's runner (its sandbox) is closed."""
MAX_CLIENTS = 32
"""Clients that keep a runner at once; the one idle longest makes room for a new one."""


@dataclass
class _Client:
    runner: ToolRunner
    busy: int = 0
    last: float = 0.0


class ClientRunners:
    """The runner each request of an MCP server runs its tool call on: clients over HTTP
    never share a sandbox.

    A sandbox runs one command at a time and keeps what its commands leave (files in its
    ``/tmp``) for its next ones: fine within one client's work, wrong between clients. So each
    streamable-HTTP session (its ``Mcp-Session-Id``) gets a runner of its own, built from the
    server's execution constraints at its first call: one client's commands never see
    another's (processes, their environment, ``/tmp``, IPC objects), nor wait for them. A
    request from no HTTP client (stdio: one client) uses the server's runner; an HTTP request
    without a session, or one beyond `MAX_CLIENTS` clients that all have calls running, gets a
    runner for that call alone. A client's runner is closed once it has had no call for
    `IDLE_S` (looked at on each call) and when the server stops.

    Args:
        shared: The server's runner: for stdio, and for every client when ``make`` is None.
        make: Builds a client's runner; ``None`` shares ``shared`` (a runner the caller
            passed in, whose sandbox the caller chose).
    """

    def __init__(self, shared: ToolRunner, make: Callable[[], ToolRunner] | None) -> None:
        self._shared, self._make = shared, make
        self._clients: dict[str, _Client] = {}

    @contextlib.asynccontextmanager
    async def runner_for(self, request: Any) -> AsyncIterator[ToolRunner]:
        """The runner of the client that sent ``request`` (the transport's HTTP request, or
        ``None``), held for one call."""
        if request is None or self._make is None:
            yield self._shared
            return
        await self._close_idle()
        key = request.headers.get("mcp-session-id")
        client = self._clients.get(key) if key else None
        if client is None and key:
            client = await self._admit(key)
        if client is None:  # no session to keep it for, or no room: this call's own
            once = self._make()
            try:
                yield once
            finally:
                await _close([once])
            return
        client.busy += 1
        try:
            yield client.runner
        finally:
            client.busy -= 1
            client.last = time.monotonic()

    async def _admit(self, key: str) -> _Client | None:
        """A new client's entry; the longest idle client's runner closes if there is no room,
        and ``None`` comes back if every client has a call running."""
        if len(self._clients) >= MAX_CLIENTS:
            idle = [(c.last, k) for k, c in self._clients.items() if not c.busy]
            if not idle:
                return None
            await _close([self._clients.pop(min(idle)[1]).runner])
            if key in self._clients:  # a call of the same client came in meanwhile
                return self._clients[key]
        assert self._make is not None
        client = self._clients[key] = _Client(self._make(), last=time.monotonic())
        return client

    async def _close_idle(self) -> None:
        """Close the runners of clients without a call for `IDLE_S`."""
        now = time.monotonic()
        idle = [k for k, c in self._clients.items() if not c.busy and now - c.last > IDLE_S]
        await _close([self._clients.pop(k).runner for k in idle])

    async def close(self) -> None:
        """Close every client's runner and the shared one."""
        runners = [c.runner for c in self._clients.values()]
        self._clients.clear()
        await _close([*runners, self._shared])


async def _close(runners: list[ToolRunner]) -> None:
    """Close ``runners`` (their sandboxes), even if the caller is being cancelled.

    This runs in the SDK's request and lifespan tasks, which the SDK cancels with anyio's
    cancel scopes: only an anyio shield holds against them.
    """
    with anyio.CancelScope(shield=True):
        for runner in runners:
            await runner.close()
