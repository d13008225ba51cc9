"""What an MCP server sends, as plain data (no SDK types): tools, call results, resources and
prompts; and the requests on a live SDK session that read them (`MCPClient` sends them)."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from jianmu.errors import MCPError
from jianmu.mcp._listing import skipped_on
from jianmu.tools.calls import MediaPart

__all__ = (
    "MAX_LISTED",
    "MAX_MEDIA_CHARS",
    "MAX_MEDIA_PARTS",
    "MCPCallResult",
    "MCPPrompt",
    "MCPPromptInfo",
    "MCPResourceContent",
    "MCPResourceInfo",
    "MCPToolInfo",
)


@dataclass(frozen=True, kw_only=True)
class MCPToolInfo:
    """A tool as an MCP server lists it (plain data, no SDK types)."""

    name: str
    """The tool's name on the server."""
    description: str = ""
    """Its description."""
    title: str | None = None
    """Its human-readable title, if any."""
    input_schema: dict[str, Any] = field(default_factory=dict)
    """JSON Schema of its arguments."""
    output_schema: dict[str, Any] | None = None
    """JSON Schema of its structured result, if declared."""
    annotations: dict[str, Any] = field(default_factory=dict)
    """Hints as on the wire: ``readOnlyHint``, ``destructiveHint``, ``idempotentHint``,
    ``openWorldHint``, ``title`` (only those the server set)."""
    task_support: str | None = None
    """Its ``execution.taskSupport`` (MCP 2025-11-25): ``required`` when only a task-augmented
    call runs it, ``optional``, ``forbidden``; ``None`` when the server said nothing."""


@dataclass(frozen=True, kw_only=True)
class MCPCallResult:
    """The answer to one ``tools/call`` (plain data, no SDK types)."""

    is_error: bool = False
    """The server's ``isError``: the tool failed and ``content`` says why."""
    content: list[dict[str, Any]] = field(default_factory=list)
    """Content blocks as on the wire (``{"type": "text", "text": ...}``, images, resources)."""
    structured_content: Any = None
    """The server's ``structuredContent``, if any."""

    def text(self, *, media: bool = True) -> str:
        """The content as text: text blocks joined, other blocks summarised (the images and
        audio that `media` carries left out with ``media=False``; the others say why not)."""
        carried = _carried(self.content) if not media else {}
        parts: list[str] = []
        for index, block in enumerate(self.content):
            why = carried.get(index)
            if why is None or (not why and block.get("type") == "resource"):
                parts.append(_block_text(block))  # a resource carried whole still names its URI
            elif why:
                parts.append(f"{_block_text(block)} (not shown: {why})")
        return "\n".join(p for p in parts if p)

    def media(self) -> list[MediaPart]:
        """The images and audio clips that travel whole (see `MAX_MEDIA_PARTS`): their blocks,
        and embedded resources whose blob is one."""
        carried = _carried(self.content)
        parts: list[MediaPart] = []
        for index, block in enumerate(self.content):
            found = _media_of(block) if carried.get(index) == "" else None
            if found is not None:
                kind, mime, data = found
                parts.append(MediaPart(kind=kind, mime_type=str(mime), data=str(data)))
        return parts


_MEDIA_KINDS = frozenset({"image", "audio"})
_MEDIA_BLOCKS = _MEDIA_KINDS | {"resource"}
"""Blocks that may carry an image or audio clip (a resource: in its blob)."""
MAX_MEDIA_PARTS = 20
"""Images and audio clips of one result that travel whole; the rest are described."""
MAX_MEDIA_CHARS = 20 * 1024 * 1024
"""Base64 characters of one result's media that travel whole (about 15 MB of bytes): each
part is kept in the run's state and checkpoints and sent with every later request."""
_MIME = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]{0,126}", re.ASCII)


