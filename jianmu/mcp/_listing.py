"""Requests on a live SDK session, answered as plain data (`jianmu.mcp.data`)."""

from __future__ import annotations

import base64
import binascii
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from jianmu.mcp.data import (
    MCPCallResult,
    MCPPrompt,
    MCPPromptInfo,
    MCPResourceContent,
    MCPResourceInfo,
    MCPToolInfo,
)

__all__ = (
    "call_result",
    "get_prompt",
    "list_prompts",
    "list_resource_templates",
    "list_resources",
    "list_tools",
    "read_resource",
)

_MAX_PAGES = 1000  # a server that pages forever must not hang us
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


async def _pages(fetch: Callable[[Any], Awaitable[Any]], items: str) -> AsyncIterator[Any]:
    """Every item of a paginated list request (``fetch(params)``)."""
    from mcp.types import PaginatedRequestParams

    cursor: str | None = None
    for _page in range(_MAX_PAGES):
        result = await fetch(PaginatedRequestParams(cursor=cursor) if cursor else None)
        for item in getattr(result, items):
            yield item
        cursor = result.next_cursor
        if not cursor:
            break


async def list_tools(session: Any) -> list[MCPToolInfo]:
    """``tools/list``, every page."""
    infos: list[MCPToolInfo] = []
    async for t in _pages(lambda p: session.list_tools(params=p), "tools"):
        notes = t.annotations.model_dump(by_alias=True, exclude_none=True) if (
            t.annotations is not None
        ) else {}
        infos.append(
            MCPToolInfo(
                name=t.name,
                description=t.description or "",
                title=t.title,
                input_schema=dict(t.input_schema or {}),
                output_schema=dict(t.output_schema) if t.output_schema else None,
                annotations=notes,
            )
        )
    return infos


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
