"""`MCPToolProvider`: the tools of an MCP server as Jianmu tools (`MCPTool`).

Using a server's tools::

    provider = MCPToolProvider("weather", command="python", args=["weather_server.py"])
    toolset = await ToolSet.from_providers([provider])      # connects and lists the tools
    ...
    await provider.close()

Each MCP tool becomes an `MCPTool` named ``<server>__<tool>`` (made safe for model APIs:
``^[A-Za-z0-9_-]{1,64}$``, unique within the provider, a short hash added where needed), its
description cut to `MAX_DESCRIPTION` characters (a model is offered it with every request).

Its annotations are the server's claims, so how far they are believed is the operator's choice
(``trust``, per server in ``mcp.servers.<name>.trust``). A hint that is missing, or not
believed, takes the MCP spec's default: ``readOnlyHint: false``, ``destructiveHint: true``,
``idempotentHint: false``, ``openWorldHint: true`` — an unknown tool may delete, may repeat
badly and may reach the network. An untrusted claim can only make a tool stricter:

- ``trust: none`` (the default): no claim is believed; every tool of the server is category
  ``dangerous`` with permission ``user_confirm`` (the guard asks first unless the operator's
  ``tool_policy`` allows it), tagged ``http``, never retried, never run in parallel;
- ``trust: read_only``: a tool with ``readOnlyHint: true`` is category ``read`` (runs without
  asking, parallel-safe, retried twice unless ``idempotentHint: false``); every other tool is
  as with ``none``;
- ``trust: all``: every hint is believed; ``destructiveHint: false`` (explicitly) makes a tool
  that is not read-only run without asking (category ``communicate``, or ``write`` with
  ``openWorldHint: false``); ``idempotentHint: true`` allows retries; ``openWorldHint: false``
  drops the ``http`` tag. A tool without hints still asks.

The ``http`` effect tag means the tool uses the network: an explicit ``execution.network:
false`` refuses it (the runner's check, as for ``http_request``).

When the server sends ``notifications/tools/list_changed``, the provider is marked ``stale``
and its listeners are told (`on_tools_changed`); ``await refresh()`` lists the tools again.
A skill's agent loop does this before the model's next turn.

A result's ``structuredContent`` is preferred over its text; its images and audio travel
whole, as content parts of the tool message (`ToolOutput`), when they are base64 of their
kind's type and within `jianmu.mcp.data.MAX_MEDIA_PARTS` / ``MAX_MEDIA_CHARS`` (the others
are described in the text); a declared output schema is held to the input schema's rules,
and results are checked against it in linear time (`jianmu.mcp.client.checked_session_class`);
``isError`` raises `ToolExecutionError` with the server's text, so the agent loop sees a
failed `ToolResult`. A server that died fails the call in progress; the next call reconnects
once (an HTTP server that forgot the session gets a new one at once: see `MCPClient`). A tool
that runs only as a task (``execution.taskSupport: required``) is skipped with a warning: the
client makes plain calls, which such a server refuses. So is a tool the SDK cannot read (no
name, an input schema that is not an object, a number for a description): the server's other
tools stay (`jianmu.mcp._listing`).

Serving Jianmu tools to other MCP hosts is `jianmu.mcp.server`. The ``mcp`` extra is imported
only when a server is connected.
"""

from __future__ import annotations

import hashlib
import re
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Unpack

from jianmu._text import visible
from jianmu.config import mcp_server_name_problem
from jianmu.errors import ConfigError, ToolExecutionError, ToolUnavailableWarning
from jianmu.mcp.client import MCPClient, MCPServerOptions
from jianmu.mcp.data import MCPCallResult, MCPToolInfo
from jianmu.tools import _arguments
from jianmu.tools._schema_shape import check_given_schema
from jianmu.tools.base import Tool
from jianmu.tools.calls import ToolOutput
from jianmu.tools.providers import BaseToolProvider

if TYPE_CHECKING:
    from jianmu.config import AppConfig, MCPServerConfig, MCPTrust

__all__ = (
    "MAX_DESCRIPTION",
    "TRUST_LEVELS",
    "MCPTool",
    "MCPToolProvider",
    "mcp_result_value",
    "mcp_tool_names",
    "providers_from_config",
)