def _carried(content: list[dict[str, Any]]) -> dict[int, str]:
    """Each image or audio block (`_media_of`) by index: ``""`` when it travels whole, else
    why it does not. A server is not trusted with what reaches the model: data that is not
    base64 would make a model API refuse every later request of the run."""
    out: dict[int, str] = {}
    count = chars = 0
    for index, block in enumerate(content):
        if block.get("type") not in _MEDIA_BLOCKS:
            continue
        found = _media_of(block)
        if found is None:
            continue
        kind, mime, data = found
        major, _, minor = mime.lower().partition("/") if isinstance(mime, str) else ("", "", "")
        if major != kind or not _MIME.fullmatch(minor):
            out[index] = f"its type {str(mime)[:80]!r} is not an {kind} type"
        elif not isinstance(data, str) or not _is_base64(data):
            out[index] = "its data is not base64"
        elif count >= MAX_MEDIA_PARTS or chars + len(data) > MAX_MEDIA_CHARS:
            out[index] = (f"one result carries at most {MAX_MEDIA_PARTS} images or clips, "
                          f"{MAX_MEDIA_CHARS:,} characters of base64 in all")
        else:
            out[index] = ""
            count, chars = count + 1, chars + len(data)
    return out


def _media_of(block: Mapping[str, Any]) -> tuple[str, Any, Any] | None:
    """``(kind, MIME type, base64 data)`` of a block that is an image or audio clip: an image
    or audio block, or an embedded resource whose blob has an image or audio type (a file
    server's picture); ``None`` for any other block."""
    kind = block.get("type")
    if kind != "resource":
        return (kind, block.get("mimeType"), block.get("data")) if kind in _MEDIA_KINDS else None
    resource = block.get("resource")
    if not isinstance(resource, Mapping) or "blob" not in resource:
        return None
    mime = resource.get("mimeType")
    major = mime.partition("/")[0].lower() if isinstance(mime, str) else ""
    return (major, mime, resource.get("blob")) if major in _MEDIA_KINDS else None


def _is_base64(data: str) -> bool:
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return False
    return bool(data)


@dataclass(frozen=True, kw_only=True)
class MCPResourceInfo:
    """A resource as a server lists it."""

    uri: str
    """Its URI, as ``resources/read`` takes it."""
    name: str = ""
    """Its name."""
    title: str | None = None
    """Its human-readable title, if any."""
    description: str = ""
    """Its description."""
    mime_type: str | None = None
    """Its MIME type, if declared."""
    size: int | None = None
    """Its size in bytes, if declared."""
    template: bool = False
    """True for a resource template: ``uri`` is an RFC 6570 URI template."""


@dataclass(frozen=True, kw_only=True)
class MCPResourceContent:
    """One part of a resource read: text, or binary data (``blob``)."""

    uri: str
    """The part's URI."""
    mime_type: str | None = None
    """Its MIME type, if given."""
    text: str | None = None
    """The text of a text part."""
    blob: bytes | None = None
    """The bytes of a binary part."""

    def describe(self) -> str:
        """The text, or for binary data a short line (type, size), never the bytes."""
        if self.text is not None:
            return self.text
        size = len(self.blob or b"")
        return f"[binary resource {self.uri}: {self.mime_type or 'unknown type'}, {size} bytes]"


@dataclass(frozen=True, kw_only=True)
class MCPPromptInfo:
    """A prompt as a server lists it."""

    name: str
    """Its name, as ``prompts/get`` takes it."""
    title: str | None = None
    """Its human-readable title, if any."""
    description: str = ""
    """Its description."""
    arguments: list[dict[str, Any]] = field(default_factory=list)
    """Its arguments: ``{"name", "description", "required"}`` each."""


@dataclass(frozen=True, kw_only=True)
class MCPPrompt:
    """A prompt filled in by the server (``prompts/get``)."""

    description: str = ""
    """The server's description of it."""
    messages: list[dict[str, Any]] = field(default_factory=list)
    """``{"role": "user"|"assistant", "content": {...}}`` as on the wire."""

    def text(self) -> str:
        """The messages' content as text (other content summarised), one message a paragraph."""
        return "\n\n".join(_block_text(m.get("content") or {}) for m in self.messages)


