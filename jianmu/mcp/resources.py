"""Read-only tools over MCP servers' resources: ``mcp_list_resources`` and ``mcp_read_resource``.

Both are category ``read`` with permission ``auto`` (they run without asking, in parallel,
and are retried like any reading tool), tagged ``http`` as the servers' own tools are by
default (a server may fetch what it serves from the network, so ``execution.network: false``
refuses them). They reach only the servers they were built with, and a read is confined to
what the server lists: a URI it lists under ``resources/list`` or one that fits a template
of ``resources/templates/list``; anything else is refused before it is sent.

Text comes back as text; binary data as a short line (type and size), never as base64.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from jianmu.errors import ToolExecutionError
from jianmu.mcp.client import MCPClient
from jianmu.mcp.data import MCPResourceInfo
from jianmu.tools.base import Tool

__all__ = ("MCPListResourcesTool", "MCPReadResourceTool", "resource_tools")

_EXPRESSION = re.compile(r"\{([+#./;?&]?)[^}]*\}")


def template_pattern(template: str) -> Any:
    """A regex of the URIs an RFC 6570 template produces (``{x}`` one segment, ``{+x}`` any),
    compiled by RE2: the template is the server's, and ``{+a}a{+b}a...Z`` as a Python regex
    backtracks for ages on the event loop; RE2 matches in linear time (``fullmatch``)."""
    import re2

    parts: list[str] = []
    last = 0
    for match in _EXPRESSION.finditer(template):
        parts.append(re.escape(template[last:match.start()]))
        parts.append(".*" if match.group(1) in ("+", "#") else "[^/?#]*")
        last = match.end()
    parts.append(re.escape(template[last:]))
    options = re2.Options()
    options.dot_nl = True  # as re.DOTALL: {+x} takes any text
    options.log_errors = False
    return re2.compile("".join(parts), options)


class _ResourceTool(Tool):
    category = "read"
    permission = "auto"
    effect_tags = ("http",)
    remote = True
    tags = ("mcp", "resources")

    def __init__(self, clients: Mapping[str, MCPClient]) -> None:
        self.clients = clients  # shared and live: servers connected later are included
        servers = sorted(clients)
        self.input_schema = self._schema(
            {"type": "string", "description": "The MCP server's name.",
             **({"enum": servers} if servers else {})}
        )
        self.metadata = {"mcp_servers": servers}

    def _schema(self, server: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def _client(self, server: str) -> MCPClient:
        client = self.clients.get(server)
        if client is None:
            known = ", ".join(sorted(self.clients)) or "none"
            raise ToolExecutionError(f"no MCP server {server!r} is connected (servers: {known})")
        return client


class MCPListResourcesTool(_ResourceTool):
    """``mcp_list_resources(server)``: the resources and resource templates of a server."""

    name = "mcp_list_resources"
    description = (
        "List the resources (documents, files, data) that an MCP server offers: one line "
        "each with its URI, name, MIME type and description; URI templates have {placeholders}. "
        "Read one with mcp_read_resource."
    )

    def _schema(self, server: dict[str, Any]) -> dict[str, Any]:
        return {"type": "object", "properties": {"server": server}, "required": ["server"],
                "additionalProperties": False}

    async def run(self, server: str) -> str:
        """The server's resources, one a line."""
        client = self._client(server)
        found = await client.list_resources() + await _templates(client)
        if not found:
            return f"MCP server {server!r} lists no resources."
        return "\n".join(_line(info) for info in found)


class MCPReadResourceTool(_ResourceTool):
    """``mcp_read_resource(server, uri)``: a resource's text (binary parts described)."""

    name = "mcp_read_resource"
    description = (
        "Read a resource of an MCP server by its URI (as mcp_list_resources shows it, or a "
        "template filled in). Returns its text; binary content is described (type, size)."
    )

    def _schema(self, server: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {
                "server": server,
                "uri": {"type": "string", "description": "The resource's URI."},
            },
            "required": ["server", "uri"],
            "additionalProperties": False,
        }

    async def run(self, server: str, uri: str) -> str:
        """The resource's parts as text, one after another."""
        client = self._client(server)
        listed = await client.list_resources()
        if uri not in {r.uri for r in listed} and not any(
            _fits(t.uri, uri) for t in await _templates(client)
        ):
            raise ToolExecutionError(
                f"MCP server {server!r} does not list the resource {uri!r}; "
                "call mcp_list_resources for the URIs it offers"
            )
        parts = await client.read_resource(uri)
        return "\n".join(part.describe() for part in parts) or f"(resource {uri} is empty)"


def _fits(template: str, uri: str) -> bool:
    """Whether ``uri`` is one the server's ``template`` produces; a template RE2 cannot take
    (past its memory budget) produces none."""
    import re2

    try:
        return template_pattern(template).fullmatch(uri) is not None
    except re2.error:
        return False


async def _templates(client: MCPClient) -> list[MCPResourceInfo]:
    """The server's resource templates; none when it does not support them."""
    from jianmu.errors import MCPError

    try:
        return await client.list_resources(templates=True)
    except MCPError:
        return []  # an optional part of the protocol: a server may answer "method not found"


def _line(info: MCPResourceInfo) -> str:
    kind = "template " if info.template else ""
    detail = ", ".join(
        x for x in (info.mime_type, f"{info.size} bytes" if info.size is not None else None) if x
    )
    text = f"{kind}{info.uri}"
    if info.name:
        text += f" — {info.name}"
    if detail:
        text += f" ({detail})"
    if info.description:
        text += f": {info.description}"
    return text


def resource_tools(clients: Mapping[str, MCPClient] | Iterable[Any]) -> list[Tool]:
    """``mcp_list_resources`` and ``mcp_read_resource`` over ``clients``.

    Args:
        clients: Server name to `MCPClient` (a live mapping: servers added later count), or
            `MCPToolProvider` objects (their names and clients).
    """
    if not isinstance(clients, Mapping):
        providers: Iterable[Any] = clients
        clients = {p.name: p.client for p in providers}
    return [MCPListResourcesTool(clients), MCPReadResourceTool(clients)]