TRUST_LEVELS: tuple[str, ...] = ("none", "read_only", "all")
"""How far a server's annotations are believed; see the module docstring."""
MAX_NAME_LENGTH = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")
_HASH_LENGTH = 8


def _clean(part: str) -> str:
    return _UNSAFE.sub("_", part).strip("_") or "tool"


def _hashed(base: str, seed: str) -> str:
    digest = hashlib.sha1(seed.encode("utf-8")).hexdigest()[:_HASH_LENGTH]
    return f"{base[: MAX_NAME_LENGTH - _HASH_LENGTH - 1]}_{digest}"


def mcp_tool_names(server: str, tools: Sequence[str]) -> list[str]:
    """Model-safe, unique names ``<server>__<tool>`` for a server's tools, in order.

    Characters outside ``[A-Za-z0-9_-]`` become ``_``. A name longer than 64 characters is
    cut and ends with ``_`` plus a hash of the original, and so does each name that would equal
    (ignoring case) another's but the one of the tool that needed no change (else the least
    name). Who keeps a plain name never depends on the listing's order: a server that listed
    ``delete.repo`` before ``delete_repo`` took ``srv__delete_repo`` from the tool it names, so
    a rule written for that tool held for the other, and a listing that changed moved it.
    """
    plain = [f"{_clean(server)}__{_clean(tool)}" for tool in tools]
    owner: dict[str, int] = {}  # a plain name, by its lower case: the tool that keeps it

    def rank(index: int) -> tuple[bool, bool, str]:
        tool = tools[index]
        return (_clean(tool) != tool, tool != tool.lower(), tool)

    for index, name in enumerate(plain):
        if len(name) > MAX_NAME_LENGTH:
            continue
        held = owner.get(name.lower())
        if held is None or rank(index) < rank(held):
            owner[name.lower()] = index
    taken = set(owner)  # names are ASCII here: lower() folds case only
    out: list[str] = []
    for index, (tool, name) in enumerate(zip(tools, plain, strict=True)):
        if owner.get(name.lower()) == index:
            out.append(name)
            continue
        original, salt = f"{server}__{tool}", 0
        if len(name) > MAX_NAME_LENGTH:
            name = _hashed(name, original)
        while name.lower() in taken:
            salt += 1
            name = _hashed(plain[index], f"{original}#{salt}")
        taken.add(name.lower())
        out.append(name)
    return out


def mcp_result_value(result: MCPCallResult, *, tool: str = "mcp tool") -> Any:
    """The value a Jianmu tool returns for an MCP result.

    Returns:
        ``structuredContent`` when the server sent it, else the content as text; wrapped in
        a `ToolOutput` with the images and audio when there are any, so that the tool
        message carries them whole (never summarised or cut, and not hidden by
        ``structuredContent``, where a repeated image's base64 becomes its stand-in).

    Raises:
        ToolExecutionError: the server set ``isError``; the message is its text.
    """
    if result.is_error:
        text = result.text().strip()
        raise ToolExecutionError(text or f"MCP tool {tool!r} failed without saying why")
    media = result.media()
    if result.structured_content is not None:
        value = result.structured_content
        if media:  # a server may repeat its images there (server-filesystem's read_media_file)
            value = _media_named(value, {part.data: part.describe() for part in media})
    else:
        value = result.text(media=False)  # what travels whole is left out, the rest described
    return ToolOutput(value=value, media=tuple(media)) if media else value