def _block_text(block: Mapping[str, Any]) -> str:
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind in ("image", "audio"):
        size = len(str(block.get("data", ""))) * 3 // 4
        return f"[{kind}: {block.get('mimeType', 'unknown type')}, about {size} bytes]"
    if kind == "resource":
        resource = block.get("resource") or {}
        if "text" in resource:
            return str(resource["text"])
        return f"[resource {resource.get('uri', '?')}: {resource.get('mimeType', 'binary')}]"
    if kind == "resource_link":
        return _link_text(block)
    return f"[{kind} content]"


def _link_text(block: Mapping[str, Any]) -> str:
    """A resource link as the model reads it: its URI, and what the server says it is (its
    title, name and type, its description), which tell the model whether to read it."""
    name, title = block.get("name"), block.get("title")
    about = [str(v) for v in (name, block.get("mimeType")) if v and v != title]
    label = " ".join(filter(None, [
        str(title) if title else "", f"({', '.join(about)})" if title and about
        else ", ".join(about),
    ]))
    description = block.get("description")
    said = " — ".join(filter(None, [label, str(description) if description else ""]))
    return f"[resource link {block.get('uri', '?')}{': ' + said if said else ''}]"

# -- requests on a live session ----------------------------------------------------------------


_MAX_PAGES = 1000  # a server that pages forever must not hang us
MAX_LISTED = 10_000
"""Entries one listing (tools, resources, prompts) may hold: a server that pages forever
would otherwise fill memory and have every tool's schema checked, for minutes, before a run
starts; no model is offered this many tools."""
_TEXT: list[Any] = []  # the SDK's TextContent, imported on the first answer


def call_result(result: Any) -> MCPCallResult:
    """A ``tools/call`` answer (the SDK's ``CallToolResult``) as plain data."""
    if not _TEXT:
        from mcp.types import TextContent

        _TEXT.append(TextContent)
    text = _TEXT[0]
    return MCPCallResult(
        is_error=bool(result.is_error),
        content=[
            # a bare text block, by far the most common, needs no pydantic dump
            {"type": "text", "text": block.text}
            if type(block) is text and block.annotations is None and block.meta is None
            else block.model_dump(by_alias=True, exclude_none=True, mode="json")
            for block in result.content
        ],
        structured_content=result.structured_content,
    )


async def _pages(
    fetch: Callable[[Any], Awaitable[Any]], items: str, skipped: list[str] | None = None
) -> AsyncIterator[Any]:
    """Every item of a paginated list request (``fetch(params)``); why each item a page left
    out was left out goes to ``skipped`` (`jianmu.mcp._listing`), and counts as listed."""
    from mcp.types import PaginatedRequestParams

    cursor: str | None = None
    count = 0
    for _page in range(_MAX_PAGES):
        result = await fetch(PaginatedRequestParams(cursor=cursor) if cursor else None)
        page = getattr(result, items)
        left_out = skipped_on(result) if skipped is not None else []
        count += len(page) + len(left_out)
        if skipped is not None:
            skipped.extend(left_out)
        if count > MAX_LISTED:
            raise MCPError(f"the server lists more than {MAX_LISTED:,} {items.replace('_', ' ')}")
        for item in page:
            yield item
        cursor = result.next_cursor
        if not cursor:
            break


async def list_tools(
    session: Any, skipped: list[str] | None = None, server: str = "the server"
) -> list[MCPToolInfo]:
    """``tools/list``, every page: the valid tools; why each other one was left out goes to
    ``skipped`` (emptied first). A name listed again is left out: a call names one tool."""
    infos: list[MCPToolInfo] = []
    if skipped is not None:
        skipped.clear()  # a request sent again (a forgotten session) lists afresh
    seen: set[str] = set()
    try:
        async for t in _tools(session, skipped):
            if t.name in seen:
                if skipped is not None:
                    skipped.append(f"MCP tool {t.name[:80]!r} of server {server!r} is listed "
                                   "more than once; the first is kept")
                continue
            seen.add(t.name)
            infos.append(_tool_info(t))
    except Exception as exc:
        if declares_tools(session) or not method_not_found(exc):
            raise
        return []  # a server of resources or prompts only: it has no tools to list
    return infos