def _media_named(value: Any, stand_ins: Mapping[str, str], depth: int = 0) -> Any:
    """``value`` with each string that is the base64 of a media part the result carries whole
    replaced by the part's stand-in: the model sees the image once, not also as its base64
    text cut to the result limit. Past a depth no server's image sits at, left as it is."""
    if isinstance(value, str):
        return stand_ins.get(value, value)
    if depth > 32:
        return value
    if isinstance(value, dict):
        return {k: _media_named(v, stand_ins, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_media_named(v, stand_ins, depth + 1) for v in value]
    return value


MAX_DESCRIPTION = 8_000
"""Characters of a server's tool description kept: a model is offered it with every request,
so a server's megabyte would be sent (and paid for) each turn, or refused by the model API."""


def _cut(text: str) -> str:
    if len(text) <= MAX_DESCRIPTION:
        return text
    return (f"{text[:MAX_DESCRIPTION]}… [cut: the server's description has {len(text):,} "
            "characters]")


def _object_schema(schema: Mapping[str, Any]) -> dict[str, Any] | None:
    """The input schema as an object schema; ``None`` when it is another type (not MCP)."""
    out = dict(schema)
    kind = out.get("type")
    if kind is None:
        out["type"] = "object"  # MCP requires objects; servers sometimes omit the type
    elif kind != "object":
        return None
    out.setdefault("properties", {})
    return out


def _believed_hints(
    notes: Mapping[str, Any], trust: str
) -> tuple[bool, bool, bool, bool]:
    """(read-only, destructive, idempotent, open-world) as far as ``trust`` believes ``notes``.

    Anything not believed takes the spec's default, which is also the strictest value.
    """
    read_only = trust in ("read_only", "all") and notes.get("readOnlyHint") is True
    believe_all = trust == "all"
    destructive = not (believe_all and notes.get("destructiveHint") is False)
    open_world = not (believe_all and notes.get("openWorldHint") is False)
    if read_only:
        # reading twice is harmless, unless the server itself says otherwise (stricter)
        idempotent = notes.get("idempotentHint") is not False
    else:
        idempotent = believe_all and notes.get("idempotentHint") is True
    return read_only, destructive, idempotent, open_world


class MCPTool(Tool):
    """One tool of an MCP server, called through its `MCPClient`.

    Built by `MCPToolProvider`; the metadata comes from the server's annotations (see the
    module docstring). ``timeout_seconds`` bounds the wait for the server's answer (the
    client's read timeout, raising `ToolTimeoutError`). Assign a new ``input_schema`` to
    change the arguments it checks; the dict is not meant to be edited in place.
    """

    _wraps_tools: ClassVar[bool] = True
    """Its docstring documents the class, not the server's tool."""

    remote = True
    """The tool runs in another process: the executor's span says ``extension``."""
    bounds_own_wait = True
    """The client's read timeout stops a call at ``timeout_seconds`` (`ToolTimeoutError`)."""
    checks_closed_objects = True
    """Its arguments are checked in Jianmu's own dialect, where an object takes only the
    properties it names (`jianmu.tools._edit_schema`): a person's edit is checked so too."""

    def __init__(
        self, client: MCPClient, info: MCPToolInfo, *, server: str, name: str, timeout: float,
        trust: MCPTrust = "none",
    ) -> None:
        if trust not in TRUST_LEVELS:
            raise ValueError(f"MCP trust must be one of {', '.join(TRUST_LEVELS)}, got {trust!r}")
        if info.task_support == "required":
            # the server refuses every plain call of it (-32601): offering it to the model
            # would only waste its turns
            raise ValueError(
                f"MCP tool {info.name!r} of server {server!r} requires task-augmented calls "
                "(execution.taskSupport: required), which Jianmu's MCP client does not make"
            )
        # the same check of its shape as any schema a tool is given: no parameters at the
        # root (where JSON Schema reads them as unknown keywords), no type of another
        # vocabulary (a BFCL "dict")
        check_given_schema(name, info.input_schema)
        schema = _object_schema(info.input_schema)
        if schema is None:
            raise ValueError(
                f"MCP tool {info.name!r} of server {server!r} has a "
                f"{info.input_schema.get('type')!r} input schema; MCP tools take an object"
            )
        self.client = client
        self.info = info
        self.server = server
        self.remote_name = info.name
        self.name = name
        self.description = _cut(
            info.description or info.title or f"Tool {info.name!r} of MCP server {server!r}."
        )
        # the server's schema reaches nothing outside itself, matches in linear time and is
        # shaped as its meta-schema says (the checker walks it so)
        _arguments.check_foreign_schema(name, schema)
        self.input_schema = schema
        if info.output_schema:
            output = dict(info.output_schema)
            # results are checked against it (the session's CheckedSession)
            _arguments.check_foreign_schema(name, output, what="output schema")
            self.output_schema = output
        notes = info.annotations
        read_only, destructive, idempotent, open_world = _believed_hints(notes, trust)
        if read_only:
            self.category, self.permission = "read", "auto"
        elif destructive:
            self.category, self.permission = "dangerous", "user_confirm"
        else:  # only a fully trusted server can say a writing tool destroys nothing
            self.category = "communicate" if open_world else "write"
            self.permission = "auto"
        self.idempotent = idempotent
        self.parallel_safe = read_only
        self.max_retries = 2 if idempotent else 0
        self.effect_tags = ("http",) if open_world else ()
        self.trust = trust
        self.timeout_seconds = timeout
        self.tags = ("mcp", server)
        self.metadata = {
            "mcp_server": server,
            "mcp_tool": info.name,
            "mcp_annotations": dict(notes),
            "mcp_trust": trust,
        }

    def validate_args(self, args: Any) -> dict[str, Any]:
        """Check the arguments against the server's schema (a plan of it is made once)."""
        params = self.parameters
        made = self.__dict__.get("_jm_plan")
        if made is None or made[0] is not params:  # a new input_schema was assigned
            _arguments.check_foreign_schema(self.name, params)
            made = self.__dict__["_jm_plan"] = (params, _arguments.scalar_plan(params))
        if made[1] is None:
            return _arguments.validate_with_schema(self.name, params, args)
        return _arguments.validate_planned(self.name, params, made[1], args)

    async def aclose(self) -> None:
        """Close the connection to the server (shared with the server's other tools)."""
        await self.client.close()

    async def run(self, /, **kwargs: Any) -> Any:
        """Call the tool on its server; see `mcp_result_value` for the result."""
        # self is positional-only: a server's argument may be named "self" too
        result = await self.client.call_tool(self.remote_name, kwargs, timeout=self.timeout_seconds)
        return mcp_result_value(result, tool=self.name)

    def __repr__(self) -> str:
        where = f"{self.server}:{self.remote_name}"
        return f"<MCPTool {self.name!r} ({where}) category={self.category!r}>"


class MCPToolProvider(BaseToolProvider):
    """A `ToolProvider` for the tools of one MCP server (stdio ``command`` or HTTP ``url``).

    ``await initialize()`` connects and lists the tools; ``get_tools()`` returns them as
    `MCPTool`; ``await close()`` stops the session (and the server process for stdio). A
    closed provider cannot be reopened; make a new one.

    Args:
        name: The server's name; tool names start with it (``<name>__<tool>``).
        trust: How far the server's annotations are believed: ``none`` (every tool asks
            first), ``read_only`` (``readOnlyHint`` tools run freely) or ``all``.
        **server: Where the server is, as for `MCPClient`: ``command`` (a stdio server's
            executable) with ``args``, ``env`` and ``cwd``, or ``url`` (streamable HTTP);
            ``timeout`` for each call and ``connect_timeout`` for the start and handshake.

    Raises:
        ValueError: an empty name, neither or both of ``command`` and ``url``, a bad URL,
            timeout or trust.
    """

    def __init__(
        self, name: str, *, trust: MCPTrust = "none", **server: Unpack[MCPServerOptions]
    ) -> None:
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"an MCP server needs a non-empty name, got {name!r}")
        problem = mcp_server_name_problem(name.strip())
        if problem is not None:  # its tools' names start with it, exactly
            raise ValueError(problem)
        if trust not in TRUST_LEVELS:
            raise ValueError(f"MCP trust must be one of {', '.join(TRUST_LEVELS)}, got {trust!r}")
        self.name = name.strip()
        self.trust: MCPTrust = trust
        self._server = server
        self._tools: list[MCPTool] | None = None
        self._closed = False
        self.stale = False
        """True when the server said its tools changed since they were last listed."""
        self._listeners: list[Callable[[], None]] = []
        self.client = self._new_client()

    def _new_client(self) -> MCPClient:
        client = MCPClient(name=self.name, **self._server)
        client.on_tools_changed(self._tools_changed)
        return client

    def _tools_changed(self) -> None:
        """The server sent ``notifications/tools/list_changed``."""
        self.stale = True
        for listener in list(self._listeners):
            listener()

    def on_tools_changed(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` when the server says its tools changed; then ``await refresh()``.

        It runs on the MCP session's event loop and must not block (schedule the refresh).
        """
        self._listeners.append(listener)

    async def refresh(self) -> list[Tool]:
        """List the server's tools again (after ``tools/list_changed``) and return them.

        Raises:
            MCPError: the server could not be reached or listed.
        """
        if self._tools is None:
            await self.initialize()
            return self.get_tools()
        self.stale = False  # before listing: a change during the listing marks it again
        self._tools = self._build(await self.client.list_tools())
        return self.get_tools()

    @classmethod
    def from_config(cls, name: str, config: MCPServerConfig) -> MCPToolProvider:
        """A provider for the server ``name`` of ``mcp.servers`` in the config.

        Raises:
            ConfigError: the entry sets neither or both of ``command`` and ``url``, or a URL
                that is not http(s).
        """
        try:
            return cls(
                name,
                command=config.command,
                args=config.args,
                env=config.env,
                url=config.url,
                headers={k: v.get_secret_value() for k, v in config.headers.items()} or None,
                bearer_token=config.auth.token.get_secret_value() if config.auth else None,
                timeout=config.timeout,
                connect_timeout=config.connect_timeout,
                secrets=config.from_environment,
                trust=config.trust,
            )
        except ValueError as exc:
            raise ConfigError(f"mcp.servers.{name}: {exc}") from None

    def __repr__(self) -> str:
        return f"<MCPToolProvider {self.name!r} {self.client.transport}>"

    async def initialize(self) -> None:
        """Connect and list the server's tools; idempotent.

        Raises:
            MCPError: the server could not be started, reached or listed.
            MissingExtraError: the ``mcp`` extra is not installed.
        """
        if self._closed:
            raise RuntimeError(f"MCP provider {self.name!r} is closed; make a new one")
        if self._tools is not None:
            return
        try:
            await self.client.connect()
            infos = await self.client.list_tools()
        except BaseException:
            # a closed client stays closed: the next initialize() tries with a fresh one
            await self.client.close()
            self.client = self._new_client()
            raise
        self._tools = self._build(infos)

    def _build(self, infos: Sequence[MCPToolInfo]) -> list[MCPTool]:
        # each warning quotes the server's data, and Python writes it to stderr as it is:
        # `visible`, so a terminal shows an escape sequence in it and does not obey it
        for why in self.client.skipped_tools:  # the SDK could not read them: no other tool
            warnings.warn(visible(f"{why}; skipped"), ToolUnavailableWarning, stacklevel=3)
        names = mcp_tool_names(self.name, [i.name for i in infos])
        tools: list[MCPTool] = []
        for info, name in zip(infos, names, strict=True):
            try:
                made = MCPTool(
                    self.client, info, server=self.name, name=name, timeout=self.client.timeout,
                    trust=self.trust,
                )
                tools.append(made)
            except ValueError as exc:
                warnings.warn(visible(f"{exc}; skipped"), ToolUnavailableWarning, stacklevel=3)
            except Exception as exc:  # a check tripped on the server's data: this tool only
                warnings.warn(visible(
                    f"MCP tool {info.name!r} of server {self.name!r} could not be checked "
                    f"({type(exc).__name__}: {exc}); skipped"),
                    ToolUnavailableWarning, stacklevel=3,
                )
        return tools

    def get_tools(self, **kwargs: Any) -> list[Tool]:
        """The server's tools, as listed by ``initialize``.

        Raises:
            RuntimeError: ``initialize`` has not run yet.
        """
        if self._tools is None:
            raise RuntimeError(
                f"MCP provider {self.name!r} has not listed its tools yet; "
                "await provider.initialize() (ToolSet.from_providers does) first"
            )
        return list(self._tools)

    async def close(self) -> None:
        """Disconnect (and stop a stdio server); idempotent."""
        self._closed = True
        await self.client.close()


def providers_from_config(config: AppConfig | None) -> list[MCPToolProvider]:
    """One `MCPToolProvider` per entry of ``mcp.servers``, in the file's order (not connected).

    Raises:
        ConfigError: an entry sets neither or both of ``command`` and ``url``.
    """
    if config is None:
        return []
    return [MCPToolProvider.from_config(n, c) for n, c in config.mcp.servers.items()]