def declares_tools(session: Any) -> bool:
    """Whether the server's ``initialize`` answer declared the ``tools`` capability (taken as
    declared when the session does not say)."""
    capabilities = getattr(session, "server_capabilities", None)
    return capabilities is None or getattr(capabilities, "tools", None) is not None


def method_not_found(exc: BaseException) -> bool:
    """Whether ``exc`` is the SDK's error for a JSON-RPC ``Method not found`` (-32601)."""
    return getattr(exc, "code", None) == -32601 and isinstance(getattr(exc, "message", None), str)


def _tools(session: Any, skipped: list[str] | None) -> AsyncIterator[Any]:
    """The pages of ``tools/list``, one tool at a time."""
    return _pages(lambda p: session.list_tools(params=p), "tools", skipped)


def _tool_info(t: Any) -> MCPToolInfo:
    """A listed tool as Jianmu keeps it."""
    notes = t.annotations.model_dump(by_alias=True, exclude_none=True) if (
        t.annotations is not None
    ) else {}
    return MCPToolInfo(
        name=t.name,
        description=t.description or "",
        title=t.title,
        input_schema=dict(t.input_schema or {}),
        output_schema=dict(t.output_schema) if t.output_schema else None,
        annotations=notes,
        task_support=getattr(t.execution, "task_support", None),
    )


async def list_resources(session: Any) -> list[MCPResourceInfo]:
    """``resources/list``, every page."""
    return [
        MCPResourceInfo(
            uri=str(r.uri), name=r.name or "", title=r.title, description=r.description or "",
            mime_type=r.mime_type, size=r.size,
        )
        async for r in _pages(lambda p: session.list_resources(params=p), "resources")
    ]


async def list_resource_templates(session: Any) -> list[MCPResourceInfo]:
    """``resources/templates/list``, every page (``template=True``)."""
    return [
        MCPResourceInfo(
            uri=str(r.uri_template), name=r.name or "", title=r.title,
            description=r.description or "", mime_type=r.mime_type, template=True,
        )
        async for r in _pages(
            lambda p: session.list_resource_templates(params=p), "resource_templates"
        )
    ]


async def read_resource(session: Any, uri: str) -> list[MCPResourceContent]:
    """``resources/read``: text parts as text, binary parts decoded."""
    result = await session.read_resource(uri)
    parts: list[MCPResourceContent] = []
    for part in result.contents:
        text = getattr(part, "text", None)
        blob: bytes | None = None
        if text is None:
            try:
                blob = base64.b64decode(getattr(part, "blob", "") or "", validate=True)
            except (binascii.Error, ValueError):
                blob = b""  # undecodable: shown as an empty binary part, not as garbage
        parts.append(
            MCPResourceContent(uri=str(part.uri), mime_type=part.mime_type, text=text, blob=blob)
        )
    return parts


async def list_prompts(session: Any) -> list[MCPPromptInfo]:
    """``prompts/list``, every page."""
    return [
        MCPPromptInfo(
            name=p.name, title=p.title, description=p.description or "",
            arguments=[a.model_dump(exclude_none=True) for a in p.arguments or ()],
        )
        async for p in _pages(lambda params: session.list_prompts(params=params), "prompts")
    ]


async def get_prompt(session: Any, name: str, arguments: dict[str, str]) -> MCPPrompt:
    """``prompts/get`` with ``arguments``."""
    result = await session.get_prompt(name, arguments or None)
    return MCPPrompt(
        description=result.description or "",
        messages=[
            m.model_dump(by_alias=True, exclude_none=True, mode="json") for m in result.messages
        ],
    )
